// Resolves apiVersion + kind to the REST resource (plural name, namespaced or not) through API
// discovery, so callers can address any kind, built-in or custom, by what is written in the object.
import type { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';

import { restRequest } from './rest.js';

export interface ApiResource {
  /** '' for the core group. */
  group: string;
  version: string;
  /** Plural resource name, e.g. 'envoyfilters'. */
  plural: string;
  namespaced: boolean;
}

const resourceListSchema = z.looseObject({
  resources: z.array(z.looseObject({ name: z.string(), kind: z.string(), namespaced: z.boolean() })),
});
type ResourceList = z.infer<typeof resourceListSchema>;

// One cache per KubeConfig (one cluster). Promises are cached so that concurrent callers share
// one discovery request; failures are not cached.
const cacheByConfig = new WeakMap<KubeConfig, Map<string, Promise<ResourceList>>>();

export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

function groupVersionPath(group: string, version: string): string {
  return group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
}

function fetchResourceList(kc: KubeConfig, apiVersion: string, refresh: boolean): Promise<ResourceList> {
  let cache = cacheByConfig.get(kc);
  if (!cache) {
    cache = new Map();
    cacheByConfig.set(kc, cache);
  }
  const cached = cache.get(apiVersion);
  if (cached && !refresh) return cached;
  const { group, version } = splitApiVersion(apiVersion);
  const pending = restRequest(kc, { path: groupVersionPath(group, version) }).then((raw) =>
    resourceListSchema.parse(raw),
  );
  cache.set(apiVersion, pending);
  pending.catch(() => {
    if (cache.get(apiVersion) === pending) cache.delete(apiVersion);
  });
  return pending;
}

function findKind(list: ResourceList, kind: string): ResourceList['resources'][number] | undefined {
  // Subresources ('extensions/status') repeat the kind; the main resource has no slash.
  return list.resources.find((r) => r.kind === kind && !r.name.includes('/'));
}

/** Looks the kind up; a miss refreshes the cached list once (the CRD may be new). */
export async function resolveResource(kc: KubeConfig, apiVersion: string, kind: string): Promise<ApiResource> {
  const { group, version } = splitApiVersion(apiVersion);
  let found = findKind(await fetchResourceList(kc, apiVersion, false), kind);
  found ??= findKind(await fetchResourceList(kc, apiVersion, true), kind);
  if (!found) throw new Error(`the API server does not serve kind ${kind} in ${apiVersion}`);
  return { group, version, plural: found.name, namespaced: found.namespaced };
}

/** The REST path of a collection (no name) or of one object, optionally a subresource. */
export function resourcePath(
  resource: ApiResource,
  target: { namespace?: string | undefined; name?: string; subresource?: string },
): string {
  let path = groupVersionPath(resource.group, resource.version);
  if (resource.namespaced) {
    if (!target.namespace) throw new Error(`${resource.plural} are namespaced: a namespace is required`);
    path += `/namespaces/${encodeURIComponent(target.namespace)}`;
  }
  path += `/${resource.plural}`;
  if (target.name !== undefined) path += `/${encodeURIComponent(target.name)}`;
  if (target.subresource !== undefined) path += `/${target.subresource}`;
  return path;
}
