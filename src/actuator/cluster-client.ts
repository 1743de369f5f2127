// The few API operations the actuator needs, as one port: the reconcilers stay free of transport
// details, and tests or benchmarks can count every write.
import type { ObjectRef } from '../kube/objects-client.js';

export type { ObjectRef } from '../kube/objects-client.js';
export { refOf } from '../kube/objects-client.js';

/** Any whole object the controller writes (generated EnvoyFilters, Secrets, ManagedResources, Events). */
export interface KubeObjectLike {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string | undefined };
}

/** The resourceVersion the server gave the written object, when the transport reports it. */
export type Written = { readonly resourceVersion?: string | undefined } | void;

export interface ClusterClient {
  get(ref: ObjectRef): Promise<Record<string, unknown> | undefined>;
  /** Creates; an object that already exists is left as it is. */
  createIfAbsent(obj: KubeObjectLike): Promise<void>;
  /** Server-side apply with the controller's field manager, taking over conflicting fields. */
  apply(obj: KubeObjectLike): Promise<{ readonly resourceVersion?: string | undefined }>;
  mergePatch(ref: ObjectRef, patch: Record<string, unknown>): Promise<Written>;
  /** RFC 6902; a failing `test` operation rejects the whole patch. */
  jsonPatch(ref: ObjectRef, operations: readonly Record<string, unknown>[]): Promise<Written>;
  /** Merge patch of the status subresource. */
  patchStatus(ref: ObjectRef, status: Record<string, unknown>): Promise<Written>;
  /** Deletes; NotFound counts as done. */
  delete(ref: ObjectRef): Promise<void>;
}
