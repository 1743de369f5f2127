// Which config change closes the HTTP-CONNECT tunnels a client already has open to one shoot (A),
// without touching another shoot's (B)? docs/operators/revocation.md decides on the answer: a tightened ACL
// delivered through ECDS stops new tunnels at once, but established tunnels keep the verdict they
// got, because nothing short of a per-shoot "hop" was found to close exactly one shoot's tunnels.
// That decision rests on facts about Envoy, not about our code, so they are pinned here on both
// supported Envoys: if a future Envoy closes tunnels when their cluster changes, or stops closing
// them through the hop, the decision must be revisited, and this suite says so.
//
// Every case holds 2 tunnels to A and 2 to B through a Gardener-shaped CONNECT listener
// (route `cluster_header`), changes only A's side, waits past the drain time and counts the
// tunnels that no longer carry data:
// - a CDS update of A's cluster (a changed metadata field): none closed;
// - A's cluster removed from CDS: none closed, although a new CONNECT to A now fails (503);
// - max_connection_duration 1 s on A's cluster (a DestinationRule's maxConnectionDuration): Envoy
//   counts it reached on both of A's tunnels, and closes neither;
// - the hop: A's cluster forwards into an internal listener whose tcp_proxy goes to A's real
//   cluster; a change of only that listener's filter chain closes A's 2 tunnels and none of B's.
// The first three stand for the cluster-side candidates measured while deciding (circuit breakers,
// endpoint replacement, close_connections_on_host_set_change ended the same way): Envoy keeps an
// established TCP-proxied upstream connection whatever happens to its cluster. What did close
// tunnels is the drain of a replaced filter chain, and a chain of its own per shoot is what
// confines that drain to one shoot. (That ECDS updates leave tunnels open is listener-update.test.ts.)

import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { EchoUpstreams } from './echo-upstreams.js';
import { CONFORMANCE_ENVOY_VERSIONS, type EnvoyVersion } from './envoy-binary.js';
import { startEnvoy, type BoundAddress, type EnvoyInstance } from './envoy-process.js';
import { FileXds, type XdsKind } from './file-xds.js';
import { INTERNAL_LISTENER_EXTENSION, gatewayBootstrap, httpConnectListener, staticCluster, type GatewayListener } from './gardener-gateway.js';
import { FILTER_NAME, GARDENER_ERAS, GARDENER_PORT, TYPE_URL, connectPortOf, istioClusterName } from './gardener-shapes.js';
import { HeldConnection, connectRequestBytes } from './held-connection.js';
import type { JsonObject } from './json.js';

const SHOOT_A = 'shoot--p--a';
const SHOOT_B = 'shoot--p--b';
const CLUSTER_A = istioClusterName.kubeApiserver(SHOOT_A);
const CLUSTER_B = istioClusterName.kubeApiserver(SHOOT_B);
/** The client in the PROXY header; no RBAC runs here, so any address would do. */
const CLIENT = '127.0.0.7';

const ERA = GARDENER_ERAS['v1.139-v1.149'];
const CONNECT_PORT = connectPortOf(ERA, GARDENER_PORT.httpProxy);
const CONNECT_LISTENER: GatewayListener = httpConnectListener({ ...CONNECT_PORT, destinationRegex: ERA.destinationRegex });
const CONNECT_LISTENER_NAME = `0.0.0.0_${GARDENER_PORT.httpProxy}`;

const DRAIN_TIME_S = 1;
/** From the change to the verdict: the drain time, the end-of-drain close (about 1 s later) and slack for a loaded machine. */
const WATCH_MS = DRAIN_TIME_S * 1000 + 4_000;

const sleep = async (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Clusters and the hop

/** Cluster options for HTTP-based upstream settings; what a DestinationRule's maxConnectionDuration renders to. */
function withMaxConnectionDuration(cluster: JsonObject, duration: string): JsonObject {
  const type = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';
  return {
    ...cluster,
    typed_extension_protocol_options: {
      [type]: {
        '@type': `type.googleapis.com/${type}`,
        explicit_http_config: { http_protocol_options: {} },
        common_http_protocol_options: { max_connection_duration: duration },
      },
    },
  };
}

const hopListenerName = (cluster: string): string => `acl-hop|${cluster}`;
const realClusterName = (cluster: string): string => `acl-real|${cluster}`;

/** The route's cluster (Istio's name, so routing is unchanged) as a door into the shoot's hop listener. */
function hopCluster(cluster: string): JsonObject {
  return {
    name: cluster,
    type: 'STATIC',
    connect_timeout: '1s',
    load_assignment: {
      cluster_name: cluster,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { envoy_internal_address: { server_listener_name: hopListenerName(cluster) } } } }] }],
    },
    transport_socket: {
      name: 'envoy.transport_sockets.internal_upstream',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport',
        transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' } },
      },
    },
  };
}

/** The shoot's hop: one filter chain, its metadata standing for the ACL generation it was built for. */
function hopListener(cluster: string, generation: number): JsonObject {
  const tcpProxy = { name: FILTER_NAME.tcpProxy, typed_config: { '@type': TYPE_URL.tcpProxy, stat_prefix: hopListenerName(cluster), cluster: realClusterName(cluster) } };
  return {
    name: hopListenerName(cluster),
    internal_listener: {},
    filter_chains: [{ metadata: { filter_metadata: { 'gardener-acl': { generation: String(generation) } } }, filters: [tcpProxy] }],
  };
}

// ---------------------------------------------------------------------------------------------
// The cases

type Ports = ReadonlyMap<string, number>;

function portOf(ports: Ports, cluster: string): number {
  const port = ports.get(cluster);
  if (port === undefined) throw new Error(`no echo upstream for ${cluster}`);
  return port;
}

interface Case {
  name: string;
  /** Clusters in the bootstrap. */
  staticClusters(ports: Ports): JsonObject[];
  /** What Envoy first reads from the xDS files (static listener and clusters stay as they are). */
  xds(ports: Ports): Partial<Record<XdsKind, JsonObject[]>>;
  internalListeners: boolean;
  /** Changes only A's side; resolves once Envoy applied it. */
  change(envoy: EnvoyInstance, xds: FileXds, ports: Ports): Promise<void>;
  /** How much these counters grow from before the tunnels opened to the end: that the change took effect. */
  counted: Readonly<Record<string, number>>;
  closed: { A: number; B: number };
  /** The status of a new CONNECT right after the change. */
  newConnect: { A: number; B: number };
}

const CDS_CLUSTERS = (ports: Ports): JsonObject[] => [staticCluster(CLUSTER_A, portOf(ports, CLUSTER_A)), staticCluster(CLUSTER_B, portOf(ports, CLUSTER_B))];

const CASES: readonly Case[] = [
  {
    name: "a CDS update of A's cluster (metadata changed)",
    staticClusters: () => [],
    xds: (ports) => ({ cds: CDS_CLUSTERS(ports) }),
    internalListeners: false,
    async change(envoy, xds, ports) {
      const [a, b] = CDS_CLUSTERS(ports) as [JsonObject, JsonObject];
      await xds.update(envoy, 'cds', [{ ...a, metadata: { filter_metadata: { 'gardener-acl': { generation: '2' } } } }, b]);
    },
    counted: { 'cluster_manager.cluster_modified': 1, 'cluster_manager.cluster_removed': 0 },
    closed: { A: 0, B: 0 },
    newConnect: { A: 200, B: 200 },
  },
  {
    name: "A's cluster removed from CDS",
    staticClusters: () => [],
    xds: (ports) => ({ cds: CDS_CLUSTERS(ports) }),
    internalListeners: false,
    async change(envoy, xds, ports) {
      await xds.update(envoy, 'cds', [staticCluster(CLUSTER_B, portOf(ports, CLUSTER_B))]);
    },
    counted: { 'cluster_manager.cluster_removed': 1, 'cluster_manager.cluster_modified': 0 },
    closed: { A: 0, B: 0 },
    // No cluster, no route target: Envoy's router answers 503 (no_cluster).
    newConnect: { A: 503, B: 200 },
  },
  {
    // Set from the start, not by a CDS update: the tunnels' upstream connections are created under
    // it, so its timer runs on them (a later update would only apply to connections opened after).
    name: "max_connection_duration 1 s on A's cluster",
    staticClusters: () => [],
    xds: (ports) => {
      const [a, b] = CDS_CLUSTERS(ports) as [JsonObject, JsonObject];
      return { cds: [withMaxConnectionDuration(a, '1s'), b] };
    },
    internalListeners: false,
    change: async () => undefined,
    // Fired on both of A's tunnels (and on no other connection): the limit was reached, not ignored.
    counted: { [`cluster.${CLUSTER_A}.upstream_cx_max_duration_reached`]: 2, [`cluster.${CLUSTER_B}.upstream_cx_max_duration_reached`]: 0 },
    closed: { A: 0, B: 0 },
    newConnect: { A: 200, B: 200 },
  },
  {
    name: "the hop: only A's hop listener's filter chain changed",
    staticClusters: (ports) =>
      [CLUSTER_A, CLUSTER_B].flatMap((cluster) => [hopCluster(cluster), staticCluster(realClusterName(cluster), portOf(ports, cluster))]),
    xds: () => ({ lds: [hopListener(CLUSTER_A, 1), hopListener(CLUSTER_B, 1)] }),
    internalListeners: true,
    async change(envoy, xds) {
      await xds.update(envoy, 'lds', [hopListener(CLUSTER_A, 2), hopListener(CLUSTER_B, 1)]);
    },
    // In place (only a filter chain changed), one listener: B's hop and the CONNECT listener are untouched.
    counted: { 'listener_manager.listener_in_place_updated': 1, 'listener_manager.listener_modified': 1 },
    closed: { A: 2, B: 0 },
    // The hop's new chain takes new tunnels at once: only the established ones are cut.
    newConnect: { A: 200, B: 200 },
  },
];

// ---------------------------------------------------------------------------------------------
// The experiment

interface Observation {
  counted: Record<string, number>;
  /** Every tunnel still carried data right after Envoy applied the change (closing waits for the drain). */
  allEchoedRightAfter: boolean;
  newConnect: { A: number; B: number };
  closed: { A: number; B: number };
  /** ms from the change applied to each close (for the report). */
  closedAfterMs: Record<string, number>;
}

/** Opens a CONNECT tunnel to `cluster`, checks it reached that cluster's upstream, returns it open. */
async function openTunnel(endpoint: BoundAddress, label: string, cluster: string): Promise<HeldConnection> {
  const tunnel = await HeldConnection.open(label, endpoint, connectRequestBytes(CLIENT, cluster, CONNECT_PORT.header));
  try {
    expect(await tunnel.connectStatus(), label).toBe('HTTP/1.1 200 OK');
    expect((await tunnel.identity())?.cluster, label).toBe(cluster);
    return tunnel;
  } catch (error) {
    tunnel.destroy();
    throw error;
  }
}

/** The status code Envoy answers a new CONNECT to `cluster` with. */
async function newConnectStatus(endpoint: BoundAddress, cluster: string): Promise<number> {
  const tunnel = await HeldConnection.open(`new ${cluster}`, endpoint, connectRequestBytes(CLIENT, cluster, CONNECT_PORT.header));
  try {
    return Number((await tunnel.connectStatus()).split(' ')[1]);
  } finally {
    tunnel.destroy();
  }
}

async function counters(envoy: EnvoyInstance, names: readonly string[]): Promise<Record<string, number>> {
  const values: Record<string, number> = {};
  for (const name of names) values[name] = await envoy.stat(name);
  return values;
}

async function observe(testCase: Case, envoy: EnvoyInstance, xds: FileXds, ports: Ports): Promise<Observation> {
  const names = Object.keys(testCase.counted);
  const before = await counters(envoy, names);
  const endpoint = await envoy.boundAddress(CONNECT_LISTENER_NAME);
  const tunnels: HeldConnection[] = [];
  try {
    for (const [shoot, cluster] of [['A', CLUSTER_A], ['B', CLUSTER_B]] as const) {
      for (const index of [1, 2]) tunnels.push(await openTunnel(endpoint, `${shoot}${index}`, cluster));
    }
    await testCase.change(envoy, xds, ports);
    const appliedAt = performance.now();
    const echoedRightAfter = await Promise.all(tunnels.map(async (tunnel) => tunnel.echoes()));
    const newConnect = { A: await newConnectStatus(endpoint, CLUSTER_A), B: await newConnectStatus(endpoint, CLUSTER_B) };
    await sleep(Math.max(0, appliedAt + WATCH_MS - performance.now()));
    const closed = { A: 0, B: 0 };
    const closedAfterMs: Record<string, number> = {};
    for (const tunnel of tunnels) {
      const open = tunnel.closedAt === undefined && (await tunnel.echoes());
      if (!open) closed[tunnel.label.startsWith('A') ? 'A' : 'B'] += 1;
      if (tunnel.closedAt !== undefined) closedAfterMs[tunnel.label] = Math.round(tunnel.closedAt - appliedAt);
    }
    const after = await counters(envoy, names);
    const counted = Object.fromEntries(names.map((name) => [name, (after[name] ?? 0) - (before[name] ?? 0)]));
    return { counted, allEchoedRightAfter: echoedRightAfter.every(Boolean), newConnect, closed, closedAfterMs };
  } finally {
    for (const tunnel of tunnels) tunnel.destroy();
  }
}

async function runCase(testCase: Case, envoyVersion: EnvoyVersion): Promise<Observation> {
  const echo = await EchoUpstreams.start([
    { shoot: SHOOT_A, cluster: CLUSTER_A },
    { shoot: SHOOT_B, cluster: CLUSTER_B },
  ]);
  const initial = testCase.xds(echo.ports());
  const xds = await FileXds.create(initial);
  try {
    const bootstrap = gatewayBootstrap({ listeners: [CONNECT_LISTENER], clusters: testCase.staticClusters(echo.ports()) });
    bootstrap['dynamic_resources'] = xds.dynamicResources(Object.keys(initial) as XdsKind[]);
    if (testCase.internalListeners) bootstrap['bootstrap_extensions'] = [INTERNAL_LISTENER_EXTENSION];
    const envoy = await startEnvoy({ bootstrap, drainTimeSeconds: DRAIN_TIME_S, envoyVersion });
    try {
      return await observe(testCase, envoy, xds, echo.ports());
    } finally {
      await envoy.stop();
    }
  } finally {
    await Promise.allSettled([echo.close(), xds.remove()]);
  }
}

describe.each(CASES)('$name', (testCase) => {
  // The two versions at once: two small Envoys, each mostly waiting out the drain.
  it.concurrent.each(CONFORMANCE_ENVOY_VERSIONS)(
    `Envoy %s: closes ${testCase.closed.A} of A's 2 tunnels and ${testCase.closed.B} of B's`,
    async (envoyVersion) => {
      const observation = await runCase(testCase, envoyVersion);
      console.info(`${testCase.name}, Envoy ${envoyVersion}: closed after (ms) ${JSON.stringify(observation.closedAfterMs)}`);
      expect(observation.counted).toEqual(testCase.counted);
      expect(observation.allEchoedRightAfter).toBe(true);
      expect(observation.newConnect).toEqual(testCase.newConnect);
      expect(observation.closed).toEqual(testCase.closed);
    },
  );
});
