// Where Istio's own code puts our filters, per Gardener era and gateway, read from the listeners
// istio-render produced (no Envoy needed): every SNI chain of an ACL shoot starts with that shoot's
// RBAC filter (regular hosts, the wildcard host, the default gateway's wildcard chain of zonal and
// exposure-class shoots, observability hosts), the nginx wildcard chain carries every ACL shoot's
// observability filter first, and every protected CONNECT listener of every gateway starts its
// HTTP filter chain with the combined filters. Expectations come from Gardener's rules
// (sni-endpoints.ts), not from the render.

import { beforeAll, describe, expect, it } from 'vitest';
import { FILTER_NAMES } from '../../src/rbac/filter-values.js';
import type { JsonObject } from '../envoy/json.js';
import { renderSeedThroughIstio, type IstioRenderedSeed } from './istio-rendered-seed.js';
import { canonicalJson, chainKey, filterChains, filterName, httpFilters, leadingFilters, listenerOnPort, networkFilters, policyNames, serverNames } from './rendered-config.js';
import { ERA_NAMES, ERAS } from './eras.js';
import { FIXTURE_SHOOTS, INGRESS_GATEWAYS, ingressGateway, type GatewayKey } from './seed-fixture.js';
import { sniEndpoints, type SniEndpoint } from './sni-endpoints.js';
import { legacyChainProblems } from './legacy-chains.js';

const OURS = 'gardener-acl-';
const ACL_SHOOTS = new Set(FIXTURE_SHOOTS.filter((s) => s.rule !== undefined).map((s) => s.id));

function listeners(seed: IstioRenderedSeed, key: GatewayKey): readonly JsonObject[] {
  const render = seed.renders.get(key);
  if (render === undefined) throw new Error(`no render for ${key}`);
  return render.listeners;
}

/** Problems of one exact (one-owner) SNI chain. */
function exactChainProblems(chain: JsonObject, owner: string, where: string): string[] {
  const ours = networkFilters(chain).filter((f) => filterName(f).startsWith(OURS));
  const first = networkFilters(chain)[0];
  if (!ACL_SHOOTS.has(owner)) return ours.length === 0 ? [] : [`${where}: shoot without ACL has ${ours.map(filterName).join(', ')}`];
  if (first === undefined || filterName(first) !== FILTER_NAMES.sni) return [`${where}: first filter is ${first === undefined ? 'none' : filterName(first)}, want ${FILTER_NAMES.sni}`];
  if (policyNames(first).join() !== owner) return [`${where}: ${FILTER_NAMES.sni} has policies ${policyNames(first).join(', ')}, want ${owner}`];
  return ours.length === 1 ? [] : [`${where}: ${ours.length} ACL filters, want 1`];
}

/** Problems of the shared nginx wildcard chain: one observability filter per ACL shoot, all before Gardener's. */
function wildcardChainProblems(chain: JsonObject, where: string): string[] {
  const all = networkFilters(chain);
  const leading = leadingFilters(all, OURS);
  const owners = leading.filter((f) => filterName(f) === FILTER_NAMES.observability).flatMap(policyNames).sort();
  const problems: string[] = [];
  if (leading.length !== all.filter((f) => filterName(f).startsWith(OURS)).length) problems.push(`${where}: an ACL filter behind Gardener's filters`);
  if (owners.join() !== [...ACL_SHOOTS].sort().join()) problems.push(`${where}: observability filters for ${owners.join(', ')}, want ${[...ACL_SHOOTS].sort().join(', ')}`);
  return problems;
}

describe.each(ERA_NAMES)('Istio’s placement of our filters on a Gardener %s seed', (eraName) => {
  const era = ERAS[eraName];
  let seed: IstioRenderedSeed;

  beforeAll(async () => {
    seed = await renderSeedThroughIstio(era);
  });

  it.each(INGRESS_GATEWAYS.map((g) => [g.key] as const))('SNI on the %s gateway: Istio rendered exactly the expected chains; every ACL shoot’s chain starts with its RBAC filter', (key) => {
    const expected = new Map<string, SniEndpoint>();
    for (const endpoint of sniEndpoints(era).filter((e) => e.gateway === key)) expected.set(chainKey(endpoint.chain), endpoint);
    const chains = filterChains(listenerOnPort(listeners(seed, key), 9443));
    expect(chains.map((chain) => chainKey(serverNames(chain))).sort()).toEqual([...expected.keys()].sort());
    const problems = chains.flatMap((chain) => {
      const endpoint = expected.get(chainKey(serverNames(chain)));
      if (endpoint === undefined) return [];
      const where = `${key} 9443 [${serverNames(chain).join(', ')}] (${endpoint.kind})`;
      return endpoint.kind === 'observability-wildcard' ? wildcardChainProblems(chain, where) : exactChainProblems(chain, endpoint.owner, where);
    });
    expect(problems).toEqual([]);
  });

  it('every chain kind of the era is covered: regular, wildcard (own chain or the default gateway’s), observability', () => {
    const kinds = new Set(sniEndpoints(era).filter((e) => ACL_SHOOTS.has(e.owner)).map((e) => `${e.kind}@${e.gateway}`));
    expect(kinds).toContain('api@zonal');
    expect(kinds).toContain('api@exposure');
    expect(kinds).toContain('api-wildcard@default');
    if (era.nginxWildcard) expect(kinds).toContain('observability-wildcard@default');
    if (era.observabilityGateways) expect(kinds).toContain('observability@default');
  });

  it.each(INGRESS_GATEWAYS.map((g) => [g.key] as const))('every protected CONNECT listener of the %s gateway starts its HTTP filters with all combined filters of its port', (key) => {
    const namespace = ingressGateway(key).namespace;
    const problems = era.connectPorts.flatMap(({ port }) => {
      const want = seed.generated.envoyFilters
        .filter((f) => f.metadata.namespace === namespace)
        .flatMap((f): readonly { applyTo: string; match?: { context: string; listener?: { portNumber: number } }; patch: { operation: string; value: { name?: unknown } } }[] => f.spec.configPatches)
        // The combined filters go first; the tunnel hop's entry goes in front of the router (below).
        .filter((p) => p.applyTo === 'HTTP_FILTER' && p.match?.listener?.portNumber === port && p.patch.operation === 'INSERT_FIRST')
        .map((p) => String(p.patch.value.name))
        .sort();
      const chains = filterChains(listenerOnPort(listeners(seed, key), port));
      if (want.length === 0 || chains.length === 0) return [`${key} ${port}: ${want.length} combined filters generated, ${chains.length} chains rendered`];
      return chains.flatMap((chain, index) => {
        const leading = leadingFilters(httpFilters(chain), `${FILTER_NAMES.connect}-`).map(filterName).sort();
        return leading.join() === want.join() ? [] : [`${key} ${port} chain ${index}: leading HTTP filters ${leading.join(', ')}, want ${want.join(', ')}`];
      });
    });
    expect(problems).toEqual([]);
  });

  it.each(INGRESS_GATEWAYS.map((g) => [g.key] as const))("every protected CONNECT listener of the %s gateway runs the tunnel hop's entry right before the router, after every RBAC filter", (key) => {
    const problems = era.connectPorts.flatMap(({ port }) =>
      filterChains(listenerOnPort(listeners(seed, key), port)).flatMap((chain, index) => {
        const names = httpFilters(chain).map(filterName);
        const tail = names.slice(-3);
        const lastRbac = names.findLastIndex((n) => n.startsWith(`${FILTER_NAMES.connect}-`));
        const ok = tail.join() === ['gardener-acl.hop-entry', 'gardener-acl.hop-remember', 'envoy.filters.http.router'].join() && lastRbac < names.length - 3;
        return ok ? [] : [`${key} ${port} chain ${index}: HTTP filters ${names.join(', ')}`];
      }),
    );
    expect(problems).toEqual([]);
  });

  if (era.legacyApiserverProxy) {
    it.each(INGRESS_GATEWAYS.map((g) => [g.key] as const))('legacy port 8443 of the %s gateway: Gardener’s chain of every ACL shoot starts with the RBAC filter our webhook patched in', (key) => {
      expect(legacyChainProblems(era, key, listeners(seed, key))).toEqual([]);
    });

    it('the combined filters’ 8443 patch finds no HTTP listener while 8443 is the legacy TCP port (a silent no-op in Istio)', () => {
      for (const gateway of INGRESS_GATEWAYS) {
        const chains = filterChains(listenerOnPort(listeners(seed, gateway.key), 8443));
        expect(chains.flatMap(httpFilters)).toEqual([]);
        expect(chains.length).toBeGreaterThan(0);
      }
    });
  }

  it('every SNI patch we generated is applied by Istio (no silent no-op)', () => {
    const unapplied = seed.generated.envoyFilters.flatMap((filter) => {
      const gateway = INGRESS_GATEWAYS.find((g) => g.namespace === filter.metadata.namespace);
      if (gateway === undefined) return [`${filter.metadata.namespace}/${filter.metadata.name}: no gateway in that namespace`];
      const chains = filterChains(listenerOnPort(listeners(seed, gateway.key), 9443));
      return filter.spec.configPatches.flatMap((patch) => {
        if (!('match' in patch) || !('listener' in patch.match) || patch.match.listener === undefined) return [];
        const filterChain = patch.match.listener.filterChain;
        if (patch.applyTo !== 'NETWORK_FILTER' || !('sni' in filterChain)) return [];
        const chain = chains.find((c) => serverNames(c).includes(filterChain.sni));
        const placed = chain !== undefined && networkFilters(chain).some((f) => canonicalJson(f) === canonicalJson(patch.patch.value));
        return placed ? [] : [`${filter.metadata.namespace}/${filter.metadata.name} sni ${filterChain.sni}`];
      });
    });
    expect(unapplied).toEqual([]);
  });
});
