// What a command reads from a live cluster, as the documents a file would hold: each list's items
// with the apiVersion and kind that list items do not carry themselves.
import type { KubeConfig } from '@kubernetes/client-node';
import type { SourcedObject } from '../gardener/inventory.js';
import type { WatchedResource } from '../gardener/watched-resources.js';
import { listAll } from '../kube/list-watch.js';

export interface LiveSource extends WatchedResource {
  readonly kubeConfig: KubeConfig;
  readonly apiVersion: string;
  readonly kind: string;
  /** How the objects name where they came from (e.g. `seed`). */
  readonly origin: string;
}

export async function listedObjects(sources: readonly LiveSource[]): Promise<SourcedObject[]> {
  const objects: SourcedObject[] = [];
  for (const { kubeConfig, path, labelSelector, fieldSelector, apiVersion, kind, origin } of sources) {
    const list = await listAll(kubeConfig, path, { ...(labelSelector ? { labelSelector } : {}), ...(fieldSelector ? { fieldSelector } : {}) });
    for (const item of list.items) objects.push({ object: { ...item, apiVersion, kind }, source: `${origin} ${path}` });
  }
  return objects;
}
