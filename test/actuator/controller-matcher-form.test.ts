// The controller switching forms against a real kube-apiserver: an upgrade from the earlier
// default (rules) to the default (ecds), and operators choosing matcher or ecds with other bucket
// counts (each said where it is set). What it stores is each form (for matcher an extraction object
// and matcher shards per gateway and port, no rules-form shard), Succeeded waits for it, a foreign
// delete of an extraction object is repaired, and a switch (a restart with the other setting) ends
// with only the new form stored while the shoots stay Succeeded. Then the same for the ECDS delivery: listener parts and every
// bucket on both gateways, the shoots' leaves in their buckets, and a deleted bucket restored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import type { AclController } from '../../src/actuator/controller.js';
import { extractionObjectName, lookupOf, parseExtractionObjectName, parseMatcherFilterName } from '../../src/rbac/connect-matcher.js';
import { ecdsBucketObjectName, ecdsBucketOf, ecdsListenerObjectName, parseEcdsBucketObjectName } from '../../src/rbac/connect-matcher-ecds.js';
import { parseConnectFilterName } from '../../src/rbac/combined-connect-filters.js';
import { listAll } from '../../src/kube/list-watch.js';
import { deleteObject, getObject, mergePatch, type ObjectRef } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs } from '../kube/kube-test-helpers.js';
import { refuseWrites } from '../support/refusing-policy.js';
import { SHARED_HOP_ENTRY_OBJECT, SHARED_HOP_PRIORITY, SHARED_HOP_SHARDS, isSharedHopObjectName, sharedHopObjectName, sharedHopShard, storedHopChains } from '../../src/rbac/shared-tunnel-hop.js';
import { DEFAULT_GW, ZONAL_GW, allowRule, createSeed, denyRule, startTestController, technicalID, type ShootFixture } from './seed-fixture.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const B: ShootFixture = { project: 'p', name: 'b', providerConfig: denyRule('198.51.100.0/24'), gateway: ZONAL_GW };
// Operators' choices other than the default, each said where it is used.
const RULES: OperatorConfig = { ...defaultOperatorConfig(), combinedForm: 'rules' };
const MATCHER: OperatorConfig = { ...defaultOperatorConfig(), combinedForm: 'matcher' };
const ECDS: OperatorConfig = { ...defaultOperatorConfig(), combinedForm: 'ecds', ecdsBuckets: 4 };

interface StoredFilter {
  metadata: { name: string; namespace: string };
  spec: { configPatches: { patch: { value: { typed_config: { matcher?: unknown } } } }[] };
}

describe('controller with the matcher form on a real kube-apiserver', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  let controller: AclController | undefined;

  const combined = async () => (await listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' })).items as unknown as StoredFilter[];
  /** Shoots held by the matcher shards of a gateway namespace and port. */
  const heldIn = (filters: readonly StoredFilter[], namespace: string, port: number) =>
    filters
      .filter((f) => f.metadata.namespace === namespace && parseMatcherFilterName(f.metadata.name)?.port === port)
      .flatMap((f) => f.spec.configPatches.flatMap((p) => Object.keys(lookupOf(p.patch.value.typed_config.matcher)?.map ?? {}).map((k) => k.replace(/^=/, ''))))
      .sort();
  const extRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
  const succeeded = (s: ShootFixture) =>
    eventually(`${technicalID(s)} Succeeded`, async () => {
      const e = (await getObject(cp.kubeConfig, extRef(s))) as { status?: { lastOperation?: { state?: string } } } | undefined;
      return e?.status?.lastOperation?.state === 'Succeeded';
    }, 60_000);
  const settled = async () => {
    await eventually('controller idle', async () => {
      if (!controller?.idle()) return false;
      await sleep(300);
      return controller.idle();
    }, 60_000);
  };
  const matcherStored = async () => {
    const filters = await combined();
    return [DEFAULT_GW, ZONAL_GW].every((gw) =>
      MATCHER.protectedPorts.every(
        (port) =>
          heldIn(filters, gw.namespace, port).join() === ['shoot--p--a', 'shoot--p--a', 'shoot--p--b', 'shoot--p--b'].join() &&
          filters.some((f) => f.metadata.namespace === gw.namespace && f.metadata.name === extractionObjectName(port)),
      ),
    );
  };

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW, ZONAL_GW], [A, B]);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
  }, 120_000);
  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('an upgrade from the earlier default (rules) to the default form, then an operator choosing matcher: each form stored on every gateway and port, the previous one gone, the shoots Succeeded throughout', async () => {
    // The rules form changes the CONNECT listeners with every write, so the chart's least interval
    // (60 s) would hold the second shoot's write for a minute; this test is about the switch.
    controller = await startTestController(cp.kubeConfig, { operator: RULES, combinedMinIntervalMs: 0 });
    await succeeded(A);
    await succeeded(B);
    await settled();
    expect((await combined()).some((f) => parseConnectFilterName(f.metadata.name) !== undefined)).toBe(true);
    await controller.stop();

    // The upgrade: the same seed, the chart's defaults.
    controller = await startTestController(cp.kubeConfig);
    await eventually('the default form stored', () => ecdsStored(defaultOperatorConfig().ecdsBuckets), 60_000);
    await settled();
    expect((await combined()).filter((f) => parseConnectFilterName(f.metadata.name) !== undefined).map((f) => f.metadata.name)).toEqual([]);
    await succeeded(A);
    await succeeded(B);
    await controller.stop();

    controller = await startTestController(cp.kubeConfig, { operator: MATCHER });
    await eventually('matcher form stored', matcherStored, 60_000);
    await settled();
    const filters = await combined();
    expect(filters.filter((f) => parseConnectFilterName(f.metadata.name) !== undefined || parseEcdsBucketObjectName(f.metadata.name) !== undefined).map((f) => f.metadata.name)).toEqual([]);
    await succeeded(A);
    await succeeded(B);
  }, 240_000);

  it('a deleted extraction object comes back (the shards alone would refuse every request naming a shoot)', async () => {
    const ref: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: extractionObjectName(8443), namespace: ZONAL_GW.namespace };
    await deleteObject(cp.kubeConfig, ref);
    await eventually('extraction recreated', () => getObject(cp.kubeConfig, ref), 60_000);
    await eventually('matcher form stored', matcherStored, 60_000);
  }, 90_000);

  /** Shoots held by a gateway's ECDS bucket objects, by bucket name. */
  const heldInBuckets = (filters: readonly StoredFilter[], namespace: string) =>
    new Map(
      filters
        .filter((f) => f.metadata.namespace === namespace && parseEcdsBucketObjectName(f.metadata.name) !== undefined)
        .map((f) => [f.metadata.name, [...new Set(f.spec.configPatches.flatMap((p) => Object.keys(lookupOf(p.patch.value.typed_config.matcher)?.map ?? {})))].sort().join()]),
    );
  const ecdsStored = async (count = ECDS.ecdsBuckets) => {
    const filters = await combined();
    return [DEFAULT_GW, ZONAL_GW].every((gw) => {
      const buckets = heldInBuckets(filters, gw.namespace);
      const names = new Set(filters.filter((f) => f.metadata.namespace === gw.namespace).map((f) => f.metadata.name));
      return (
        buckets.size === count &&
        [A, B].every((s) => buckets.get(ecdsBucketObjectName(ecdsBucketOf(technicalID(s), count)))?.includes(`=${technicalID(s)}`)) &&
        ECDS.protectedPorts.every((port) => names.has(ecdsListenerObjectName(port)))
      );
    });
  };

  it('an operator switching from matcher to ecds: listener parts and every bucket on every gateway, the matcher objects gone, the shoots stay Succeeded', async () => {
    await controller?.stop();
    controller = await startTestController(cp.kubeConfig, { operator: ECDS });
    await eventually('ECDS delivery stored', () => ecdsStored(), 60_000);
    await settled();
    const names = (await combined()).map((f) => f.metadata.name);
    expect(names.filter((n) => parseMatcherFilterName(n) !== undefined || parseExtractionObjectName(n) !== undefined)).toEqual([]);
    await succeeded(A);
    await succeeded(B);
  }, 180_000);

  it('a deleted ECDS bucket comes back (a listener naming a missing resource never starts serving)', async () => {
    const ref: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: ecdsBucketObjectName(ecdsBucketOf(technicalID(A), ECDS.ecdsBuckets)), namespace: DEFAULT_GW.namespace };
    await deleteObject(cp.kubeConfig, ref);
    await eventually('bucket recreated', () => getObject(cp.kubeConfig, ref), 60_000);
    await eventually('ECDS delivery stored', () => ecdsStored(), 60_000);
  }, 90_000);

  /** The shoot's tunnel hop chain is stored at `generation` on both gateways. */
  const hopsAt = async (s: ShootFixture, generation: number) => {
    const stored = await combined();
    return [DEFAULT_GW.namespace, ZONAL_GW.namespace].every((ns) => storedHopChains(stored.filter((f) => f.metadata.namespace === ns)).get(technicalID(s)) === generation);
  };
  const tunnelState = async (s: ShootFixture) =>
    ((await getObject(cp.kubeConfig, extRef(s))) as { status?: { state?: { tunnels?: { generation: number; raiseFrom?: number }; gatewayNamespaces?: string[] } } } | undefined)?.status?.state;
  const setRule = (s: ShootFixture, providerConfig: unknown) =>
    mergePatch(cp.kubeConfig, extRef(s), { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } }, spec: { providerConfig } });
  /** The stored bucket that holds A on the default gateway, as text. */
  const bucketOfA = async () => JSON.stringify((await combined()).find((f) => f.metadata.namespace === DEFAULT_GW.namespace && f.metadata.name === ecdsBucketObjectName(ecdsBucketOf(technicalID(A), ECDS.ecdsBuckets))));

  it('tunnelRevocation hop (the default): the shared hop on every gateway; a tightening raises the generation only once the stored buckets hold it, Succeeded once the hop holds it; a loosening does not raise', async () => {
    await controller?.stop();
    controller = await startTestController(cp.kubeConfig, { operator: ECDS });
    expect(ECDS.tunnelRevocation).toBe('hop');
    // Every shard and the entry on both gateways, the shoot's chain in its shard at the generation
    // recorded when it turns Succeeded (1, or 2 where its first ACL was recorded before the filters
    // were stored: a tunnel may have been admitted without it in between).
    await succeeded(A);
    await settled();
    const g0 = (await tunnelState(A))?.tunnels?.generation ?? 0;
    expect(g0).toBeGreaterThanOrEqual(1);
    expect(await hopsAt(A, g0)).toBe(true);
    const hopObjects = (await combined()).filter((f) => isSharedHopObjectName(f.metadata.name)) as unknown as { metadata: { name: string; namespace: string }; spec: { priority?: number } }[];
    const names = [SHARED_HOP_ENTRY_OBJECT, ...Array.from({ length: SHARED_HOP_SHARDS }, (_, k) => sharedHopObjectName(k))].sort();
    expect(hopObjects.map((o) => `${o.metadata.namespace}/${o.metadata.name}/${o.spec.priority}`).sort()).toEqual(
      [DEFAULT_GW.namespace, ZONAL_GW.namespace].flatMap((ns) => names.map((n) => `${ns}/${n}/${SHARED_HOP_PRIORITY}`)).sort(),
    );
    expect(JSON.stringify(hopObjects.find((o) => o.metadata.name === sharedHopObjectName(sharedHopShard(technicalID(A)))))).toContain(`"${technicalID(A)}/${g0}"`);
    expect((await tunnelState(A))?.gatewayNamespaces).toEqual([DEFAULT_GW.namespace]);

    // While the API server refuses the CONNECT filters' writes, the tightened ACL is recorded with
    // its raise, but the hop keeps the generation it is raised from: closed tunnels would
    // reconnect under the old filters.
    const removePolicy = await refuseWrites(
      cp.kubeConfig,
      'refuse-combined',
      { apiGroup: 'networking.istio.io', resource: 'envoyfilters', expression: "!object.metadata.name.startsWith('acl-connect')", message: 'combined filters are frozen by the test' },
      async () => mergePatch(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: ecdsListenerObjectName(8443), namespace: DEFAULT_GW.namespace }, { metadata: { labels: { probe: 'x' } } }),
    );
    try {
      await setRule(A, allowRule('203.0.113.0/25'));
      await eventually('tightened ACL recorded, not yet stored', async () => {
        const e = (await getObject(cp.kubeConfig, extRef(A))) as { status?: { lastError?: { description?: string }; state?: { applied?: { rule: { cidrs: string[] } } } } } | undefined;
        return e?.status?.state?.applied?.rule.cidrs.join() === '203.0.113.0/25' && (e.status.lastError?.description ?? '').includes('combined filters are frozen by the test');
      }, 60_000);
      expect(await bucketOfA()).not.toContain('"address_prefix":"203.0.113.0","prefix_len":25');
      expect(await hopsAt(A, g0)).toBe(true);
      expect(await hopsAt(A, g0 + 1)).toBe(false);
      expect((await tunnelState(A))?.tunnels).toMatchObject({ generation: g0 + 1, raiseFrom: g0 });
    } finally {
      await removePolicy();
    }
    await eventually('the hop one generation up', () => hopsAt(A, g0 + 1), 60_000);
    expect(await bucketOfA()).toContain('"address_prefix":"203.0.113.0","prefix_len":25');
    await succeeded(A);
    await settled();
    expect((await tunnelState(A))?.tunnels?.generation).toBe(g0 + 1);
    expect((await tunnelState(A))?.tunnels?.raiseFrom).toBeUndefined();

    await setRule(A, allowRule('203.0.113.0/25', '198.18.0.0/15'));
    await eventually('loosened ACL stored', async () => (await bucketOfA()).includes('"address_prefix":"198.18.0.0","prefix_len":15'), 60_000);
    await succeeded(A);
    await settled();
    expect(await hopsAt(A, g0 + 1)).toBe(true);
    expect((await tunnelState(A))?.tunnels?.generation).toBe(g0 + 1);

    // Back to the narrower rule: tunnels opened under the looser one must go.
    await setRule(A, allowRule('203.0.113.0/25'));
    await eventually('the hop two generations up', () => hopsAt(A, g0 + 2), 60_000);
    await succeeded(A);
    // Succeeded means the hop holds the raised generation on every gateway.
    expect(await hopsAt(A, g0 + 2)).toBe(true);
  }, 240_000);
});
