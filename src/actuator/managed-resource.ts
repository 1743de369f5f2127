// The per-shoot EnvoyFilters travel in a ManagedResource of class `seed` in the shoot namespace,
// applied by gardener-resource-manager. Its Secret is immutable and named by content hash, so an
// unchanged rendering names the same Secret and nothing is written.
import { createHash } from 'node:crypto';
import type { GeneratedEnvoyFilter } from '../rbac/envoy-filter-types.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../rbac/envoy-filter-types.js';
import { toYamlDocuments } from '../render/yaml-documents.js';

export const MANAGED_RESOURCE_NAME = 'extension-acl';
const DATA_KEY = 'envoyfilters.yaml';

export interface ManagedResourceObjects {
  readonly secret: {
    readonly apiVersion: 'v1';
    readonly kind: 'Secret';
    readonly metadata: { readonly name: string; readonly namespace: string; readonly labels: Record<string, string> };
    readonly immutable: true;
    readonly type: 'Opaque';
    readonly data: Record<string, string>;
  };
  readonly managedResource: {
    readonly apiVersion: 'resources.gardener.cloud/v1alpha1';
    readonly kind: 'ManagedResource';
    readonly metadata: { readonly name: string; readonly namespace: string; readonly labels: Record<string, string> };
    readonly spec: { readonly class: 'seed'; readonly secretRefs: readonly { readonly name: string }[]; readonly keepObjects: false };
  };
}

export function managedResourceObjects(namespace: string, filters: readonly GeneratedEnvoyFilter[]): ManagedResourceObjects {
  const manifest = toYamlDocuments(filters);
  const hash = createHash('sha256').update(manifest).digest('hex').slice(0, 8);
  const labels = { [MANAGED_BY_LABEL]: MANAGED_BY };
  return {
    secret: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `managedresource-${MANAGED_RESOURCE_NAME}-${hash}`, namespace, labels: { ...labels, 'resources.gardener.cloud/garbage-collectable-reference': 'true' } },
      immutable: true,
      type: 'Opaque',
      data: { [DATA_KEY]: Buffer.from(manifest).toString('base64') },
    },
    managedResource: {
      apiVersion: 'resources.gardener.cloud/v1alpha1',
      kind: 'ManagedResource',
      metadata: { name: MANAGED_RESOURCE_NAME, namespace, labels },
      spec: { class: 'seed', secretRefs: [{ name: `managedresource-${MANAGED_RESOURCE_NAME}-${hash}` }], keepObjects: false },
    },
  };
}

/** The manifests inside a ManagedResource Secret's data (for the resource-manager stand-in and tests). */
export function manifestsOf(secretData: Readonly<Record<string, string>>): string {
  return Object.keys(secretData)
    .sort()
    .map((k) => Buffer.from(secretData[k] ?? '', 'base64').toString('utf8'))
    .join('---\n');
}
