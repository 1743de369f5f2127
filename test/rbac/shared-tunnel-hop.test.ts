// The shared tunnel hop's objects (tunnelRevocation hop, the default) and how the controller's
// write plan carries them. That Envoy takes them through Istio and closes exactly the changed
// shoot's tunnels is test/istio/shared-tunnel-hop-live-ads.test.ts; the controller on a real API
// server, test/actuator/controller-matcher-form.test.ts.
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import type { AppliedAcl } from '../../src/gardener/applied-state.js';
import { planCombinedWrites } from '../../src/actuator/combined-syncer.js';
import type { RecordedHopGeneration } from '../../src/actuator/tunnel-generation.js';
import type { EnvoyFilterObject } from '../../src/gardener/objects.js';
import { buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import {
  DEFAULT_CHAIN,
  SHARED_HOP_ENTRY_OBJECT,
  SHARED_HOP_SHARDS,
  sharedHopChainBytes,
  sharedHopChainName,
  sharedHopDoorName,
  sharedHopEntryLua,
  sharedHopLayout,
  sharedHopObjectName,
  sharedHopObjects,
  sharedHopShard,
  storedHopChains,
} from '../../src/rbac/shared-tunnel-hop.js';
import { keyOf, replayPlan, type Store } from '../support/write-plan-replay.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, cidr, rule, testSeed } from '../support/test-seed.js';

const OPERATOR = defaultOperatorConfig();
const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `shoot--p${i % 7}--s${i}`);
const listenerOf = (object: { spec: { configPatches: readonly { applyTo: string; patch: { value: Record<string, unknown> } }[] } }) =>
  object.spec.configPatches.find((p) => p.applyTo === 'LISTENER')?.patch.value as { name: string; filter_chains: { name: string }[]; filter_chain_matcher: { matcher_tree: { exact_match_map: { map: Record<string, unknown> } } } };

describe('the shared tunnel hop objects', () => {
  it('are the default, on every gateway: every shard (empty ones too) before the entry, in a stable order', () => {
    expect(OPERATOR.tunnelRevocation).toBe('hop');
    const { seed } = testSeed([{ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }], { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY] });
    const names = buildSeedEnvoyFilters(seed).tunnelHop.map((o) => `${o.metadata.namespace}/${o.metadata.name}`);
    const perGateway = [...Array.from({ length: SHARED_HOP_SHARDS }, (_, k) => sharedHopObjectName(k)), SHARED_HOP_ENTRY_OBJECT];
    expect(names).toEqual([DEFAULT_GATEWAY, ZONAL_GATEWAY].sort((a, b) => a.namespace.localeCompare(b.namespace)).flatMap((g) => perGateway.map((n) => `${g.namespace}/${n}`)));
    const { seed: none } = testSeed([{ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }], { operator: { tunnelRevocation: 'none' } });
    expect(buildSeedEnvoyFilters(none).tunnelHop).toEqual([]);
  });

  it("puts each shoot's chain, named by its generation, in the shard its ID hashes to; the matcher names exactly the chains; an empty shard's map names no ID", () => {
    const shoots = ids(40).map((technicalID, i) => ({ technicalID, tunnelGeneration: 1 + (i % 3) }));
    const objects = sharedHopObjects(DEFAULT_GATEWAY, OPERATOR, shoots);
    for (let shard = 0; shard < SHARED_HOP_SHARDS; shard++) {
      const listener = listenerOf(objects[shard]!);
      const mine = shoots.filter((s) => sharedHopShard(s.technicalID) === shard).sort((a, b) => (a.technicalID < b.technicalID ? -1 : 1));
      expect(listener.filter_chains.map((c) => c.name)).toEqual([DEFAULT_CHAIN, ...mine.map((s) => sharedHopChainName(s.technicalID, s.tunnelGeneration))]);
      const map = listener.filter_chain_matcher.matcher_tree.exact_match_map.map;
      expect(Object.keys(map)).toEqual(mine.length === 0 ? ['-'] : mine.map((s) => s.technicalID));
      expect(JSON.stringify(objects[shard]!.spec.configPatches[0])).toContain(sharedHopDoorName(shard));
    }
    expect(storedHopChains(objects as unknown as EnvoyFilterObject[])).toEqual(new Map(shoots.map((s) => [s.technicalID, s.tunnelGeneration])));
    // Deterministic: the same input gives the same bytes, whatever the input order.
    expect(JSON.stringify(sharedHopObjects(DEFAULT_GATEWAY, OPERATOR, [...shoots].reverse()))).toBe(JSON.stringify(objects));
  });

  it('spreads shoots over the shards, and one that does not fit its shard is named with the reason (its tunnels stay on the default chain)', () => {
    const counts = new Array<number>(SHARED_HOP_SHARDS).fill(0);
    for (const id of ids(1600)) counts[sharedHopShard(id)]!++;
    expect(Math.min(...counts)).toBeGreaterThan(60);
    expect(Math.max(...counts)).toBeLessThan(140);
    const sameShard = ids(400).filter((id) => sharedHopShard(id) === 0).slice(0, 3).sort();
    // Room for the shard's scaffolding and one chain.
    const tiny = { ...OPERATOR, maxObjectBytes: 4096 + sharedHopChainBytes(sameShard[0]!, 1) };
    const { objects, unplaced } = sharedHopLayout(DEFAULT_GATEWAY, tiny, sameShard.map((technicalID) => ({ technicalID })));
    expect([...unplaced.keys()]).toEqual(sameShard.slice(1));
    expect(unplaced.get(sameShard[1]!)).toBe(`tunnel hop shard 0 is full (maxObjectBytes ${tiny.maxObjectBytes}); its tunnels are not closed on a tightening`);
    expect(listenerOf(objects[0]!).filter_chains.map((c) => c.name)).toEqual([DEFAULT_CHAIN, sharedHopChainName(sameShard[0]!, 1)]);
  });

  it('the entry reads the protected headers lower-cased, hashes as sharedHopShard does, and sits in front of the router on every protected port', () => {
    const lua = sharedHopEntryLua(['Reversed-VPN', 'X-Gardener-Destination']);
    expect(lua).toContain('local HEADERS = { "reversed-vpn", "x-gardener-destination" }');
    expect(lua).toContain(`local SHARDS = ${SHARED_HOP_SHARDS}`);
    expect(lua).toContain('hash = (hash * 31 + string.byte(id, i)) % 2147483647');
    const entry = sharedHopObjects(DEFAULT_GATEWAY, OPERATOR, []).at(-1)!;
    expect(entry.metadata.name).toBe(SHARED_HOP_ENTRY_OBJECT);
    expect(entry.spec.configPatches.map((p) => `${p.match.listener?.portNumber} ${p.patch.operation} ${p.match.listener?.filterChain.filter.subFilter.name} ${String(p.patch.value['name'])}`)).toEqual(
      OPERATOR.protectedPorts.flatMap((port) => [`${port} INSERT_BEFORE envoy.filters.http.router gardener-acl.hop-entry`, `${port} INSERT_BEFORE envoy.filters.http.router gardener-acl.hop-remember`]),
    );
  });
});

describe("the tunnel hop in the controller's write plan", () => {
  const acl = (technicalID: string): AppliedAcl => ({ technicalID, rule: rule('ALLOW', 'remote_ip', ['203.0.113.0/24']), alwaysAllowed: [cidr('10.250.0.0/16')], legacyProxyAllowed: [] });
  const A = acl('shoot--p--a');
  const B = acl('shoot--p--b');
  const plan = (store: Store, operator: OperatorConfig, shoots: AppliedAcl[], extra: Partial<Parameters<typeof planCombinedWrites>[0]> = {}) =>
    planCombinedWrites({ operator, gateways: [DEFAULT_GATEWAY], shoots, stored: [...store.values()], ...extra });

  it('writes every shard before the entry; a new generation rewrites one shard and nothing else; tunnelRevocation none deletes the entry before the shards', () => {
    const store: Store = new Map();
    const first = plan(store, OPERATOR, [A, B]);
    const hopWrites = first.grow.map((w) => w.metadata.name).filter((n) => n.startsWith('gardener-acl-hop'));
    expect(hopWrites.at(-1)).toBe(SHARED_HOP_ENTRY_OBJECT);
    expect(first.grow.at(-1)?.metadata.name).toBe(SHARED_HOP_ENTRY_OBJECT);
    expect(hopWrites).toHaveLength(SHARED_HOP_SHARDS + 1);
    replayPlan(store, first, () => []);
    expect(storedHopChains([...store.values()])).toEqual(new Map([[A.technicalID, 1], [B.technicalID, 1]]));

    // A raise recorded before the filters hold the tightened ACL: the chain keeps the generation it is raised from.
    const pending = plan(store, OPERATOR, [A, B], { generations: new Map([[A.technicalID, { generation: 2, raiseFrom: 1 }]]) });
    expect([...pending.grow, ...pending.settle].filter((w) => w.metadata.name.startsWith('gardener-acl-hop'))).toEqual([]);

    // The filters hold it: the pending raise is taken, as a recorded one is.
    for (const generations of [new Map<string, RecordedHopGeneration>([[A.technicalID, { generation: 2 }]]), new Map<string, RecordedHopGeneration>([[A.technicalID, { generation: 2, raiseFrom: 1 }]])]) {
      const filtersHold = generations.get(A.technicalID)?.raiseFrom === undefined ? new Set<string>() : new Set([A.technicalID]);
      const taken = plan(store, OPERATOR, [A, B], { generations, filtersHold });
      expect([...taken.grow, ...taken.settle].map(keyOf)).toEqual([`${DEFAULT_GATEWAY.namespace}/${sharedHopObjectName(sharedHopShard(A.technicalID))}`]);
    }
    const raised = plan(store, OPERATOR, [A, B], { generations: new Map([[A.technicalID, { generation: 2 }]]) });
    expect([...raised.grow, ...raised.settle].map(keyOf)).toEqual([`${DEFAULT_GATEWAY.namespace}/${sharedHopObjectName(sharedHopShard(A.technicalID))}`]);
    expect(raised.deletions).toEqual([]);
    replayPlan(store, raised, () => []);
    expect(storedHopChains([...store.values()]).get(A.technicalID)).toBe(2);
    // A chain already at the raised generation is not lowered while the raise still reads as pending (a lagging cache).
    const lagging = plan(store, OPERATOR, [A, B], { generations: new Map([[A.technicalID, { generation: 2, raiseFrom: 1 }]]) });
    expect([...lagging.grow, ...lagging.settle].filter((w) => w.metadata.name.startsWith('gardener-acl-hop'))).toEqual([]);

    // An unreadable recorded ACL: the shoot keeps the chain stored for it (no drain from a missing input).
    const unreadable = plan(store, OPERATOR, [B], { unreadable: [A.technicalID], generations: new Map() });
    expect(unreadable.grow.filter((w) => w.metadata.name.startsWith('gardener-acl-hop'))).toEqual([]);

    const off = plan(store, { ...OPERATOR, tunnelRevocation: 'none' }, [A, B]);
    const deleted = off.deletions.map((d) => d.metadata.name);
    expect(deleted[0]).toBe(SHARED_HOP_ENTRY_OBJECT);
    expect(deleted.slice(1).sort()).toEqual(Array.from({ length: SHARED_HOP_SHARDS }, (_, k) => sharedHopObjectName(k)).sort());
  });
});
