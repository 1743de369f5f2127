// The write plan of the combined CONNECT filters, replayed write by write against a simulated
// store: after every single write or delete, every active ACL shoot is in some stored shard on
// every gateway and port (add before remove), whatever the shard count does. This file runs the
// rules form (combinedForm: rules), whose shards come and go with the shoots and whose content the
// helpers here read; the default form's fixed buckets are replayed write by write in
// combined-form-switch.test.ts, which covers every form. Also set here: tunnelRevocation none (the
// tunnel hop's objects decide nothing; how the plan carries them is test/rbac/shared-tunnel-hop.test.ts).
import type { PolicyEntry } from '../../src/rbac/filter-values.js';
import { describe, expect, it } from 'vitest';
import type { GatewayWorkload } from '../../src/acl/model.js';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import type { AppliedAcl } from '../../src/gardener/applied-state.js';
import type { ClusterClient } from '../../src/actuator/cluster-client.js';
import { storedCoverage, uncoveredPaths } from '../../src/actuator/combined-coverage.js';
import { CombinedSyncer, appliedAcls, combinedGateways, planCombinedWrites } from '../../src/actuator/combined-syncer.js';
import type { EnvoyFilterObject, Extension } from '../../src/gardener/objects.js';
import { combinedConnectEntry, planCombinedConnectFilters } from '../../src/rbac/combined-connect-filters.js';
import { testLogger } from '../kube/kube-test-helpers.js';
import { keyOf, replayPlan, type Store } from '../support/write-plan-replay.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, cidr, rule } from '../support/test-seed.js';

const operator: OperatorConfig = { ...defaultOperatorConfig(), combinedForm: 'rules', maxObjectBytes: 16 * 1024, tunnelRevocation: 'none' };
const GATEWAYS: GatewayWorkload[] = [DEFAULT_GATEWAY, ZONAL_GATEWAY];
const ALWAYS = ['10.96.0.0/11', '10.180.0.0/16', '10.250.0.0/16', '198.51.100.1/32'].map(cidr);

const shoot = (i: number, cidrs = [`203.0.${i}.0/24`], alwaysAllowed = ALWAYS): AppliedAcl => ({
  technicalID: `shoot--grow--s${String(i).padStart(2, '0')}`,
  rule: rule('ALLOW', 'remote_ip', cidrs),
  alwaysAllowed,
  legacyProxyAllowed: [],
});
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => shoot(from + i));


/** Every shoot of `expected` (id -> acceptable policies) is covered on every gateway and port of the store. */
function gaps(store: Store, expected: ReadonlyMap<string, readonly PolicyEntry<unknown>[]>): string[] {
  const coverage = storedCoverage([...store.values()]);
  const namespaces = GATEWAYS.map((g) => g.namespace);
  return [...expected].flatMap(([id, policies]) => {
    const missing = policies.map((p) => uncoveredPaths(coverage, id, p, namespaces, operator.protectedPorts));
    // Covered by any acceptable policy (old or new ACL) on each path.
    const first = missing[0] ?? [];
    return first.filter((path) => missing.every((m) => m.includes(path))).map((path) => `${id} on ${path}`);
  });
}

/** Plans one sync from the store and replays it; returns the gaps seen after each step and the number of steps. */
function replay(store: Store, shoots: readonly AppliedAcl[], mustStay: ReadonlyMap<string, readonly PolicyEntry<unknown>[]>, gateways = GATEWAYS): { gapsSeen: string[]; steps: number } {
  const plan = planCombinedWrites({ operator, gateways, shoots, stored: [...store.values()] });
  const { gaps: gapsSeen, steps } = replayPlan(store, plan, () => gaps(store, mustStay));
  return { gapsSeen, steps };
}

const policies = (shoots: readonly AppliedAcl[]) => new Map(shoots.map((s) => [s.technicalID, [combinedConnectEntry(s, operator)]]));
/** The store holds exactly what the generator wants for these shoots. */
function exactly(store: Store, shoots: readonly AppliedAcl[]): void {
  const wanted = planCombinedConnectFilters({ operator, gateways: GATEWAYS, shoots }).filters;
  expect([...store.keys()].sort()).toEqual(wanted.map(keyOf).sort());
  for (const f of wanted) expect(store.get(keyOf(f))?.spec).toEqual(JSON.parse(JSON.stringify(f.spec)));
}

describe('combined filter write plan (add before remove)', () => {
  it('point 3: grow 20 -> 26 and shrink back: every active shoot is stored after every write', () => {
    const store: Store = new Map();
    replay(store, range(0, 20), new Map());
    exactly(store, range(0, 20));
    const shards = (s: Store) => [...s.keys()].filter((k) => k.startsWith('istio-ingress/acl-connect-8132-')).length;
    expect(shards(store)).toBe(3);

    const grow = replay(store, range(0, 26), policies(range(0, 20)));
    expect(shards(store)).toBe(5);
    expect(grow.gapsSeen).toEqual([]);
    expect(grow.steps).toBeGreaterThan(8);
    exactly(store, range(0, 26));
    // Converged: a second sync writes nothing.
    const again = planCombinedWrites({ operator, gateways: GATEWAYS, shoots: range(0, 26), stored: [...store.values()] });
    expect([again.grow.length, again.settle.length, again.deletions.length]).toEqual([0, 0, 0]);

    // One at a time, too.
    const stepwise: Store = new Map();
    replay(stepwise, range(0, 20), new Map());
    for (let n = 21; n <= 26; n++) expect(replay(stepwise, range(0, n), policies(range(0, n - 1))).gapsSeen).toEqual([]);
    exactly(stepwise, range(0, 26));

    const shrink = replay(store, range(0, 20), policies(range(0, 20)));
    expect(shrink.gapsSeen).toEqual([]);
    expect(shards(store)).toBe(3);
    exactly(store, range(0, 20));
  });

  it('a stored filter that a foreign edit gave an RBAC matcher protects nobody as recorded (Envoy ignores its rules then)', () => {
    const store: Store = new Map();
    replay(store, range(0, 3), new Map());
    const namespaces = GATEWAYS.map((g) => g.namespace);
    const before = uncoveredPaths(storedCoverage([...store.values()]), shoot(1).technicalID, combinedConnectEntry(shoot(1), operator), namespaces, operator.protectedPorts);
    expect(before).toEqual([]);
    const edited = [...store.values()].map((f) => {
      const copy = JSON.parse(JSON.stringify(f)) as EnvoyFilterObject & { spec: { configPatches: { patch: { value: { typed_config: Record<string, unknown> } } }[] } };
      for (const p of copy.spec.configPatches) p.patch.value.typed_config['matcher'] = { matcher_tree: {} };
      return copy;
    });
    expect(uncoveredPaths(storedCoverage(edited), shoot(1).technicalID, combinedConnectEntry(shoot(1), operator), namespaces, operator.protectedPorts)).toHaveLength(namespaces.length * operator.protectedPorts.length);
  });

  it('audit mode: a shoot switched to audit moves to its shard\'s shadow rules in one write, and coverage tells the modes apart', () => {
    const store: Store = new Map();
    replay(store, range(0, 20), new Map());
    const audited: AppliedAcl = { ...shoot(5), rule: { ...shoot(5).rule, mode: 'audit' } };
    const next = range(0, 20).map((s) => (s.technicalID === audited.technicalID ? audited : s));
    const plan = planCombinedWrites({ operator, gateways: GATEWAYS, shoots: next, stored: [...store.values()] });
    // One shard per gateway and port changes, and directly to its final content.
    expect(plan.grow).toHaveLength(GATEWAYS.length * operator.protectedPorts.length);
    expect([plan.settle.length, plan.deletions.length]).toEqual([0, 0]);
    replay(store, next, new Map());
    exactly(store, next);
    const holding = [...store.values()].filter((f) => JSON.stringify(f.spec).includes(audited.technicalID));
    for (const filter of holding) {
      const config = (filter.spec as { configPatches: { patch: { value: { typed_config: Record<string, { policies?: Record<string, unknown> } | boolean> } } }[] }).configPatches[0]!.patch.value.typed_config;
      expect(Object.keys((config['shadow_rules'] as { policies: object }).policies)).toEqual([audited.technicalID]);
      expect(Object.keys((config['rules'] as { policies: object }).policies)).not.toContain(audited.technicalID);
      expect(config['track_per_rule_stats']).toBe(true);
    }
    const coverage = storedCoverage([...store.values()]);
    const namespaces = GATEWAYS.map((g) => g.namespace);
    expect(uncoveredPaths(coverage, audited.technicalID, combinedConnectEntry(audited, operator), namespaces, operator.protectedPorts)).toEqual([]);
    // The enforced form of the same policy is not what is stored: Succeeded would be a lie.
    expect(uncoveredPaths(coverage, audited.technicalID, combinedConnectEntry(shoot(5), operator), namespaces, operator.protectedPorts)).toHaveLength(namespaces.length * operator.protectedPorts.length);
  });

  it('point 3: a shoot whose ACL changes while it moves carries its old or its new policy at every step, never none', () => {
    const store: Store = new Map();
    replay(store, range(0, 20), new Map());
    const changed = shoot(3, ['192.0.2.0/24', '2001:db8::/32']);
    const next = [...range(0, 26).filter((s) => s.technicalID !== changed.technicalID), changed];
    const mustStay = policies(range(0, 20));
    mustStay.set(changed.technicalID, [combinedConnectEntry(shoot(3), operator), combinedConnectEntry(changed, operator)]);
    expect(replay(store, next, mustStay).gapsSeen).toEqual([]);
    exactly(store, next);
  });

  it('point 3: a shoot being deleted is removed directly', () => {
    const store: Store = new Map();
    replay(store, range(0, 20), new Map());
    const remaining = range(0, 20).filter((s) => s.technicalID !== 'shoot--grow--s05');
    expect(replay(store, remaining, policies(remaining)).gapsSeen).toEqual([]);
    exactly(store, remaining);
  });

  it('point 5: a shoot too large for a shard is reported and keeps its stored policy; the others are written', () => {
    const store: Store = new Map();
    replay(store, range(0, 20), new Map());
    const before = policies(range(0, 20));
    const huge = shoot(1, ['203.0.1.0/24'], Array.from({ length: 200 }, (_, i) => cidr(`198.18.${i}.7/32`)));
    const shoots = [...range(0, 20).filter((s) => s.technicalID !== huge.technicalID), huge, shoot(30)];
    const plan = planCombinedWrites({ operator, gateways: GATEWAYS, shoots, stored: [...store.values()] });
    expect(plan.unplaced).toEqual(
      new Map([
        [
          huge.technicalID,
          'the combined CONNECT policy of shoot--grow--s01 needs 27924 bytes, more than the 12288 bytes one combined filter may hold (operator maxObjectBytes 16384 minus 4096 for the object around it); list fewer or wider CIDRs, or raise maxObjectBytes',
        ],
      ]),
    );
    const mustStay = new Map([...before, ...policies([shoot(30)])]);
    const result = replay(store, shoots, new Map([...before]));
    expect(result.gapsSeen).toEqual([]);
    // s01 keeps its old policy, s30 is in, nothing else changed.
    expect(gaps(store, mustStay)).toEqual([]);
    // Stable: the next sync writes nothing.
    const again = planCombinedWrites({ operator, gateways: GATEWAYS, shoots, stored: [...store.values()] });
    expect([again.grow.length, again.settle.length, again.deletions.length]).toEqual([0, 0, 0]);
    // Once deleted, it goes.
    replay(store, shoots.filter((s) => s !== huge), new Map());
    expect(storedCoverage([...store.values()]).get('istio-ingress')?.get(8132)?.has(huge.technicalID)).toBe(false);
  });

  it('point 2: a gateway without Deployment is kept from its stored filters, with their selector', () => {
    const store: Store = new Map();
    replay(store, range(0, 5), new Map());
    const stored = [...store.values()];
    expect(combinedGateways([DEFAULT_GATEWAY], stored)).toEqual(GATEWAYS);
    expect(combinedGateways([], stored)).toEqual(GATEWAYS);
    // No Deployment at all: nothing deleted, changes still reach every gateway.
    const next = [...range(0, 5), shoot(9)];
    const result = replay(store, next, policies(range(0, 5)), combinedGateways([], stored));
    expect(result.gapsSeen).toEqual([]);
    exactly(store, next);
  });

  it('point 2: writes and deletes nothing before the caches have synced', async () => {
    const calls: string[] = [];
    const record = (verb: string) => async (): Promise<void> => {
      calls.push(verb);
    };
    const client: ClusterClient = {
      get: async () => undefined,
      createIfAbsent: record('create'),
      apply: async () => {
        calls.push('apply');
        return {};
      },
      mergePatch: record('merge'),
      jsonPatch: record('json'),
      patchStatus: record('status'),
      delete: record('delete'),
    };
    const store: Store = new Map();
    replay(store, range(0, 3), new Map());
    const syncer = new CombinedSyncer({ client, operator, extensions: () => [], gateways: () => [], existing: () => [...store.values()], cachesSynced: () => false, logger: testLogger() });
    await expect(syncer.sync()).rejects.toThrow(
      'combined CONNECT filters: the Extension, gateway Deployment and EnvoyFilter caches have not listed yet; nothing is written or deleted until they have',
    );
    expect(calls).toEqual([]);
  });

  it('a cache that has not shown our own writes yet causes no second write; a foreign delete after it is still repaired', async () => {
    const calls: string[] = [];
    let rv = 100;
    const server: Store = new Map();
    const client: ClusterClient = {
      get: async () => undefined,
      createIfAbsent: async () => undefined,
      apply: async (obj) => {
        calls.push(`apply ${obj.metadata.name}`);
        rv++;
        const stored = { ...(JSON.parse(JSON.stringify(obj)) as EnvoyFilterObject) };
        stored.metadata = { ...stored.metadata, resourceVersion: String(rv) };
        server.set(keyOf(stored), stored);
        return { resourceVersion: String(rv) };
      },
      mergePatch: async () => undefined,
      jsonPatch: async () => undefined,
      patchStatus: async () => undefined,
      delete: async (ref) => {
        calls.push(`delete ${ref.name}`);
        server.delete(`${ref.namespace ?? ''}/${ref.name}`);
      },
    };
    const extensions = range(0, 3).map((acl) => ({
      apiVersion: 'extensions.gardener.cloud/v1alpha1',
      kind: 'Extension',
      metadata: { name: 'acl', namespace: acl.technicalID },
      spec: { type: 'acl' },
      status: { state: { applied: { rule: { action: acl.rule.action, type: acl.rule.type, cidrs: ['203.0.0.0/24'] }, alwaysAllowed: ['10.250.0.0/16'], legacyProxyAllowed: [] } } },
    })) as unknown as Extension[];
    // The cache: a snapshot of the server taken only when the test says so, with its watch position.
    let cache: EnvoyFilterObject[] = [];
    let progress = '100';
    const catchUp = () => {
      cache = [...server.values()];
      progress = String(rv);
    };
    let clock = 0;
    const syncer = new CombinedSyncer({
      client,
      operator,
      extensions: () => extensions,
      gateways: () => GATEWAYS,
      existing: () => cache,
      cachesSynced: () => true,
      cacheProgress: () => progress,
      logger: testLogger(),
      now: () => clock,
    });
    const first = await syncer.sync();
    expect(first.applied).toBe(4); // 2 gateways x 2 ports, one shard each
    calls.length = 0;
    // The cache has not seen those writes: on main this wrote all four again.
    expect(await syncer.sync()).toMatchObject({ applied: 0, deleted: 0, waitingForCache: true });
    expect(calls).toEqual([]);
    catchUp();
    expect(await syncer.sync()).toMatchObject({ applied: 0, deleted: 0 });
    expect(calls).toEqual([]);
    // What protection() and holds() read follows the cache whenever a stored filter changes.
    const [acl] = appliedAcls(extensions);
    if (!acl) throw new Error('no recorded ACL');
    expect(syncer.protection(acl).uncovered).toEqual([]);
    expect(syncer.holds(acl.technicalID)).toBe(true);
    // A foreign delete seen by the cache is repaired at once.
    const [victim] = cache;
    if (!victim) throw new Error('no stored filter');
    server.delete(keyOf(victim));
    catchUp();
    expect(syncer.protection(acl).uncovered).toEqual([`${victim.metadata.namespace}:${/^acl-connect-(\d+)-/.exec(victim.metadata.name)?.[1]}`]);
    await syncer.sync();
    expect(calls).toEqual([`apply ${victim.metadata.name}`]);
    const seen = cache;
    cache = [];
    expect(syncer.holds(acl.technicalID)).toBe(false);
    cache = seen;
    // A cache that never catches up (a broken watch) delays the decision by at most the lag limit.
    calls.length = 0;
    server.delete(keyOf(victim));
    cache = cache.filter((f) => keyOf(f) !== keyOf(victim));
    expect((await syncer.sync()).waitingForCache).toBe(true);
    clock += 10_001;
    await syncer.sync();
    expect(calls).toEqual([`apply ${victim.metadata.name}`]);
    // A cache that lags past the limit while its watch still moves (an API server too busy to keep
    // up, as at 5,000 shoots): the sync decides on older copies, but what it stored last is not
    // applied again (on 9dc457c every such sync applied every bucket again).
    catchUp();
    const lagging = progress;
    rv += 1_000; // other objects written meanwhile, which the watch will pass on first
    const [changed] = extensions;
    if (!changed) throw new Error('no Extension');
    extensions[0] = JSON.parse(JSON.stringify(changed).replace('203.0.0.0/24', '203.0.1.0/24')) as Extension;
    calls.length = 0;
    await syncer.sync();
    const rewritten = [...calls];
    expect(rewritten.length).toBeGreaterThan(0);
    calls.length = 0;
    clock += 6_000;
    progress = String(Number(lagging) + 500);
    expect((await syncer.sync()).waitingForCache).toBe(true);
    clock += 6_000;
    progress = String(Number(lagging) + 900);
    expect((await syncer.sync()).applied).toBe(0);
    expect(calls).toEqual([]);
    // Caught up: nothing to write; a foreign delete seen then is repaired at once.
    catchUp();
    expect((await syncer.sync()).applied).toBe(0);
    const [again] = cache;
    if (!again) throw new Error('no stored filter');
    server.delete(keyOf(again));
    catchUp();
    await syncer.sync();
    expect(calls).toEqual([`apply ${again.metadata.name}`]);
  });
});
