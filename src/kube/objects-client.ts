// Typed helpers for the writes and reads the controller does: server-side apply, merge and JSON
// patches, status patches, create, delete and get, for any kind (resolved by API discovery).
//
// They go through rest.ts rather than CustomObjectsApi/KubernetesObjectApi: responses are plain
// JSON for built-in kinds too (Secrets of ManagedResources, Leases), JSON Patch arrays can be
// sent (KubernetesObjectApi cannot), and every request has a deadline.
import { KubeConfig, PatchStrategy } from '@kubernetes/client-node';

import { isConflict, isNotFound } from './errors.js';
import { resolveResource, resourcePath } from './discovery.js';
import { kubeObjectJsonSchema, type KubeObjectJson } from './object-json.js';
import type { WriteFence } from './lease-fence.js';
import { restRequest, type HttpMethod, type QueryValue } from './rest.js';

export { isConflict, isNotFound } from './errors.js';
export type { KubeObjectJson } from './object-json.js';

/** Addresses one object (the same shape the actuator uses). */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string | undefined;
}

/**
 * What a full object to create or apply must have. The functions taking one are generic over
 * the caller's type (any interface with these fields will do); every other field (spec, data,
 * ...) is sent as given.
 */
export interface ObjectHeader {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string | undefined; readonly [field: string]: unknown };
}

/** A full object as a literal: the header plus any other fields. */
export type ObjectToWrite = ObjectHeader & { readonly [field: string]: unknown };

export type WriteVerb = 'create' | 'apply' | 'patch' | 'patch-status' | 'delete';
/** Called once per write request sent (also when it then fails), e.g. to count API writes. */
export type WriteHook = (verb: WriteVerb, kind: string) => void;

export interface KubeClient {
  kubeConfig: KubeConfig;
  onWrite?: WriteHook;
  /** Deadline per request (default rest.ts DEFAULT_REQUEST_TIMEOUT_MS). */
  timeoutMs?: number;
  /** Writes are sent only while this allows them, and aborted when it closes (one writer). */
  fence?: WriteFence;
}
/** A bare KubeConfig, or one with a write hook and a request deadline. */
export type KubeTarget = KubeConfig | KubeClient;

/** RFC 6902 operations. */
export type JsonPatchOperation =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; from: string; path: string };

export interface WriteOptions {
  /** Server-side dry run: validated and admitted, not persisted. */
  dryRun?: boolean;
  /** Recorded in managedFields (required for apply, optional otherwise). */
  fieldManager?: string;
}

export interface DeleteOptions {
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
  /** Delete only if the object still has this uid / resourceVersion (409 otherwise). */
  preconditions?: { uid?: string; resourceVersion?: string };
}

export function refOf(obj: ObjectHeader): ObjectRef {
  return { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace };
}

function toClient(target: KubeTarget): KubeClient {
  return target instanceof KubeConfig ? { kubeConfig: target } : target;
}

async function pathOf(kc: KubeConfig, ref: ObjectRef, withName: boolean, subresource?: string): Promise<string> {
  const resource = await resolveResource(kc, ref.apiVersion, ref.kind);
  return resourcePath(resource, {
    namespace: ref.namespace,
    ...(withName ? { name: ref.name } : {}),
    ...(subresource !== undefined ? { subresource } : {}),
  });
}

interface WriteRequest {
  verb: WriteVerb;
  ref: ObjectRef;
  method: HttpMethod;
  /** false: the collection (create). */
  withName: boolean;
  subresource?: string;
  contentType?: string;
  body?: unknown;
  query?: Record<string, QueryValue>;
}

async function send(target: KubeTarget, write: WriteRequest): Promise<unknown> {
  const client = toClient(target);
  const path = await pathOf(client.kubeConfig, write.ref, write.withName, write.subresource);
  client.fence?.check();
  client.onWrite?.(write.verb, write.ref.kind);
  return restRequest(client.kubeConfig, {
    method: write.method,
    path,
    query: write.query,
    body: write.body,
    contentType: write.contentType,
    timeoutMs: client.timeoutMs,
    ...(client.fence ? { signal: client.fence.signal() } : {}),
  });
}

async function sendForObject(target: KubeTarget, write: WriteRequest): Promise<KubeObjectJson> {
  return kubeObjectJsonSchema.parse(await send(target, write));
}

function writeQuery(options: WriteOptions): Record<string, QueryValue> {
  return { dryRun: options.dryRun ? 'All' : undefined, fieldManager: options.fieldManager };
}

/**
 * Server-side apply (PATCH application/apply-patch+yaml; JSON is valid YAML). Creates the object
 * if needed; an identical apply is a no-op on the server (resourceVersion unchanged).
 * `force` takes over fields owned by other managers, as controllers should.
 */
export function serverSideApply<T extends ObjectHeader>(
  target: KubeTarget,
  obj: T,
  fieldManager: string,
  force = true,
  options: Omit<WriteOptions, 'fieldManager'> = {},
): Promise<KubeObjectJson> {
  // The server rejects apply bodies that carry managedFields.
  const metadata: Record<string, unknown> = { ...obj.metadata };
  delete metadata.managedFields;
  return sendForObject(target, {
    verb: 'apply',
    ref: refOf(obj),
    method: 'PATCH',
    withName: true,
    contentType: PatchStrategy.ServerSideApply,
    body: { ...obj, metadata },
    query: { ...writeQuery({ ...options, fieldManager }), force },
  });
}

function patch(
  target: KubeTarget,
  ref: ObjectRef,
  contentType: string,
  body: unknown,
  options: WriteOptions,
): Promise<KubeObjectJson> {
  return sendForObject(target, { verb: 'patch', ref, method: 'PATCH', withName: true, contentType, body, query: writeQuery(options) });
}

/** RFC 7386 merge patch (what CRDs accept; strategic merge is built-ins only). `{}` is a valid no-op write. */
export function mergePatch(
  target: KubeTarget,
  ref: ObjectRef,
  body: Record<string, unknown>,
  options: WriteOptions = {},
): Promise<KubeObjectJson> {
  return patch(target, ref, PatchStrategy.MergePatch, body, options);
}

/** RFC 6902 JSON patch; a failing `test` operation rejects the whole patch (HTTP 422). */
export function jsonPatch(
  target: KubeTarget,
  ref: ObjectRef,
  operations: readonly JsonPatchOperation[],
  options: WriteOptions = {},
): Promise<KubeObjectJson> {
  return patch(target, ref, PatchStrategy.JsonPatch, operations, options);
}

/**
 * Merge patch of the status subresource: sends `{status}`; with `resourceVersion` the write fails
 * with 409 when the object changed since it was read (optimistic locking).
 */
export function patchStatus(
  target: KubeTarget,
  ref: ObjectRef,
  status: Record<string, unknown>,
  options: WriteOptions & { resourceVersion?: string } = {},
): Promise<KubeObjectJson> {
  const body =
    options.resourceVersion === undefined ? { status } : { metadata: { resourceVersion: options.resourceVersion }, status };
  return sendForObject(target, {
    verb: 'patch-status',
    ref,
    method: 'PATCH',
    withName: true,
    subresource: 'status',
    contentType: PatchStrategy.MergePatch,
    body,
    query: writeQuery(options),
  });
}

/** Creates the object; with ignoreAlreadyExists a 409 resolves with undefined instead. */
export async function createObject<T extends ObjectHeader>(
  target: KubeTarget,
  obj: T,
  options: WriteOptions & { ignoreAlreadyExists?: boolean } = {},
): Promise<KubeObjectJson | undefined> {
  try {
    return await sendForObject(target, {
      verb: 'create',
      ref: refOf(obj),
      method: 'POST',
      withName: false,
      body: obj,
      query: writeQuery(options),
    });
  } catch (err) {
    if (options.ignoreAlreadyExists && isConflict(err)) return undefined;
    throw err;
  }
}

/**
 * Deletes the object. Resolves true when the server accepted the delete (the object may live on
 * while finalizers run), false when it was already gone and ignoreNotFound is set (the default).
 */
export async function deleteObject(
  target: KubeTarget,
  ref: ObjectRef,
  ignoreNotFound = true,
  options: DeleteOptions & Pick<WriteOptions, 'dryRun'> = {},
): Promise<boolean> {
  const { dryRun, ...deleteOptions } = options;
  try {
    await send(target, {
      verb: 'delete',
      ref,
      method: 'DELETE',
      withName: true,
      body: Object.keys(deleteOptions).length > 0 ? deleteOptions : undefined,
      query: writeQuery({ dryRun }),
    });
    return true;
  } catch (err) {
    if (ignoreNotFound && isNotFound(err)) return false;
    throw err;
  }
}

/** Reads the object as plain JSON; undefined when it does not exist. */
export async function getObject(target: KubeTarget, ref: ObjectRef): Promise<KubeObjectJson | undefined> {
  const client = toClient(target);
  const path = await pathOf(client.kubeConfig, ref, true);
  try {
    return kubeObjectJsonSchema.parse(await restRequest(client.kubeConfig, { path, timeoutMs: client.timeoutMs }));
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
