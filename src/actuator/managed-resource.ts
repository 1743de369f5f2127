// The per-shoot EnvoyFilters travel in a ManagedResource of class `seed` in the shoot namespace,
// applied by gardener-resource-manager. Its Secret is immutable and named by content hash, so an
// unchanged rendering names the same Secret and nothing is written.
//
// The Secret carries `resources.gardener.cloud/garbage-collectable-reference`, so the resource
// manager's garbage collector deletes it once nothing references it (that also removes a previous
// Secret left behind by a crash between the apply and the delete). The collector counts as
// references only `reference.resources.gardener.cloud/<kind>-<first 8 hex of sha256(name)>`
// annotations (gardener pkg/resourcemanager/controller/garbagecollector/references): without it
// the Secret of a live ManagedResource is collected and the filters stop being applied.
//
// `keepObjects: true` while the shoot is protected: a ManagedResource deleted by anyone but the
// controller leaves the filters stored (the resource manager deletes applied objects only when
// keepObjects is false) until the controller writes it again and the resource manager adopts
// them. The controller sets it to false just before it deletes the ManagedResource itself.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ShootEnvoyFilter } from '../rbac/shoot-envoy-filters.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../rbac/envoy-filter-types.js';
import { yamlDocument } from '../kube/yaml-documents.js';

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
    readonly metadata: { readonly name: string; readonly namespace: string; readonly labels: Record<string, string>; readonly annotations: Record<string, string> };
    readonly spec: { readonly class: 'seed'; readonly secretRefs: readonly { readonly name: string }[]; readonly keepObjects: true };
  };
}

const sha256Hex8 = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 8);

/** The annotation by which the resource manager's garbage collector sees that `secretName` is in use. */
export function secretReferenceAnnotation(secretName: string): [string, string] {
  return [`reference.resources.gardener.cloud/secret-${sha256Hex8(secretName)}`, secretName];
}

export function managedResourceObjects(namespace: string, filters: readonly ShootEnvoyFilter[], name: string = MANAGED_RESOURCE_NAME): ManagedResourceObjects {
  // yamlDocument writes what the yaml library would, byte for byte (test/render/yaml-document.test.ts),
  // in a tenth of its time: this ran on every reconcile and was a fifth of a soak's controller CPU.
  const manifest = filters.map(yamlDocument).join('---\n');
  const secretName = `managedresource-${name}-${sha256Hex8(manifest)}`;
  const labels = { [MANAGED_BY_LABEL]: MANAGED_BY };
  const [refKey, refValue] = secretReferenceAnnotation(secretName);
  return {
    secret: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace, labels: { ...labels, 'resources.gardener.cloud/garbage-collectable-reference': 'true' } },
      immutable: true,
      type: 'Opaque',
      data: { [DATA_KEY]: Buffer.from(manifest).toString('base64') },
    },
    managedResource: {
      apiVersion: 'resources.gardener.cloud/v1alpha1',
      kind: 'ManagedResource',
      metadata: { name, namespace, labels, annotations: { [refKey]: refValue } },
      spec: { class: 'seed', secretRefs: [{ name: secretName }], keepObjects: true },
    },
  };
}

const storedManagedResourceSchema = z.object({
  metadata: z.object({
    generation: z.number().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
  }),
  spec: z.object({ class: z.string().optional(), secretRefs: z.array(z.object({ name: z.string() })).optional(), keepObjects: z.boolean().optional() }).optional(),
  status: z
    .object({
      observedGeneration: z.number().optional(),
      conditions: z.array(z.object({ type: z.string(), status: z.string(), reason: z.string().optional(), message: z.string().optional() })).optional(),
    })
    .optional(),
});

/**
 * What the resource manager says about the stored ManagedResource, judged as gardenlet judges it
 * (pkg/utils/kubernetes/health CheckManagedResourceApplied): applied only when it has observed the
 * current generation and reports ResourcesApplied=True. Anything else means the per-shoot filters
 * may not be stored yet, or not as this generation says.
 */
export type ManagedResourceProgress =
  | { readonly kind: 'applied' }
  | { readonly kind: 'waiting'; readonly detail: string }
  | { readonly kind: 'failed'; readonly detail: string };

export function managedResourceProgress(stored: unknown): ManagedResourceProgress {
  const parsed = storedManagedResourceSchema.safeParse(stored);
  if (stored === undefined || !parsed.success) return { kind: 'waiting', detail: 'it is not stored' };
  const { metadata, status } = parsed.data;
  if (metadata.generation === undefined || status?.observedGeneration !== metadata.generation) {
    return { kind: 'waiting', detail: `the resource manager has not yet observed generation ${metadata.generation ?? '?'} (observed: ${status?.observedGeneration ?? 'none'})` };
  }
  const applied = (status.conditions ?? []).find((c) => c.type === 'ResourcesApplied');
  if (applied === undefined) return { kind: 'waiting', detail: 'the resource manager has not reported ResourcesApplied yet' };
  if (applied.status === 'True') return { kind: 'applied' };
  const said = `ResourcesApplied=${applied.status}${applied.reason ? ` (${applied.reason})` : ''}${applied.message ? `: ${applied.message}` : ''}`;
  return applied.status === 'False' ? { kind: 'failed', detail: said } : { kind: 'waiting', detail: said };
}

export interface StoredManagedResourceCheck {
  /** The stored object already says what `desired` says (spec, our labels, the reference annotation). */
  readonly upToDate: boolean;
  /** The resource manager reports that it could not apply it (for example its Secret is gone). */
  readonly notApplied: boolean;
}

/** Compares a stored ManagedResource (raw JSON, or undefined when absent) with the desired one. */
export function checkStoredManagedResource(stored: unknown, desired: ManagedResourceObjects['managedResource']): StoredManagedResourceCheck {
  const parsed = storedManagedResourceSchema.safeParse(stored);
  if (stored === undefined || !parsed.success) return { upToDate: false, notApplied: false };
  const { metadata, spec, status } = parsed.data;
  const refs = (spec?.secretRefs ?? []).map((r) => r.name);
  const wanted = desired.spec.secretRefs.map((r) => r.name);
  const has = (actual: Record<string, string> | undefined, expected: Record<string, string>) =>
    Object.entries(expected).every(([k, v]) => actual?.[k] === v);
  const upToDate =
    spec?.class === desired.spec.class &&
    spec.keepObjects === desired.spec.keepObjects &&
    refs.length === wanted.length &&
    refs.every((r, i) => r === wanted[i]) &&
    has(metadata.labels, desired.metadata.labels) &&
    has(metadata.annotations, desired.metadata.annotations);
  const notApplied = (status?.conditions ?? []).some((c) => c.type === 'ResourcesApplied' && c.status === 'False');
  return { upToDate, notApplied };
}

/** The manifests inside a ManagedResource Secret's data (for the resource-manager stand-in and tests). */
export function manifestsOf(secretData: Readonly<Record<string, string>>): string {
  return Object.keys(secretData)
    .sort()
    .map((k) => Buffer.from(secretData[k] ?? '', 'base64').toString('utf8'))
    .join('---\n');
}
