// The shape every Kubernetes object shares, as plain JSON, and the key the caches use.
import { z } from 'zod';

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

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
