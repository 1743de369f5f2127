// Unit tests of the Istio placement approximation (no Envoy): the Istio behaviours our EnvoyFilters
// rely on, as read from istio/istio listener_patch.go and PushContext.EnvoyFilters.

import { describe, expect, it } from 'vitest';
import { buildGardenerGateway, gatewayUpstreams, type GardenerGatewaySpec, type GatewayModel } from './gardener-gateway.js';
import { FILTER_NAME, TYPE_URL, gardenerLegacyProxyEnvoyFilter } from './gardener-shapes.js';
import {
  envoyFilterObject,
  httpRbacFilter,
  insertFirstHttpFilter,
  insertFirstNetworkFilterBySni,
  networkRbacFilter,
} from './hand-written-filters.js';
import { ISTIO_ROOT_NAMESPACE, approximateIstioPlacement } from './istio-placement-approximation.js';
import { getObject, getObjectList, getString, type JsonObject } from './json.js';

function gatewayFor(spec: GardenerGatewaySpec): GatewayModel {
  return buildGardenerGateway(spec, new Map(gatewayUpstreams(spec).map(({ cluster }) => [cluster, 1])));
}

const modernGateway = gatewayFor({
  era: 'v1.139-v1.149',
  shoots: [
    { technicalID: 'shoot--p--a', sniChains: [['api.a.internal', 'api.a.external'], ['api-p--a.ingress.seed']] },
    { technicalID: 'shoot--p--b', sniChains: [['api.b.internal']] },
  ],
});

function listenerOn(gateway: GatewayModel, port: number): JsonObject {
  const listener = gateway.listeners.find((candidate) => candidate.logicalPort === port);
  if (listener === undefined) throw new Error(`no listener for ${port}`);
  return listener.config;
}

function chainFilterNames(chain: JsonObject): string[] {
  return getObjectList(chain, 'filters').map((filter) => getString(filter, 'name') ?? '?');
}

function httpFilterNames(gateway: GatewayModel, port: number): string[] {
  const [chain] = getObjectList(listenerOn(gateway, port), 'filter_chains');
  const hcm = getObjectList(chain ?? {}, 'filters').find((f) => getString(f, 'name') === FILTER_NAME.httpConnectionManager);
  return getObjectList(getObject(hcm ?? {}, 'typed_config') ?? {}, 'http_filters').map((f) => getString(f, 'name') ?? '?');
}

function sniChainFilters(gateway: GatewayModel): Array<[string, string[]]> {
  return getObjectList(listenerOn(gateway, 9443), 'filter_chains').map((chain) => {
    const names = getObject(chain, 'filter_chain_match')?.['server_names'];
    return [Array.isArray(names) ? names.join(',') : '', chainFilterNames(chain)];
  });
}

const rbac = (name: string): JsonObject => networkRbacFilter(name, `${name}.`, { action: 'DENY', policies: {} });
const httpRbac = (name: string): JsonObject => httpRbacFilter(name, { action: 'DENY', policies: {} });

describe('Istio placement approximation', () => {
  it('an SNI match selects the whole chain through any of its server names, and only that chain', () => {
    const filter = envoyFilterObject('sni', [insertFirstNetworkFilterBySni(9443, 'api.a.external', rbac('acl-a'))]);
    const { gateway, patches } = approximateIstioPlacement(modernGateway, [filter]);
    expect(sniChainFilters(gateway)).toEqual([
      ['api.a.internal,api.a.external', ['acl-a', FILTER_NAME.tcpProxy]],
      ['api-p--a.ingress.seed', [FILTER_NAME.tcpProxy]],
      ['api.b.internal', [FILTER_NAME.tcpProxy]],
    ]);
    expect(patches[0]?.applications).toBe(1);
  });

  it('an SNI that is no server name (e.g. a wildcard pattern of another chain) matches nothing', () => {
    const filter = envoyFilterObject('sni', [insertFirstNetworkFilterBySni(9443, 'api.*', rbac('acl'))]);
    const { patches } = approximateIstioPlacement(modernGateway, [filter]);
    expect(patches[0]?.applications).toBe(0);
  });

  it('HTTP_FILTER patches hit only the HCM on the matched port; INSERT_FIRSTs stack in reverse sort order', () => {
    const shard = (name: string, created: string, priority?: number): JsonObject =>
      envoyFilterObject(name, [insertFirstHttpFilter(8443, httpRbac(name))], { creationTimestamp: created, priority });
    const filters = [
      shard('shard-b', '2026-01-01T00:00:00Z'),
      shard('shard-a', '2026-01-01T00:00:00Z'),
      shard('older', '2025-01-01T00:00:00Z'),
      shard('low-priority-number', '2027-01-01T00:00:00Z', -1),
    ];
    const { gateway, patches } = approximateIstioPlacement(modernGateway, filters);
    expect(patches.map((p) => p.envoyFilter)).toEqual([
      'istio-ingress/low-priority-number',
      'istio-ingress/older',
      'istio-ingress/shard-a',
      'istio-ingress/shard-b',
    ]);
    expect(httpFilterNames(gateway, 8443)).toEqual(['shard-b', 'shard-a', 'older', 'low-priority-number', FILTER_NAME.router]);
    expect(httpFilterNames(gateway, 8132)).toEqual([FILTER_NAME.router]);
  });

  it('INSERT_BEFORE anchors on subFilter.name; a missing anchor is a silent no-op', () => {
    const before = (anchor: string): JsonObject => ({
      applyTo: 'HTTP_FILTER',
      match: {
        context: 'GATEWAY',
        listener: { portNumber: 8443, filterChain: { filter: { name: FILTER_NAME.httpConnectionManager, subFilter: { name: anchor } } } },
      },
      patch: { operation: 'INSERT_BEFORE', value: httpRbac(`before-${anchor}`) },
    });
    const { gateway, patches } = approximateIstioPlacement(modernGateway, [
      envoyFilterObject('anchored', [before(FILTER_NAME.router), before('envoy.filters.http.ext_authz')]),
    ]);
    expect(httpFilterNames(gateway, 8443)).toEqual([`before-${FILTER_NAME.router}`, FILTER_NAME.router]);
    expect(patches.map((p) => p.applications)).toEqual([1, 0]);
  });

  it('MERGE into the HCM appends lists and merges messages (Gardener http-connect-listener style)', () => {
    const merge = envoyFilterObject('merge', [
      {
        applyTo: 'NETWORK_FILTER',
        match: { context: 'GATEWAY', listener: { portNumber: 8132, filterChain: { filter: { name: FILTER_NAME.httpConnectionManager } } } },
        patch: {
          operation: 'MERGE',
          value: {
            name: FILTER_NAME.httpConnectionManager,
            typed_config: { '@type': 'ignored', upgrade_configs: [{ upgrade_type: 'websocket' }], http_protocol_options: { allow_chunked_length: true } },
          },
        },
      },
    ]);
    const { gateway } = approximateIstioPlacement(modernGateway, [merge]);
    const [chain] = getObjectList(listenerOn(gateway, 8132), 'filter_chains');
    const hcmConfig = getObject(getObjectList(chain ?? {}, 'filters')[0] ?? {}, 'typed_config');
    expect(hcmConfig?.['upgrade_configs']).toEqual([{ upgrade_type: 'CONNECT' }, { upgrade_type: 'websocket' }]);
    expect(hcmConfig?.['http_protocol_options']).toEqual({ accept_http_10: true, allow_chunked_length: true });
    expect(hcmConfig?.['@type']).toBe('type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager');
  });

  it('MERGE of an inline route_config into an HCM that uses RDS replaces rds (proto oneof, as Istio merges)', () => {
    // Istio renders a Gateway's HTTP server with `rds`; Gardener's reversed-vpn/http-proxy MERGE a
    // `route_config` into it. Istio's proto merge leaves only route_config (test/istio found it).
    const withRds = structuredClone(modernGateway);
    const [chain] = getObjectList(listenerOn(withRds, 8443), 'filter_chains');
    const hcmConfig = getObject(getObjectList(chain ?? {}, 'filters')[0] ?? {}, 'typed_config') ?? {};
    delete hcmConfig['route_config'];
    hcmConfig['rds'] = { route_config_name: 'http.8443', config_source: { ads: {} } };
    const routeConfig = { virtual_hosts: [{ name: 'http-proxy', domains: ['*'], routes: [] }] };
    const merge = envoyFilterObject('http-proxy', [
      {
        applyTo: 'NETWORK_FILTER',
        match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: FILTER_NAME.httpConnectionManager } } } },
        patch: { operation: 'MERGE', value: { name: FILTER_NAME.httpConnectionManager, typed_config: { '@type': TYPE_URL.httpConnectionManager, route_config: routeConfig } } },
      },
    ]);
    const { gateway } = approximateIstioPlacement(withRds, [merge]);
    const [merged] = getObjectList(listenerOn(gateway, 8443), 'filter_chains');
    const mergedConfig = getObject(getObjectList(merged ?? {}, 'filters')[0] ?? {}, 'typed_config');
    expect(mergedConfig?.['rds']).toBeUndefined();
    expect(mergedConfig?.['route_config']).toEqual(routeConfig);
  });

  it('MERGE into an RBAC filter replaces a named policy wholesale (proto map semantics, as Istio merges)', () => {
    const policy = (cidr: string): JsonObject => ({ permissions: [{ any: true }], principals: [{ remote_ip: { address_prefix: cidr, prefix_len: 8 } }] });
    const existing = httpRbacFilter('acl', { action: 'DENY', policies: { a: policy('10.0.0.0'), b: policy('11.0.0.0') } });
    const merge = envoyFilterObject('merge-policy', [
      {
        applyTo: 'HTTP_FILTER',
        match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: FILTER_NAME.httpConnectionManager, subFilter: { name: 'acl' } } } } },
        patch: { operation: 'MERGE', value: httpRbacFilter('acl', { action: 'DENY', policies: { a: policy('12.0.0.0') } }) },
      },
    ]);
    const { gateway } = approximateIstioPlacement(modernGateway, [envoyFilterObject('acl', [insertFirstHttpFilter(8443, existing)]), merge]);
    const [chain] = getObjectList(listenerOn(gateway, 8443), 'filter_chains');
    const hcm = getObject(getObjectList(chain ?? {}, 'filters')[0] ?? {}, 'typed_config') ?? {};
    const rbacConfig = getObject(getObjectList(hcm, 'http_filters')[0] ?? {}, 'typed_config');
    expect(getObject(rbacConfig ?? {}, 'rules')?.['policies']).toEqual({ a: policy('12.0.0.0'), b: policy('11.0.0.0') });
  });

  it('selection: workloadSelector must be a subset of the gateway labels; namespace must be the gateway or root namespace', () => {
    const patch = [insertFirstHttpFilter(8443, httpRbac('x'))];
    const { patches, notSelected } = approximateIstioPlacement(modernGateway, [
      envoyFilterObject('zonal-only', patch, { selector: { app: 'istio-ingressgateway', istio: 'ingressgateway--zone--a' } }),
      envoyFilterObject('subset', patch, { selector: { app: 'istio-ingressgateway' } }),
      envoyFilterObject('no-selector', patch, { selector: null }),
      envoyFilterObject('other-namespace', patch, { namespace: 'istio-ingress--zone-a' }),
      envoyFilterObject('root', patch, { namespace: ISTIO_ROOT_NAMESPACE, creationTimestamp: '2030-01-01T00:00:00Z' }),
    ]);
    expect(notSelected).toEqual(['istio-ingress/zonal-only', 'istio-ingress--zone-a/other-namespace']);
    // Root-namespace filters come first at equal priority, whatever their creation time.
    expect(patches.map((p) => p.envoyFilter)).toEqual(['istio-system/root', 'istio-ingress/no-selector', 'istio-ingress/subset']);
  });

  it('a FILTER_CHAIN added by one EnvoyFilter is invisible to every other patch (istio#41536)', () => {
    const legacyGateway = gatewayFor({ era: 'v1.114-v1.122', shoots: [{ technicalID: 'shoot--p--a', sniChains: [['api.a']] }] });
    const addsChain = gardenerLegacyProxyEnvoyFilter({ technicalID: 'shoot--p--a', apiserverIP: '240.0.0.10' });
    const triesToPatchIt = envoyFilterObject(
      'acl-on-legacy-port',
      [
        {
          applyTo: 'NETWORK_FILTER',
          match: { context: 'ANY', listener: { portNumber: 8443, filterChain: { destinationPort: 443 } } },
          patch: { operation: 'INSERT_FIRST', value: rbac('acl-legacy') },
        },
      ],
      { priority: 10 },
    );
    const { gateway, patches } = approximateIstioPlacement(legacyGateway, [triesToPatchIt, addsChain]);
    const chains = getObjectList(listenerOn(gateway, 8443), 'filter_chains');
    expect(chains.map(chainFilterNames)).toEqual([[FILTER_NAME.tcpProxy], [FILTER_NAME.tcpProxy]]);
    expect(patches.map((p) => [p.envoyFilter, p.applications])).toEqual([
      ['istio-ingress/shoot--p--a', 1],
      ['istio-ingress/acl-on-legacy-port', 0],
    ]);
  });

  it('listener.name matches Istio listener names; unsupported API fields throw instead of being ignored', () => {
    const byName = envoyFilterObject('by-name', [
      { applyTo: 'HTTP_FILTER', match: { context: 'GATEWAY', listener: { name: '0.0.0.0_8132' } }, patch: { operation: 'INSERT_FIRST', value: httpRbac('n') } },
    ]);
    expect(httpFilterNames(approximateIstioPlacement(modernGateway, [byName]).gateway, 8132)).toEqual(['n', FILTER_NAME.router]);

    const withProxyMatch = envoyFilterObject('proxy-match', [
      { applyTo: 'HTTP_FILTER', match: { context: 'GATEWAY', proxy: { proxyVersion: '^1\\.2.*' } }, patch: { operation: 'INSERT_FIRST', value: httpRbac('n') } },
    ]);
    expect(() => approximateIstioPlacement(modernGateway, [withProxyMatch])).toThrow(/outside what the Istio approximation handles/);
    const routePatch = envoyFilterObject('route', [{ applyTo: 'ROUTE_CONFIGURATION', patch: { operation: 'MERGE', value: {} } }]);
    expect(() => approximateIstioPlacement(modernGateway, [routePatch])).toThrow(/applyTo/);
    // Listeners and clusters are only added (the tunnel hop), as they are and after the gateway's own.
    const listenerMerge = envoyFilterObject('listener', [{ applyTo: 'LISTENER', patch: { operation: 'MERGE', value: {} } }]);
    expect(() => approximateIstioPlacement(modernGateway, [listenerMerge])).toThrow(/operation/);
    const added = approximateIstioPlacement(modernGateway, [
      envoyFilterObject('added', [
        { applyTo: 'LISTENER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: { name: 'internal', internal_listener: {} } } },
        { applyTo: 'CLUSTER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: { name: 'door' } } },
      ]),
    ]);
    expect(added.gateway.internalListeners).toEqual([{ name: 'internal', internal_listener: {} }]);
    expect(added.gateway.clusters.at(-1)).toEqual({ name: 'door' });
    expect(added.gateway.listeners.map((l) => l.config)).toEqual(modernGateway.listeners.map((l) => l.config));
  });

  it('does not modify its input', () => {
    const before = JSON.stringify(modernGateway);
    approximateIstioPlacement(modernGateway, [envoyFilterObject('sni', [insertFirstNetworkFilterBySni(9443, 'api.b.internal', rbac('b'))])]);
    expect(JSON.stringify(modernGateway)).toBe(before);
  });
});
