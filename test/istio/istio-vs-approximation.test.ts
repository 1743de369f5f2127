// The placement approximation used by the hand-built conformance suite (test/envoy) against
// Istio's own EnvoyFilter patching, on the same Istio-rendered base (approximation-differential.ts):
// for every era and gateway of the fixture seed, and for adversarial EnvoyFilters exercising the
// operations the approximation claims to handle, both must produce the same listeners.
//
// Differences this found (fixed in the approximation, unit-tested in test/envoy):
// - MERGE of an inline route_config into an HCM Istio generated with `rds` (Gardener's
//   reversed-vpn / http-proxy): Istio's proto merge clears the oneof, the JSON merge kept both;
// - MERGE naming an existing RBAC policy: proto replaces the map entry, the JSON merge merged it.

import { beforeAll, describe, expect, it } from 'vitest';
import { ANY, envoyFilterObject, httpRbacFilter, networkRbacFilter, remoteIp, singlePolicyRules } from '../envoy/hand-written-filters.js';
import { FILTER_NAME } from '../envoy/gardener-shapes.js';
import type { JsonObject } from '../envoy/json.js';
import { compareWithApproximation } from './approximation-differential.js';
import { generateForSeed, istioInputObjects } from './istio-rendered-seed.js';
import { ERA_NAMES, ERAS } from './eras.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway, INGRESS_GATEWAYS } from './seed-fixture.js';

const HCM = FILTER_NAME.httpConnectionManager;
const RULES = singlePolicyRules('DENY', 'outsiders', ANY, { not_id: remoteIp('10.0.0.0', 8) });

describe.each(ERA_NAMES)('approximation vs Istio on a Gardener %s seed', (eraName) => {
  const era = ERAS[eraName];
  const gardener = gardenerSeedObjects(era);
  const input = istioInputObjects(gardener, generateForSeed(gardener));

  it.each(INGRESS_GATEWAYS.map((g) => [g.key, g] as const))('the %s gateway: Gardener’s and our patches give identical listeners', async (_key, gateway) => {
    const result = await compareWithApproximation(input, { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) });
    expect(Object.fromEntries(result.differences)).toEqual({});
    expect(result.notSelected.filter((name) => name.startsWith(`${gateway.namespace}/`))).toEqual([]);
  });
});

describe('approximation vs Istio: adversarial EnvoyFilters on the default gateway of a 1.145 seed', () => {
  const era = ERAS['v1.145'];
  const gateway = ingressGateway('default');
  const labels = gatewayLabels(era, gateway);
  let input: JsonObject[] = [];
  beforeAll(() => {
    const gardener = gardenerSeedObjects(era);
    input = istioInputObjects(gardener, generateForSeed(gardener));
  });

  const on = (namespace = gateway.namespace) => ({ namespace, selector: labels, creationTimestamp: '2026-02-01T00:00:00Z' });
  const sniMatch = (sni: string, filter?: string): JsonObject => ({ context: 'GATEWAY', listener: { portNumber: 9443, filterChain: { sni, ...(filter === undefined ? {} : { filter: { name: filter } }) } } });
  const rbac = (name: string): JsonObject => networkRbacFilter(name, `${name}.`, RULES);
  const cases: ReadonlyArray<readonly [string, () => JsonObject[]]> = [
    [
      'MERGE naming an existing policy of our combined filter',
      () => [
        envoyFilterObject('merge-policy', [
          {
            applyTo: 'HTTP_FILTER',
            match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: HCM, subFilter: { name: 'gardener-acl-connect-8443-000' } } } } },
            patch: { operation: 'MERGE', value: httpRbacFilter('gardener-acl-connect-8443-000', { action: 'DENY', policies: { 'shoot--p--foo': { permissions: [ANY], principals: [ANY] } } }) },
          },
        ], on()),
      ],
    ],
    [
      'REMOVE, INSERT_BEFORE a missing anchor, INSERT_AFTER, REPLACE on SNI chains',
      () => [
        envoyFilterObject('list-operations', [
          { applyTo: 'NETWORK_FILTER', match: sniMatch('api.foo.p.example.test', 'envoy.filters.network.tcp_proxy'), patch: { operation: 'REMOVE' } },
          { applyTo: 'NETWORK_FILTER', match: sniMatch('api.foo.p.example.test', 'no-such-filter'), patch: { operation: 'INSERT_BEFORE', value: rbac('before-missing') } },
          { applyTo: 'NETWORK_FILTER', match: sniMatch('api.foo.p.example.test', 'gardener-acl-sni'), patch: { operation: 'INSERT_AFTER', value: rbac('after-ours') } },
          { applyTo: 'NETWORK_FILTER', match: sniMatch('api.foo-bar.p.example.test', 'envoy.filters.network.tcp_proxy'), patch: { operation: 'REPLACE', value: rbac('replaced') } },
        ], on()),
      ],
    ],
    [
      'priorities and the root namespace',
      () =>
        [
          ['root-created-late', 'istio-system', 0, '2030-01-01T00:00:00Z'],
          ['negative-priority', gateway.namespace, -5, '2026-02-01T00:00:00Z'],
          ['root-positive-priority', 'istio-system', 5, '2020-01-01T00:00:00Z'],
        ].map(([name, namespace, priority, creationTimestamp]) =>
          envoyFilterObject(
            String(name),
            [{ applyTo: 'HTTP_FILTER', match: { context: 'GATEWAY', listener: { portNumber: 8132 } }, patch: { operation: 'INSERT_FIRST', value: httpRbacFilter(String(name), RULES) } }],
            { namespace: String(namespace), priority: Number(priority), creationTimestamp: String(creationTimestamp), selector: null },
          ),
        ),
    ],
    [
      'FILTER_CHAIN REMOVE by SNI, rename by MERGE, listener name, other contexts, chain fields Istio’s chains lack',
      () => [
        envoyFilterObject('chain-operations', [
          { applyTo: 'FILTER_CHAIN', match: { context: 'GATEWAY', listener: { portNumber: 9443, filterChain: { sni: 'gu-x-bar--a.ingress.seed.example.test' } } }, patch: { operation: 'REMOVE' } },
          { applyTo: 'NETWORK_FILTER', match: { context: 'GATEWAY', listener: { name: '0.0.0.0_9443', filterChain: { sni: 'api.foo.p.example.test', filter: { name: 'gardener-acl-sni' } } } }, patch: { operation: 'MERGE', value: { name: 'renamed' } } },
          { applyTo: 'HTTP_FILTER', match: { context: 'SIDECAR_INBOUND', listener: { portNumber: 8132 } }, patch: { operation: 'INSERT_FIRST', value: httpRbacFilter('sidecar-only', RULES) } },
          { applyTo: 'HTTP_FILTER', match: { context: 'GATEWAY', listener: { portNumber: 9443, filterChain: { transportProtocol: 'tls' } } }, patch: { operation: 'INSERT_FIRST', value: httpRbacFilter('tls-transport', RULES) } },
          { applyTo: 'NETWORK_FILTER', match: { context: 'GATEWAY', listener: { portNumber: 9443, filterChain: { destinationPort: 9443 } } }, patch: { operation: 'INSERT_FIRST', value: rbac('by-destination-port') } },
        ], on()),
      ],
    ],
  ];

  it.each(cases)('%s', async (_label, extra) => {
    const result = await compareWithApproximation([...input, ...extra()], { namespace: gateway.namespace, labels });
    expect(Object.fromEntries(result.differences)).toEqual({});
  });
});
