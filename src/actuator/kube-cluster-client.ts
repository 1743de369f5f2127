import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { WriteFence } from '../kube/lease-fence.js';
import { createApiWriteCounter } from '../kube/metrics.js';
import {
  createObject,
  deleteObject,
  getObject,
  jsonPatch,
  mergePatch,
  patchStatus,
  serverSideApply,
  type JsonPatchOperation,
  type KubeClient,
  type WriteHook,
} from '../kube/objects-client.js';
import type { ClusterClient, KubeObjectLike, ObjectRef, Written } from './cluster-client.js';

export const FIELD_MANAGER = 'gardener-acl';

const versionOf = (stored: { readonly metadata: { readonly resourceVersion?: string | undefined } }): Written => ({ resourceVersion: stored.metadata.resourceVersion });


/** The actuator's port over the real API server; every write is counted. */
export class KubeClusterClient implements ClusterClient {
  private readonly target: KubeClient;

  constructor(kubeConfig: KubeConfig, options: { registry?: Registry; onWrite?: WriteHook; fence?: WriteFence } = {}) {
    const counter = options.registry ? createApiWriteCounter(options.registry) : undefined;
    this.target = {
      kubeConfig,
      ...(options.fence ? { fence: options.fence } : {}),
      onWrite: (verb, kind) => {
        counter?.(verb, kind);
        options.onWrite?.(verb, kind);
      },
    };
  }

  async get(ref: ObjectRef): Promise<Record<string, unknown> | undefined> {
    return getObject(this.target, ref);
  }

  async createIfAbsent(obj: KubeObjectLike): Promise<void> {
    await createObject(this.target, obj, { ignoreAlreadyExists: true, fieldManager: FIELD_MANAGER });
  }

  async apply(obj: KubeObjectLike): Promise<{ resourceVersion?: string | undefined }> {
    const stored = await serverSideApply(this.target, obj, FIELD_MANAGER, true);
    return { resourceVersion: stored.metadata.resourceVersion };
  }

  async mergePatch(ref: ObjectRef, patch: Record<string, unknown>): Promise<Written> {
    return versionOf(await mergePatch(this.target, ref, patch, { fieldManager: FIELD_MANAGER }));
  }

  async jsonPatch(ref: ObjectRef, operations: readonly Record<string, unknown>[]): Promise<Written> {
    return versionOf(await jsonPatch(this.target, ref, operations as readonly JsonPatchOperation[], { fieldManager: FIELD_MANAGER }));
  }

  async patchStatus(ref: ObjectRef, status: Record<string, unknown>): Promise<Written> {
    return versionOf(await patchStatus(this.target, ref, status, { fieldManager: FIELD_MANAGER }));
  }

  async delete(ref: ObjectRef): Promise<void> {
    await deleteObject(this.target, ref, true);
  }
}
