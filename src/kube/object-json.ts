// The shape every Kubernetes object shares, as plain JSON, and the key the caches use.
import { z } from 'zod';
import { isRecord } from '../json/record.js';

export const objectMetadataSchema = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().optional(),
  resourceVersion: z.string().optional(),
  uid: z.string().optional(),
});

/** A Kubernetes object as returned by the API server (all other fields kept as they are). */
export const kubeObjectJsonSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  metadata: objectMetadataSchema,
});
export type KubeObjectJson = z.infer<typeof kubeObjectJsonSchema>;

/** client-go's MetaNamespaceKeyFunc: "namespace/name", or "name" for cluster-scoped objects. */
export function objectKey(name: string, namespace?: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

/** objectKey() of an object. */
export function keyOf(obj: { metadata: { name: string; namespace?: string | undefined } }): string {
  return objectKey(obj.metadata.name, obj.metadata.namespace);
}

export { isRecord };

/**
 * The JSON merge patch (RFC 7386) that turns `stored` into exactly `desired`: a merge patch keeps
 * every key it does not mention, so keys `desired` lacks are sent as null (removed).
 */
export function mergePatchTo(stored: unknown, desired: unknown): unknown {
  if (!isRecord(desired) || !isRecord(stored)) return desired;
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(stored)) if (!Object.hasOwn(desired, key)) patch[key] = null;
  for (const [key, value] of Object.entries(desired)) patch[key] = mergePatchTo(stored[key], value);
  return patch;
}
