// istio/istio#41536, reproduced with Istio's own config generation: a filter chain that one
// EnvoyFilter ADDs (Gardener's per-shoot chain on the legacy apiserver-proxy port 8443) cannot be
// patched by a second EnvoyFilter, whatever the priorities or creation times — Istio patches the
// existing chains first and appends ADDed ones afterwards. That is why the RBAC filter goes into
// Gardener's own EnvoyFilter through our mutating webhook, and this shows that it then works.

import { beforeAll, describe, expect, it } from 'vitest';
import { FILTER_NAMES } from '../../src/rbac/filter-values.js';
import { ANY, envoyFilterObject, networkRbacFilter, remoteIp, singlePolicyRules } from '../envoy/hand-written-filters.js';
import type { JsonObject } from '../envoy/json.js';
import { legacyChainOf } from './legacy-chains.js';
import { renderGatewayWithIstio } from './istio-render.js';
import { renderSeedThroughIstio } from './istio-rendered-seed.js';
import { filterChains, filterName, listenerOnPort, networkFilters, policyNames, serverNames } from './rendered-config.js';
import { ERAS } from './eras.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway } from './seed-fixture.js';

const era = ERAS['v1.118'];
const gateway = ingressGateway('default');
const shoot = FIXTURE_SHOOTS.find((s) => s.id === 'shoot--p--foo');

/** A second EnvoyFilter inserting a network RBAC filter into every chain that matches `filterChain`. */
function secondEnvoyFilter(name: string, port: number, filterChain: JsonObject, priority: number, creationTimestamp: string): JsonObject {
  const filter = networkRbacFilter(name, `${name}.`, singlePolicyRules('DENY', 'outsiders', ANY, { not_id: remoteIp('203.0.113.0', 24) }));
  const patch = { applyTo: 'NETWORK_FILTER', match: { context: 'ANY', listener: { portNumber: port, filterChain } }, patch: { operation: 'INSERT_FIRST', value: filter } };
  return envoyFilterObject(name, [patch], { namespace: gateway.namespace, selector: gatewayLabels(era, gateway), priority, creationTimestamp });
}

describe('istio#41536 with Istio’s code: a chain ADDed by one EnvoyFilter is invisible to another', () => {
  if (shoot === undefined) throw new Error('fixture shoot shoot--p--foo is missing');
  const gardener = gardenerSeedObjects(era);

  it.each([
    ['higher priority, created later', 10, '2030-01-01T00:00:00Z'],
    ['lower priority, created earlier', -10, '2020-01-01T00:00:00Z'],
  ] as const)('a second EnvoyFilter (%s) aimed at Gardener’s legacy chain by destination port is not applied to it', async (_label, priority, created) => {
    const second = secondEnvoyFilter('acl-on-legacy-chain', 8443, { destinationPort: 443 }, priority, created);
    const control = secondEnvoyFilter('acl-on-sni-chain', 9443, { sni: `api.${shoot.name}.${shoot.project}.example.test` }, priority, created);
    const render = await renderGatewayWithIstio([...gardener, second, control], { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) });

    const legacy = listenerOnPort(render.listeners, 8443);
    const chain = legacyChainOf(legacy, shoot.apiserverIP);
    expect(chain, 'Gardener’s ADDed chain is rendered').toBeDefined();
    expect(networkFilters(chain ?? {}).map(filterName)).toEqual(['envoy.filters.network.tcp_proxy']);
    expect(filterChains(legacy).flatMap(networkFilters).map(filterName)).not.toContain('acl-on-legacy-chain');
    // The same kind of patch, aimed at a chain Istio generated itself, is applied.
    const sniChain = filterChains(listenerOnPort(render.listeners, 9443)).find((c) => serverNames(c).includes(`api.${shoot.name}.${shoot.project}.example.test`));
    expect(networkFilters(sniChain ?? {}).map(filterName)[0]).toBe('acl-on-sni-chain');
  });

  describe('the webhook-mutated Gardener EnvoyFilter', () => {
    let listeners: readonly JsonObject[] = [];
    beforeAll(async () => {
      const seed = await renderSeedThroughIstio(era);
      listeners = seed.renders.get('default')?.listeners ?? [];
    });

    it('carries the RBAC filter first in Gardener’s chain, ahead of its tcp_proxy', () => {
      const chain = legacyChainOf(listenerOnPort(listeners, 8443), shoot.apiserverIP);
      const filters = networkFilters(chain ?? {});
      expect(filters.map(filterName)).toEqual([FILTER_NAMES.legacyProxy, 'envoy.filters.network.tcp_proxy']);
      expect(policyNames(filters[0] ?? {})).toEqual([shoot.id]);
    });
  });
});
