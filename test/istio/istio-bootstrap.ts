// Turns what Istio renders for a gateway proxy (listeners, RDS routes, clusters, as istiod would
// push them over xDS) into a static Envoy bootstrap that runs on loopback. Everything not listed
// here is Istio's output unchanged; what is changed, and why:
//
// - listener addresses: `0.0.0.0:<port>` becomes 127.0.0.1 and ::1 on kernel-chosen ports; each
//   listener keeps its name and its Istio port as `logicalPort` (the port EnvoyFilters matched);
// - listeners on a `pipe` address (Gardener's `<id>--kube-apiserver-socket` TLS-termination
//   listener on an abstract socket) are dropped: abstract socket names are per network namespace,
//   so parallel Envoys would collide; their cluster is pointed at an echo server like every other;
// - RDS: `rds` in an HTTP connection manager is replaced by the RouteConfiguration of that name
//   (istiod would serve it over ADS);
// - Istio-only extensions upstream Envoy lacks are dropped: the HTTP and network filters named in
//   ISTIO_ONLY_FILTERS (peer metadata exchange, ALPN override, stats) and the clusters' `filters`
//   (Istio's upstream metadata exchange);
// - downstream TLS: SDS secrets (`kubernetes://<credentialName>[-cacert]`, from istiod over ADS)
//   become static secrets of the same name holding throwaway certificates;
// - file access logs to `/dev/stdout` (Gardener's legacy apiserver-proxy chains) become Envoy's
//   stdout access logger with the same format: the harness reads Envoy's stdout through a
//   socket, which `/dev/stdout` cannot be opened on;
// - clusters: EDS (endpoints from Kubernetes) and Gardener's STATIC pipe clusters become STATIC
//   clusters with one loopback endpoint, an echo server named exactly like the cluster; their
//   upstream transport sockets (Istio mTLS `tlsMode-istio` matches, DestinationRule TLS
//   origination to kube-apiserver) are dropped because the echo servers speak plain TCP. All of
//   this happens behind the ACL filters, which decide on the downstream connection.

import type { EchoIdentity } from '../envoy/echo-upstreams.js';
import type { GatewayListener } from '../envoy/gardener-gateway.js';
import { INTERNAL_LISTENER_EXTENSION, staticCluster } from '../envoy/gardener-gateway.js';
import { FILTER_NAME } from '../envoy/gardener-shapes.js';
import { cloneJson, getObject, getObjectList, getString, isJsonObject, type JsonObject, type JsonValue } from '../envoy/json.js';
import type { IstioRenderOutput } from './istio-render.js';

/** Filters of Istio's own Envoy build (istio/proxy) that upstream Envoy does not have. */
export const ISTIO_ONLY_FILTERS: ReadonlySet<string> = new Set(['istio.metadata_exchange', 'istio.alpn', 'istio.stats']);

export interface StaticGatewayPlan {
  /** Listeners bound to loopback port 0; `logicalPort` is the port Istio rendered. */
  readonly listeners: readonly GatewayListener[];
  /** Internal listeners (the ACL's tunnel hops), kept as rendered: they bind no socket. */
  readonly internalListeners: readonly JsonObject[];
  /** Clusters that need no upstream (e.g. Istio's BlackHoleCluster, a hop's door), kept as rendered. */
  readonly keptClusters: readonly JsonObject[];
  /** One echo upstream per rewritten cluster: the shoot (namespace) it belongs to and its name. */
  readonly upstreams: readonly EchoIdentity[];
  /** SDS secret names the listeners refer to (served as static secrets). */
  readonly sdsSecretNames: readonly string[];
  /** What was dropped or rewritten, one line each (for reports and failure messages). */
  readonly changes: readonly string[];
}

const STDOUT_ACCESS_LOG = 'envoy.access_loggers.stdout';
const STDOUT_ACCESS_LOG_TYPE = 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog';

function isDevStdoutLogger(logger: JsonObject): boolean {
  return getString(logger, 'name') === 'envoy.access_loggers.file' && getString(getObject(logger, 'typed_config') ?? {}, 'path') === '/dev/stdout';
}

function loopbackAddress(address: string): JsonObject {
  return { socket_address: { address, port_value: 0 } };
}

/** The namespace a cluster belongs to: `outbound|<port>|<subset>|<svc>.<ns>.svc...` or `<ns>--kube-apiserver-socket`. */
export function clusterOwner(cluster: string): string {
  const outbound = /^outbound\|\d+\|[^|]*\|[^.]+\.([^.]+)\.svc\./.exec(cluster)?.[1];
  if (outbound !== undefined) return outbound;
  const socket = /^(.+)--kube-apiserver-socket$/.exec(cluster)?.[1];
  return socket ?? 'unknown';
}

class Conversion {
  readonly changes: string[] = [];
  readonly sdsSecretNames = new Set<string>();
  private readonly routes: ReadonlyMap<string, JsonObject>;

  constructor(render: IstioRenderOutput) {
    this.routes = new Map(render.routes.map((route) => [getString(route, 'name') ?? '', route]));
  }

  private dropIstioFilters(filters: JsonObject[], where: string): JsonObject[] {
    return filters.filter((filter) => {
      const name = getString(filter, 'name') ?? '';
      if (!ISTIO_ONLY_FILTERS.has(name)) return true;
      this.changes.push(`${where}: dropped Istio-only filter ${name}`);
      return false;
    });
  }

  private inlineRoutes(hcm: JsonObject, where: string): void {
    const rds = getObject(hcm, 'rds');
    if (rds === undefined) return;
    const name = getString(rds, 'route_config_name') ?? '';
    const route = this.routes.get(name);
    if (route === undefined) throw new Error(`${where}: RDS route ${name} was not rendered`);
    delete hcm['rds'];
    hcm['route_config'] = cloneJson(route);
    this.changes.push(`${where}: RDS ${name} inlined`);
  }

  /** SDS configs pointing at istiod lose their config source: Envoy then uses the static secret of that name. */
  private staticSds(node: JsonValue, where: string): void {
    if (Array.isArray(node)) {
      for (const element of node) this.staticSds(element, where);
      return;
    }
    if (!isJsonObject(node)) return;
    for (const [key, value] of Object.entries(node)) {
      if ((key === 'tls_certificate_sds_secret_configs' || key === 'validation_context_sds_secret_config') && value !== null) {
        for (const config of Array.isArray(value) ? value : [value]) {
          if (!isJsonObject(config)) continue;
          const name = getString(config, 'name') ?? '';
          delete config['sds_config'];
          this.sdsSecretNames.add(name);
          this.changes.push(`${where}: SDS ${name} served as a static throwaway secret`);
        }
      } else {
        this.staticSds(value, where);
      }
    }
  }

  /** Replaces file access loggers writing to /dev/stdout, wherever they sit in `node`. */
  private stdoutAccessLogs(node: JsonValue, where: string): void {
    if (Array.isArray(node)) {
      node.forEach((element, index) => {
        if (isJsonObject(element) && isDevStdoutLogger(element)) {
          const format = getObject(getObject(element, 'typed_config') ?? {}, 'log_format');
          node[index] = { name: STDOUT_ACCESS_LOG, typed_config: { '@type': STDOUT_ACCESS_LOG_TYPE, ...(format === undefined ? {} : { log_format: format }) } };
          this.changes.push(`${where}: access log to /dev/stdout written by Envoy's stdout access logger`);
        } else {
          this.stdoutAccessLogs(element, where);
        }
      });
    } else if (isJsonObject(node)) {
      for (const value of Object.values(node)) this.stdoutAccessLogs(value, where);
    }
  }

  private filterChain(chain: JsonObject, where: string): void {
    const filters = this.dropIstioFilters(getObjectList(chain, 'filters'), where);
    this.stdoutAccessLogs(filters, where);
    for (const filter of filters) {
      if (getString(filter, 'name') !== FILTER_NAME.httpConnectionManager) continue;
      const hcm = getObject(filter, 'typed_config');
      if (hcm === undefined) continue;
      this.inlineRoutes(hcm, where);
      hcm['http_filters'] = this.dropIstioFilters(getObjectList(hcm, 'http_filters'), where);
    }
    chain['filters'] = filters;
    const transportSocket = getObject(chain, 'transport_socket');
    if (transportSocket !== undefined) this.staticSds(transportSocket, where);
  }

  listener(rendered: JsonObject): GatewayListener | undefined {
    const name = getString(rendered, 'name') ?? '?';
    const address = getObject(rendered, 'address');
    const socket = address === undefined ? undefined : getObject(address, 'socket_address');
    const port = socket?.['port_value'];
    if (socket === undefined || typeof port !== 'number') {
      this.changes.push(`listener ${name}: dropped (address ${JSON.stringify(address)} is not a TCP socket)`);
      return undefined;
    }
    const config = cloneJson(rendered);
    config['address'] = loopbackAddress('127.0.0.1');
    config['additional_addresses'] = [{ address: loopbackAddress('::1') }];
    this.changes.push(`listener ${name}: ${getString(socket, 'address') ?? '?'}:${port} rebound to 127.0.0.1 and ::1, kernel-chosen ports`);
    getObjectList(config, 'filter_chains').forEach((chain, index) => this.filterChain(chain, `listener ${name} chain ${index}`));
    const defaultChain = getObject(config, 'default_filter_chain');
    if (defaultChain !== undefined) this.filterChain(defaultChain, `listener ${name} default chain`);
    return { logicalPort: port, config };
  }
}

/** The echo upstream a cluster's endpoints stand for: its EDS service (a cluster an EnvoyFilter renamed keeps it), else its name. */
export function upstreamName(cluster: JsonObject): string {
  return getString(getObject(cluster, 'eds_cluster_config') ?? {}, 'service_name') ?? getString(cluster, 'name') ?? '?';
}

function isInternalListener(listener: JsonObject): boolean {
  return getObject(listener, 'internal_listener') !== undefined;
}

function needsUpstream(cluster: JsonObject): boolean {
  if (getString(cluster, 'type') === 'EDS') return true;
  const endpoints = getObjectList(getObject(cluster, 'load_assignment') ?? {}, 'endpoints');
  return endpoints.some((locality) =>
    getObjectList(locality, 'lb_endpoints').some((endpoint) => JSON.stringify(endpoint).includes('"pipe"')),
  );
}

/** Plans the static config for one rendered gateway; `staticGatewayBootstrap` completes it. */
export function planStaticGateway(render: IstioRenderOutput): StaticGatewayPlan {
  const conversion = new Conversion(render);
  const listeners = render.listeners.filter((l) => !isInternalListener(l)).flatMap((listener) => conversion.listener(listener) ?? []);
  const internalListeners = render.listeners.filter(isInternalListener).map(cloneJson);
  const upstreams: EchoIdentity[] = [];
  const keptClusters: JsonObject[] = [];
  for (const cluster of render.clusters) {
    const name = getString(cluster, 'name') ?? '?';
    if (needsUpstream(cluster)) {
      upstreams.push({ shoot: clusterOwner(upstreamName(cluster)), cluster: upstreamName(cluster) });
      conversion.changes.push(`cluster ${name}: ${getString(cluster, 'type') ?? '?'} replaced by a STATIC loopback echo server (upstream TLS and Istio filters dropped)`);
    } else {
      keptClusters.push(cloneJson(cluster));
    }
  }
  return { listeners, internalListeners, keptClusters, upstreams, sdsSecretNames: [...conversion.sdsSecretNames].sort(), changes: conversion.changes };
}

/**
 * Istio's rendered cluster with its endpoints replaced: STATIC, one loopback endpoint. Only the
 * fields that bind it to Kubernetes or to Istio's own proxy build go (EDS config, upstream
 * transport sockets, cluster filters); load balancing, timeouts and circuit breakers stay.
 */
function loopbackCluster(rendered: JsonObject, port: number): JsonObject {
  const name = getString(rendered, 'name') ?? '?';
  const cluster = cloneJson(rendered);
  for (const field of ['eds_cluster_config', 'transport_socket', 'transport_socket_matches', 'filters', 'load_assignment']) delete cluster[field];
  return { ...cluster, type: 'STATIC', load_assignment: staticCluster(name, port)['load_assignment'] ?? null };
}

export interface StaticGatewayInputs {
  readonly render: IstioRenderOutput;
  readonly plan: StaticGatewayPlan;
  /** Echo server port per cluster name (every `plan.upstreams` entry). */
  readonly upstreamPorts: ReadonlyMap<string, number>;
  readonly secrets: readonly JsonObject[];
  readonly runtime: JsonObject;
}

export function staticGatewayBootstrap(inputs: StaticGatewayInputs): JsonObject {
  const rewritten = inputs.render.clusters
    .filter((cluster) => needsUpstream(cluster))
    .map((cluster) => {
      const name = getString(cluster, 'name') ?? '?';
      const port = inputs.upstreamPorts.get(upstreamName(cluster));
      if (port === undefined) throw new Error(`no echo upstream for cluster ${name}`);
      return loopbackCluster(cluster, port);
    });
  return {
    static_resources: {
      listeners: [...inputs.plan.listeners.map((listener) => listener.config), ...inputs.plan.internalListeners],
      clusters: [...inputs.plan.keptClusters, ...rewritten],
      secrets: [...inputs.secrets],
    },
    layered_runtime: inputs.runtime,
    bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION],
  };
}
