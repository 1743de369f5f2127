// The per-shoot tunnel hops in the generated objects (tunnelRevocation: hop). That Envoy and
// Istio take them, and that a new generation closes exactly the shoot's VPN tunnels, is
// test/istio/tunnel-revocation-live-ads.test.ts; here: where they go and what a generation changes.
import { describe, expect, it } from 'vitest';
import { buildShootEnvoyFilters, tunnelHopFilterName } from '../../src/rbac/shoot-envoy-filters.js';
import { HOP_SERVICES, TUNNEL_HOP_PRIORITY, hopListenerName, routedClusterName, tunnelHopPatches, upstreamClusterName } from '../../src/rbac/tunnel-hop.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, testSeed } from '../support/test-seed.js';

const SHOOT = { id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] }, always: ['10.250.0.0/16'], gateway: ZONAL_GATEWAY } as const;

function filters(tunnelRevocation: 'none' | 'hop', generation?: number) {
  const { seed } = testSeed([SHOOT], { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator: { tunnelRevocation } });
  const shoot = seed.shoots[0]!;
  return buildShootEnvoyFilters(generation === undefined ? shoot : { ...shoot, tunnelGeneration: generation }, seed);
}

describe('tunnel hops in the per-shoot EnvoyFilters', () => {
  it('none (the default): no hop anywhere, the filter only where the shoot has SNI chains', () => {
    const built = filters('none');
    expect(built.map((f) => f.metadata.namespace)).toEqual([ZONAL_GATEWAY.namespace]);
    expect(built.flatMap((f) => f.spec.configPatches).map((p) => p.applyTo)).toEqual(['NETWORK_FILTER']);
  });

  it('hop: an object of its own on every gateway of the seed (before Gardener 1.143 each has the VPN clusters), applied last; the SNI filter unchanged', () => {
    const built = filters('hop');
    expect(built.slice(0, 1)).toEqual(filters('none'));
    const hops = built.slice(1);
    expect(hops.map((f) => [f.metadata.name, f.metadata.namespace, f.spec.workloadSelector.labels, f.spec.priority])).toEqual(
      [DEFAULT_GATEWAY, ZONAL_GATEWAY]
        .map((g) => [tunnelHopFilterName(SHOOT.id), g.namespace, g.selector, TUNNEL_HOP_PRIORITY])
        .sort(([, a], [, b]) => String(a).localeCompare(String(b))),
    );
    for (const filter of hops) expect(filter.spec.configPatches).toEqual(tunnelHopPatches(SHOOT.id, 1));
  });

  it('the hop object is named unlike any shoot\'s own filter (a shoot called a-hop next to a)', () => {
    const { seed } = testSeed([SHOOT, { ...SHOOT, id: `${SHOOT.id}-hop` }], { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator: { tunnelRevocation: 'hop' } });
    const keys = seed.shoots.flatMap((shoot) => buildShootEnvoyFilters(shoot, seed)).map((f) => `${f.metadata.namespace}/${f.metadata.name}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('hop: for each VPN service a rename, a door and a listener', () => {
    const patches = tunnelHopPatches(SHOOT.id, 1);
    expect(patches).toHaveLength(3 * HOP_SERVICES.length);
    for (const service of HOP_SERVICES) {
      const routed = routedClusterName(service, SHOOT.id);
      expect(routed).toBe(`outbound|1194||${service}.${SHOOT.id}.svc.cluster.local`);
      // Gardener's cluster is renamed and nothing else: its traffic policy stays Gardener's.
      expect(patches).toContainEqual({ applyTo: 'CLUSTER', match: { context: 'GATEWAY', cluster: { name: routed } }, patch: { operation: 'MERGE', value: { name: upstreamClusterName(routed) } } });
      const listener = patches.find((p) => p.applyTo === 'LISTENER' && p.patch.value['name'] === hopListenerName(routed));
      expect(JSON.stringify(listener)).toContain(`"cluster":"${upstreamClusterName(routed)}"`);
      // Envoy refuses an internal listener with an address (seen live): none is set.
      expect(listener?.patch.value['address']).toBeUndefined();
    }
  });

  it('an edit of the rule that raises no generation leaves the hop objects byte-identical (Istio rebuilds clusters only for changed cluster patches)', () => {
    const { seed } = testSeed([{ ...SHOOT, rule: { ...SHOOT.rule, cidrs: ['198.51.100.0/24'] } }], { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator: { tunnelRevocation: 'hop' } });
    const edited = buildShootEnvoyFilters(seed.shoots[0]!, seed);
    expect(JSON.stringify(edited.slice(1))).toBe(JSON.stringify(filters('hop').slice(1)));
    expect(JSON.stringify(edited[0])).not.toBe(JSON.stringify(filters('hop')[0]));
  });

  it('a new generation changes only the hop listeners, byte for byte; the same generation gives the same bytes', () => {
    const one = JSON.stringify(filters('hop', 1));
    expect(JSON.stringify(filters('hop'))).toBe(one);
    const two = JSON.stringify(filters('hop', 2));
    expect(two).not.toBe(one);
    expect(two.replaceAll('"tunnelGeneration":2', '"tunnelGeneration":1')).toBe(one);
  });
});
