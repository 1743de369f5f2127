// The few API operations the actuator needs, so its logic does not depend on how they are sent.

export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string | undefined;
}

export interface KubeObjectLike {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string | undefined };
}

export interface ClusterClient {
  get(ref: ObjectRef): Promise<Record<string, unknown> | undefined>;
  /** Creates; an object that already exists is left as it is. */
  createIfAbsent(obj: KubeObjectLike): Promise<void>;
  /** Server-side apply with the controller's field manager, taking over conflicting fields. */
  apply(obj: KubeObjectLike): Promise<void>;
  mergePatch(ref: ObjectRef, patch: Record<string, unknown>): Promise<void>;
  /** RFC 6902; a failing `test` operation rejects the whole patch. */
  jsonPatch(ref: ObjectRef, operations: readonly Record<string, unknown>[]): Promise<void>;
  mergePatchStatus(ref: ObjectRef, patch: Record<string, unknown>): Promise<void>;
  /** Deletes; NotFound counts as done. */
  delete(ref: ObjectRef): Promise<void>;
}

export function refOf(obj: KubeObjectLike): ObjectRef {
  return { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace };
}
