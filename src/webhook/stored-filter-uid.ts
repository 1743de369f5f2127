// How the webhook tells a review of a stored legacy filter from a made-up one: it reads the
// stored object's uid (envoy-filter-mutator.ts).
import type { KubeConfig } from '@kubernetes/client-node';
import { getObject } from '../kube/objects-client.js';
import type { StoredUidLookup } from './envoy-filter-mutator.js';

/** A review waits for this read (the API server gives the whole call 10 s by default). */
const STORED_FILTER_READ_MS = 3_000;

export function storedEnvoyFilterUid(kubeConfig: KubeConfig): StoredUidLookup {
  return async (namespace, name) => {
    const stored = await getObject({ kubeConfig, timeoutMs: STORED_FILTER_READ_MS }, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name, namespace });
    return typeof stored?.metadata.uid === 'string' ? stored.metadata.uid : undefined;
  };
}
