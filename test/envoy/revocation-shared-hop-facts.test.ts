// Research facts behind the shared tunnel hop, the product's revocation since it became the
// default (src/rbac/shared-tunnel-hop.ts, which uses the Lua route on both versions and the SNI
// pool key; docs/operators/revocation.md;
// revocation-facts.test.ts pins why only a drained filter chain closes an established tunnel):
// ONE shared internal listener whose filter chains are selected per shoot, entered through ONE
// shared door cluster, with Gardener's routes and clusters left as they are.
//
//   CONNECT route (cluster_header) -- the header rewritten to the door's name, route looked up again
//   -> door cluster `outbound|1194||vpn-seed-server.gardener_acl_hop.svc.cluster.local` (internal_upstream)
//   -> internal listener `gardener-acl-hop`: filter_chain_matcher on filter state (the shoot's ID),
//      one chain per shoot named `<id>/<generation>`, tcp_proxy to the filter-state cluster
//   -> Gardener's cluster, by the original header value (`envoy.tcp_proxy.cluster`).
//
// The HTTP filters in front of the router (each run only for a VPN destination, through
// match_delegate): header_to_metadata takes the first header value apart (Envoy routes on the first
// value; filters see a repeated header joined with ","), set_filter_state stores the destination and
// the shoot, shared with the upstream connection (ONCE), header_mutation rewrites the header to the
// door. Then the route is looked up again: Envoy 1.40 by set_filter_state's clear_route_cache, which
// 1.37 lacks, so there a Lua filter calls clearRouteCache().
//
// What each case pins, on both Envoys:
// - the shared hop: a new name of shoot A's chain (its generation) closes A's 2 tunnels (two VPN
//   servers) at the end of the drain and none of B's; a new CONNECT to A reaches A at once;
// - without a hashable filter-state object the door's connection pool, keyed by cluster and host
//   only, hands a later tunnel the filter state of the stream that created the pool: the tunnel to
//   A's `vpn-seed-server-0` reaches A's `vpn-seed-server`. A partition by destination is mandatory
//   (1.40: a custom key of the `envoy.hashable_string` factory; 1.37 has no such factory, the SNI
//   override `envoy.network.upstream_server_name` is hashed into the pool key and stands in);
// - without the route looked up again, the rewrite does nothing: HCM picked the route before the
//   HTTP filters ran, and the tunnel goes straight to Gardener's cluster, outside the hop.
// Memory (measured separately, /tmp research bench, Istio's stats matcher): about 6-7 KiB per ACL
// shoot and gateway for this shape, against 134 KiB for the per-shoot hop.

import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { EchoUpstreams } from './echo-upstreams.js';
import { CONFORMANCE_ENVOY_VERSIONS, SEED_ENVOY_VERSION, type EnvoyVersion } from './envoy-binary.js';
import { startEnvoy, type BoundAddress, type EnvoyInstance } from './envoy-process.js';
import { FileXds } from './file-xds.js';
import { INTERNAL_LISTENER_EXTENSION, gatewayBootstrap, httpConnectListener, staticCluster } from './gardener-gateway.js';
import { FILTER_NAME, GARDENER_ERAS, GARDENER_PORT, TYPE_URL, connectPortOf, istioClusterName } from './gardener-shapes.js';
import { HeldConnection, connectRequestBytes } from './held-connection.js';
import type { JsonObject } from './json.js';

const SHOOT_A = 'shoot--p--a';
const SHOOT_B = 'shoot--p--b';
const VPN_A = istioClusterName.vpnSeedServer(SHOOT_A);
const VPN_A0 = istioClusterName.vpnSeedServer(SHOOT_A, 0);
const VPN_B = istioClusterName.vpnSeedServer(SHOOT_B);
const CLIENT = '127.0.0.7';

const ERA = GARDENER_ERAS['v1.139-v1.149'];
const CONNECT_PORT = connectPortOf(ERA, GARDENER_PORT.httpProxy);
const HEADER = CONNECT_PORT.header.toLowerCase();
const CONNECT_LISTENER_NAME = `0.0.0.0_${GARDENER_PORT.httpProxy}`;

const DRAIN_TIME_S = 1;
const WATCH_MS = DRAIN_TIME_S * 1000 + 4_000;
const sleep = async (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// The shape

const HOP_LISTENER = 'gardener-acl-hop';
/** Accepted by Gardener's route regex (v1.113+); `_` cannot be in a namespace, so no Service has this cluster name. */
const DOOR = 'outbound|1194||vpn-seed-server.gardener_acl_hop.svc.cluster.local';
/** tcp_proxy's fallback cluster, which does not exist: a connection without filter state goes nowhere. */
const NO_DESTINATION = 'gardener-acl-hop-no-destination';
const METADATA = 'gardener-acl-hop';
const SHOOT_KEY = 'gardener-acl.hop-shoot';
const POOL_KEY_1_40 = 'gardener-acl.hop-destination';
/** A VPN destination as the first value of the header; captures it and the shoot's ID. */
const VPN_FIRST_VALUE = String.raw`^(outbound\|1194\|\|vpn-seed-server(?:-[0-4])?\.([a-z0-9-]+)\.svc\.cluster\.local)(?:,\C*)?$`;

const TYPE = {
  setFilterState: 'type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config',
  headerMutation: 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
  headerToMetadata: 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config',
  lua: 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
  matchDelegate: 'type.googleapis.com/envoy.extensions.common.matching.v3.ExtensionWithMatcher',
  skipFilter: 'type.googleapis.com/envoy.extensions.filters.common.matcher.action.v3.SkipFilter',
  headerInput: 'type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput',
  filterStateInput: 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.FilterStateInput',
  stringValue: 'type.googleapis.com/google.protobuf.StringValue',
};

interface Variant {
  /** Store a hashable copy of the destination, which partitions the door's connection pools. */
  poolPartition: boolean;
  /** Look the route up again after the rewrite. */
  reroute: boolean;
}

/** Runs `filter` only when the header's first value is a VPN destination (match_delegate skips it on a match). */
function onlyForVpn(filter: JsonObject): JsonObject {
  const input = { name: 'destination', typed_config: { '@type': TYPE.headerInput, header_name: HEADER } };
  const isVpn = { single_predicate: { input, value_match: { safe_regex: { google_re2: {}, regex: VPN_FIRST_VALUE } } } };
  const skip = { action: { name: 'skip', typed_config: { '@type': TYPE.skipFilter } } };
  return {
    name: filter['name'] as string,
    typed_config: { '@type': TYPE.matchDelegate, extension_config: filter, xds_matcher: { matcher_list: { matchers: [{ predicate: { not_matcher: isVpn }, on_match: skip }] } } },
  };
}

function hopEntryFilters(version: EnvoyVersion, variant: Variant): JsonObject[] {
  const fromMetadata = (key: string): JsonObject => ({ text_format_source: { inline_string: `%DYNAMIC_METADATA(${METADATA}:${key})%` } });
  const extractRule = (key: string, group: string): JsonObject => ({
    header: HEADER,
    on_header_present: { metadata_namespace: METADATA, key, regex_value_rewrite: { pattern: { google_re2: {}, regex: VPN_FIRST_VALUE }, substitution: group } },
  });
  const poolPartition: JsonObject =
    version === SEED_ENVOY_VERSION
      ? { object_key: 'envoy.network.upstream_server_name', format_string: fromMetadata('destination'), shared_with_upstream: 'ONCE' }
      : { object_key: POOL_KEY_1_40, factory_key: 'envoy.hashable_string', format_string: fromMetadata('destination'), shared_with_upstream: 'ONCE' };
  const conditional: JsonObject[] = [
    { name: 'gardener-acl-hop-extract', typed_config: { '@type': TYPE.headerToMetadata, request_rules: [extractRule('destination', '\\1'), extractRule('shoot', '\\2')] } },
    {
      name: 'gardener-acl-hop-remember',
      typed_config: {
        '@type': TYPE.setFilterState,
        on_request_headers: [
          { object_key: 'envoy.tcp_proxy.cluster', format_string: fromMetadata('destination'), shared_with_upstream: 'ONCE' },
          { object_key: SHOOT_KEY, factory_key: 'envoy.string', format_string: fromMetadata('shoot'), shared_with_upstream: 'ONCE' },
          ...(variant.poolPartition ? [poolPartition] : []),
        ],
      },
    },
    {
      name: 'gardener-acl-hop-rewrite',
      typed_config: { '@type': TYPE.headerMutation, mutations: { request_mutations: [{ append: { header: { key: HEADER, value: DOOR }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' } }] } },
    },
  ];
  const filters = conditional.map(onlyForVpn);
  if (variant.reroute) {
    filters.push(
      version === SEED_ENVOY_VERSION
        ? { name: 'gardener-acl-hop-reroute', typed_config: { '@type': TYPE.lua, default_source_code: { inline_string: 'function envoy_on_request(handle) handle:clearRouteCache() end' } } }
        : { name: 'gardener-acl-hop-reroute', typed_config: { '@type': TYPE.setFilterState, clear_route_cache: true } },
    );
  }
  return filters;
}

/** Gardener's CONNECT listener with the hop's filters in front of the router. */
function connectListener(version: EnvoyVersion, variant: Variant): JsonObject {
  const listener = httpConnectListener({ ...CONNECT_PORT, destinationRegex: ERA.destinationRegex }).config;
  const chain = (listener['filter_chains'] as JsonObject[])[0];
  const hcm = (chain?.['filters'] as JsonObject[] | undefined)?.[0]?.['typed_config'] as JsonObject | undefined;
  if (hcm === undefined) throw new Error('the CONNECT listener has no HCM');
  hcm['http_filters'] = [...hopEntryFilters(version, variant), ...(hcm['http_filters'] as JsonObject[])];
  return listener;
}

function doorCluster(): JsonObject {
  return {
    name: DOOR,
    type: 'STATIC',
    connect_timeout: '10s',
    load_assignment: { cluster_name: DOOR, endpoints: [{ lb_endpoints: [{ endpoint: { address: { envoy_internal_address: { server_listener_name: HOP_LISTENER } } } }] }] },
    transport_socket: {
      name: 'envoy.transport_sockets.internal_upstream',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport',
        transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' } },
      },
    },
  };
}

const tcpProxy: JsonObject = { name: FILTER_NAME.tcpProxy, typed_config: { '@type': TYPE_URL.tcpProxy, stat_prefix: 'gardener_acl_hop', cluster: NO_DESTINATION, idle_timeout: '0s' } };

/** The shared hop: one chain per shoot, named by its generation, selected by the shoot's ID. */
function hopListener(generations: Readonly<Record<string, number>>): JsonObject {
  const chainName = (shoot: string): string => `${shoot}/${generations[shoot]}`;
  const shoots = Object.keys(generations);
  return {
    name: HOP_LISTENER,
    internal_listener: {},
    filter_chain_matcher: {
      matcher_tree: {
        input: { name: 'shoot', typed_config: { '@type': TYPE.filterStateInput, key: SHOOT_KEY } },
        exact_match_map: { map: Object.fromEntries(shoots.map((shoot) => [shoot, { action: { name: 'chain', typed_config: { '@type': TYPE.stringValue, value: chainName(shoot) } } }])) },
      },
    },
    filter_chains: shoots.map((shoot) => ({ name: chainName(shoot), filters: [tcpProxy] })),
  };
}

// ---------------------------------------------------------------------------------------------
// The experiment

interface Gateway {
  envoy: EnvoyInstance;
  xds: FileXds;
  endpoint: BoundAddress;
}

async function withGateway<T>(version: EnvoyVersion, variant: Variant, run: (gateway: Gateway) => Promise<T>): Promise<T> {
  const echo = await EchoUpstreams.start([VPN_A, VPN_A0, VPN_B].map((cluster) => ({ shoot: cluster.split('.')[1] ?? cluster, cluster })));
  const xds = await FileXds.create({ lds: [hopListener({ [SHOOT_A]: 1, [SHOOT_B]: 1 })] });
  try {
    const ports = echo.ports();
    const upstreams = [VPN_A, VPN_A0, VPN_B].map((cluster) => staticCluster(cluster, ports.get(cluster) ?? 0));
    const bootstrap = gatewayBootstrap({ listeners: [], clusters: [...upstreams, doorCluster()] });
    (bootstrap['static_resources'] as JsonObject)['listeners'] = [connectListener(version, variant)];
    bootstrap['dynamic_resources'] = xds.dynamicResources(['lds']);
    bootstrap['bootstrap_extensions'] = [INTERNAL_LISTENER_EXTENSION];
    const envoy = await startEnvoy({ bootstrap, drainTimeSeconds: DRAIN_TIME_S, envoyVersion: version });
    try {
      return await run({ envoy, xds, endpoint: await envoy.boundAddress(CONNECT_LISTENER_NAME) });
    } finally {
      await envoy.stop();
    }
  } finally {
    await Promise.allSettled([echo.close(), xds.remove()]);
  }
}

/** A tunnel to `destination`, answered 200, with the cluster its echo upstream names. */
async function openTunnel(endpoint: BoundAddress, label: string, destination: string): Promise<{ tunnel: HeldConnection; reached: string | undefined }> {
  const tunnel = await HeldConnection.open(label, endpoint, connectRequestBytes(CLIENT, destination, CONNECT_PORT.header));
  expect(await tunnel.connectStatus(), label).toBe('HTTP/1.1 200 OK');
  return { tunnel, reached: (await tunnel.identity())?.cluster };
}

async function hopConnections(envoy: EnvoyInstance): Promise<number> {
  return (await envoy.stats(String.raw`^tcp\.gardener_acl_hop\.downstream_cx_total$`)).get('tcp.gardener_acl_hop.downstream_cx_total') ?? 0;
}

describe('one shared hop listener, one door: a new generation of shoot A', () => {
  it.concurrent.each(CONFORMANCE_ENVOY_VERSIONS)("Envoy %s: closes A's tunnels, none of B's", async (version) => {
    await withGateway(version, { poolPartition: true, reroute: true }, async ({ envoy, xds, endpoint }) => {
      const opened = [await openTunnel(endpoint, 'A', VPN_A), await openTunnel(endpoint, 'A0', VPN_A0), await openTunnel(endpoint, 'B', VPN_B)];
      const tunnels = opened.map(({ tunnel }) => tunnel);
      try {
        expect(opened.map(({ reached }) => reached)).toEqual([VPN_A, VPN_A0, VPN_B]);
        expect(await hopConnections(envoy)).toBe(3);
        const inPlace = await envoy.stat('listener_manager.listener_in_place_updated');
        await xds.update(envoy, 'lds', [hopListener({ [SHOOT_A]: 2, [SHOOT_B]: 1 })]);
        const appliedAt = performance.now();
        expect(await envoy.stat('listener_manager.listener_in_place_updated')).toBe(inPlace + 1);
        expect(await Promise.all(tunnels.map(async (tunnel) => tunnel.echoes()))).toEqual([true, true, true]);
        const fresh = await openTunnel(endpoint, 'A new', VPN_A);
        fresh.tunnel.destroy();
        expect(fresh.reached).toBe(VPN_A);
        await sleep(Math.max(0, appliedAt + WATCH_MS - performance.now()));
        const open = await Promise.all(tunnels.map(async (tunnel) => tunnel.closedAt === undefined && (await tunnel.echoes())));
        expect(open).toEqual([false, false, true]);
      } finally {
        for (const tunnel of tunnels) tunnel.destroy();
      }
    });
  });
});

describe('the door without a pool partition by destination', () => {
  it.concurrent.each(CONFORMANCE_ENVOY_VERSIONS)("Envoy %s: a tunnel to A's second VPN server reaches the first", async (version) => {
    await withGateway(version, { poolPartition: false, reroute: true }, async ({ endpoint }) => {
      const first = await openTunnel(endpoint, 'A', VPN_A);
      const second = await openTunnel(endpoint, 'A0', VPN_A0);
      try {
        expect(first.reached).toBe(VPN_A);
        expect(second.reached).toBe(VPN_A);
      } finally {
        first.tunnel.destroy();
        second.tunnel.destroy();
      }
    });
  });
});

describe('the rewrite without the route looked up again', () => {
  it.concurrent.each(CONFORMANCE_ENVOY_VERSIONS)("Envoy %s: the tunnel goes straight to Gardener's cluster", async (version) => {
    await withGateway(version, { poolPartition: true, reroute: false }, async ({ envoy, endpoint }) => {
      const { tunnel, reached } = await openTunnel(endpoint, 'A', VPN_A);
      try {
        expect(reached).toBe(VPN_A);
        expect(await hopConnections(envoy)).toBe(0);
      } finally {
        tunnel.destroy();
      }
    });
  });
});
