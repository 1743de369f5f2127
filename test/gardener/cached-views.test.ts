// Issue 13 (controller memory): the controller's caches keep only what the extension reads. The
// test holds that against what is read: the example seed rendered from the slimmed objects gives
// byte for byte the EnvoyFilters of the full objects, and what is dropped really is gone.
import { describe, expect, it } from 'vitest';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { PolicyInterner, cachedCluster, cachedExtension, cachedInfrastructure, identityOnly, withoutFieldManagement } from '../../src/gardener/cached-views.js';
import { shootNeedsForceDeletion } from '../../src/actuator/handled-extensions.js';
import { planCombinedConnectFilters } from '../../src/rbac/combined-connect-filters.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, testSeed } from '../support/test-seed.js';
import { FORCE_DELETION_ANNOTATION, clusterSchema, extensionSchema, infrastructureSchema } from '../../src/gardener/objects.js';
import { renderSeed } from '../../src/render/seed-render.js';

const MANAGED_FIELDS = [{ manager: 'gardenlet', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }];

function slim(object: unknown): unknown {
  const kind = (object as { kind?: string }).kind;
  if (kind === 'Cluster') return cachedCluster(clusterSchema.parse(object));
  if (kind === 'Extension') return cachedExtension(extensionSchema.parse(object));
  if (kind === 'Infrastructure') return cachedInfrastructure(infrastructureSchema.parse(object));
  if (kind === 'OperatorConfiguration') return object;
  return withoutFieldManagement(object as { metadata: { name: string } });
}

/** The example's objects as a real seed stores them: field management, a CloudProfile, other extension types. */
async function fatExample() {
  const { objects } = await loadDocuments([EMBEDDED_EXAMPLE]);
  const fat = objects.map(({ object, source }) => {
    const o = structuredClone(object) as { kind: string; metadata: Record<string, unknown>; spec?: Record<string, unknown> };
    if (o.kind === 'OperatorConfiguration') return { object: o, source };
    o.metadata['managedFields'] = MANAGED_FIELDS;
    o.metadata['annotations'] = { ...(o.metadata['annotations'] as object | undefined), 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(object) };
    if (o.kind === 'Cluster') o.spec = { ...o.spec, cloudProfile: { kind: 'CloudProfile', spec: { machineImages: Array.from({ length: 50 }, (_, i) => ({ name: `image-${i}` })) } } };
    return { object: o, source };
  });
  const other = fat.filter(({ object }) => (object as { kind: string }).kind === 'Extension').map(({ object, source }) => {
    const e = structuredClone(object) as unknown as { metadata: { name: string }; spec: Record<string, unknown>; status?: unknown };
    return { source, object: { ...e, metadata: { ...e.metadata, name: 'dns' }, spec: { type: 'dns', providerConfig: { zones: ['a', 'b'] } }, status: { lastOperation: { state: 'Succeeded' } } } };
  });
  return [...fat, ...other];
}

describe('cached views', () => {
  it('the example seed renders byte for byte the same from the slimmed objects', async () => {
    const fat = await fatExample();
    const full = renderSeed(fat);
    const slimmed = renderSeed(fat.map(({ object, source }) => ({ object: slim(object), source })));
    expect(full.problems.filter((p) => p.severity === 'error')).toEqual([]);
    expect(JSON.stringify(slimmed)).toBe(JSON.stringify(full));
    expect(full.envoyFilters.length).toBeGreaterThan(10);
  });

  it('drops what is never read: field management, kubectl’s copy, the CloudProfile, other extension types’ config and status', async () => {
    const fat = await fatExample();
    const cluster = fat.find(({ object }) => (object as { kind: string }).kind === 'Cluster')!.object;
    const slimCluster = slim(cluster) as Record<string, unknown>;
    const text = JSON.stringify(slimCluster);
    expect(text).not.toContain('managedFields');
    expect(text).not.toContain('last-applied-configuration');
    expect(text).not.toContain('cloudProfile');
    expect(text.length).toBeLessThan(JSON.stringify(cluster).length / 4);
    const dns = fat.find(({ object }) => (object as { spec?: { type?: string } }).spec?.type === 'dns')!.object;
    expect(slim(dns)).toEqual({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', metadata: expect.not.objectContaining({ managedFields: expect.anything() }), spec: { type: 'dns' } });
    // An acl Extension keeps its status: the controller reads and merges it.
    const acl = fat.find(({ object }) => (object as { spec?: { type?: string } }).spec?.type === 'acl')!.object as { spec: unknown };
    expect((slim(acl) as { spec: unknown }).spec).toEqual(acl.spec);
  });

  it('keeps of the embedded Shoot’s metadata its name and the force-deletion annotation only; of a watched-only object its identity', async () => {
    const fat = await fatExample();
    const cluster = structuredClone(fat.find(({ object }) => (object as { kind: string }).kind === 'Cluster')!.object) as unknown as { spec: { shoot: { metadata: Record<string, unknown> } } };
    const labels = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`shoot.gardener.cloud/label-${i}`, `value-${i}`]));
    cluster.spec.shoot.metadata = { ...cluster.spec.shoot.metadata, labels, annotations: { ...labels, [FORCE_DELETION_ANNOTATION]: 'true' }, uid: 'u', generation: 7 };
    const slimCluster = cachedCluster(clusterSchema.parse(cluster));
    expect(slimCluster.spec.shoot.metadata).toEqual({ name: cluster.spec.shoot.metadata['name'], namespace: cluster.spec.shoot.metadata['namespace'], annotations: { [FORCE_DELETION_ANNOTATION]: 'true' } });
    expect(shootNeedsForceDeletion(slimCluster)).toBe(true);
    delete (cluster.spec.shoot.metadata['annotations'] as Record<string, string>)[FORCE_DELETION_ANNOTATION];
    expect(cachedCluster(clusterSchema.parse(cluster)).spec.shoot.metadata).not.toHaveProperty('annotations');

    const mr = { apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', metadata: { name: 'extension-acl', namespace: 'shoot--p--a', uid: 'u', resourceVersion: '9', labels: { a: 'b' }, managedFields: MANAGED_FIELDS }, spec: { secretRefs: [{ name: 's' }] }, status: { conditions: [] } };
    expect(identityOnly(mr)).toEqual({ apiVersion: mr.apiVersion, kind: mr.kind, metadata: { name: 'extension-acl', namespace: 'shoot--p--a', uid: 'u', resourceVersion: '9' } });
  });

  it('the default form’s ECDS buckets share one object per shoot entry across gateways, equal as JSON to what is stored', async () => {
    const { objects } = await loadDocuments([EMBEDDED_EXAMPLE]);
    const buckets = renderSeed(objects)
      .envoyFilters.filter((f) => /^acl-connect-ecds-b\d+$/.test(f.metadata.name))
      .map((f) => JSON.parse(JSON.stringify(f)) as { metadata: { name: string; namespace: string }; spec: Record<string, unknown> });
    const interner = new PolicyInterner();
    const cached = buckets.map((f) => interner.intern(f));
    expect(JSON.stringify(cached)).toBe(JSON.stringify(buckets));
    /** Every exact-match entry of an object, by the value it is keyed by, with the object it is. */
    const entries = (node: unknown, out: [string, unknown][] = []): [string, unknown][] => {
      if (typeof node !== 'object' || node === null) return out;
      const map = (node as { exact_match_map?: { map?: Record<string, unknown> } }).exact_match_map?.map;
      if (map) out.push(...Object.entries(map));
      for (const value of Object.values(node)) entries(value, out);
      return out;
    };
    const byValue = new Map<string, Set<unknown>>();
    const copies = new Map<string, number>();
    for (const f of cached) for (const [value, entry] of entries(f.spec)) {
      byValue.set(value, (byValue.get(value) ?? new Set()).add(entry));
      copies.set(value, (copies.get(value) ?? 0) + 1);
    }
    // Each shoot of the example is in one bucket per gateway: several copies as JSON, one object in memory.
    const shared = [...copies].filter(([, n]) => n > 1).map(([value]) => value);
    expect(shared.length).toBeGreaterThan(0);
    for (const value of shared) expect(byValue.get(value)?.size, value).toBe(1);
  });

  it('combined filters share one object per shoot policy across gateways and ports, equal as JSON to what is stored', () => {
    const shoots = [
      { id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } },
      { id: 'shoot--p--b', rule: { action: 'DENY', type: 'remote_ip', cidrs: ['198.51.100.0/24'], mode: 'audit' } },
    ];
    const { seed } = testSeed(shoots, { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY] });
    const stored = planCombinedConnectFilters({ ...seed, shoots: seed.shoots }).filters.map((f) => JSON.parse(JSON.stringify(f)) as { spec: Record<string, unknown> });
    expect(stored).toHaveLength(4);
    const interner = new PolicyInterner();
    // A shoot's own SNI filter (same policy key, other content) is cached between the gateways' shards.
    const sniFilter = { spec: { configPatches: [{ patch: { value: { typed_config: { rules: { action: 'DENY', policies: { 'shoot--p--a': { permissions: [{ any: true }], principals: [] } } } } } } }] } };
    const cached = stored.map((f, i) => (i === 2 && interner.intern(sniFilter), interner.intern(f)));
    expect(JSON.stringify(cached)).toBe(JSON.stringify(stored));
    const policyOf = (f: { spec: Record<string, unknown> }, section: string, id: string) =>
      (f.spec['configPatches'] as { patch: { value: { typed_config: Record<string, { policies: Record<string, unknown> }> } } }[])[0]!.patch.value.typed_config[section]!.policies[id];
    const a = cached.map((f) => policyOf(f, 'rules', 'shoot--p--a'));
    const b = cached.map((f) => policyOf(f, 'shadow_rules', 'shoot--p--b'));
    expect(new Set(a).size).toBe(1);
    expect(new Set(b).size).toBe(1);
    // A changed policy is a new object; the unchanged one stays shared.
    const changed = JSON.parse(JSON.stringify(stored[0])) as { spec: Record<string, unknown> };
    const policies = (changed.spec['configPatches'] as { patch: { value: { typed_config: { rules: { policies: Record<string, { principals: unknown[] }> } } } } }[])[0]!.patch.value.typed_config.rules.policies;
    policies['shoot--p--a']!.principals = [{ any: true }];
    const next = interner.intern(changed);
    expect(policyOf(next, 'rules', 'shoot--p--a')).not.toBe(a[0]);
    expect(policyOf(next, 'rules', 'shoot--p--a')).toEqual({ ...(a[0] as object), principals: [{ any: true }] });
    expect(policyOf(next, 'shadow_rules', 'shoot--p--b')).toBe(b[0]);
  });
});
