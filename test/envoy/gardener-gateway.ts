// A Gardener seed's Istio ingress gateway as Envoy listeners and clusters, shaped the way Istio
// renders Gardener's Gateway/VirtualService/EnvoyFilter objects (gardener-seed-networking.md,
// sections 2-6 and 9), but bound to loopback with kernel-chosen ports.
//
// Each listener keeps its Gardener port (`logicalPort`) next to the Envoy config: EnvoyFilters
// match `listener.portNumber` against it, while Envoy binds port 0. Listener names stay Istio's
// (`0.0.0.0_<port>`, `[::]_<port>` when IPv6-only), so `listener.name` matches behave as on a seed.
//
// Stand-ins (the ACL filters run before any of them, so they do not change what is tested):
// - clusters are STATIC and point at local echo servers instead of Kubernetes Services;
// - per-host observability chains (Gardener 1.141+, TLS-terminating HTTPS Gateways in Istio) are
//   plain tcp_proxy chains to a per-host cluster;
// - HTTP-CONNECT listeners have only the router HTTP filter (Istio adds its own stats/metadata
//   filters, which upstream Envoy does not have).

import type { EchoIdentity } from './echo-upstreams.js';
import {
  DEFAULT_GATEWAY_LABELS,
  DEFAULT_GATEWAY_NAMESPACE,
  FILTER_NAME,
  GARDENER_ERAS,
  GARDENER_PORT,
  TYPE_URL,
  istioClusterName,
  tcpProxyFilter,
  type GardenerEra,
} from './gardener-shapes.js';
import type { JsonObject } from './json.js';

/** Which loopback addresses a listener binds: 127.0.0.1, ::1, or both (one listener, two addresses). */
export type LoopbackFamily = 'ipv4' | 'ipv6' | 'dual';

export interface GatewayListener {
  /** The Gardener port this listener stands for; EnvoyFilters match `listener.portNumber` on it. */
  logicalPort: number;
  /** The Envoy listener (snake_case JSON), bound to loopback port 0. */
  config: JsonObject;
}

export interface GatewayModel {
  /** The gateway's namespace (EnvoyFilters of other namespaces, except Istio's root, do not apply). */
  namespace: string;
  /** The gateway pods' labels, which `workloadSelector`s are matched against. */
  labels: Readonly<Record<string, string>>;
  listeners: GatewayListener[];
  clusters: JsonObject[];
  /** Listeners EnvoyFilters add as they are (the tunnel hop's internal listeners): static, bound to no port. */
  internalListeners?: JsonObject[];
}

// ---------------------------------------------------------------------------------------------
// Listener building blocks

interface ListenerBinding {
  logicalPort: number;
  family?: LoopbackFamily;
}

function socketAddress(address: string): JsonObject {
  return { socket_address: { address, port_value: 0 } };
}

function listenerFrame(binding: ListenerBinding, listenerFilters: JsonObject[], filterChains: JsonObject[]): GatewayListener {
  const family = binding.family ?? 'ipv4';
  const name = family === 'ipv6' ? `[::]_${binding.logicalPort}` : `0.0.0.0_${binding.logicalPort}`;
  const config: JsonObject = {
    name,
    address: socketAddress(family === 'ipv6' ? '::1' : '127.0.0.1'),
    // Gardener's seed-wide `istio-ingressgateway` EnvoyFilter sets this on every gateway port.
    per_connection_buffer_limit_bytes: 32768,
    listener_filters: listenerFilters,
    filter_chains: filterChains,
  };
  if (family === 'dual') config['additional_addresses'] = [{ address: socketAddress('::1') }];
  return { logicalPort: binding.logicalPort, config };
}

function proxyProtocolListenerFilter(name: string, required: boolean): JsonObject {
  const typedConfig: JsonObject = { '@type': TYPE_URL.proxyProtocol };
  if (!required) typedConfig['allow_requests_without_proxy_protocol'] = true;
  return { name, typed_config: typedConfig };
}

const TLS_INSPECTOR: JsonObject = {
  name: 'envoy.filters.listener.tls_inspector',
  typed_config: { '@type': TYPE_URL.tlsInspector },
};

// ---------------------------------------------------------------------------------------------
// SNI listener (9443)

export interface SniChain {
  /** The chain's `filter_chain_match.server_names` (Istio: the hosts of one Gateway server). */
  serverNames: string[];
  cluster: string;
}

export interface SniListenerOptions extends Partial<ListenerBinding> {
  chains: SniChain[];
  /** Gardener's `proxy-protocol-sni` EnvoyFilter (PROXY header optional). Default true. */
  proxyProtocol?: boolean;
}

export function sniListener(options: SniListenerOptions): GatewayListener {
  const listenerFilters = [
    ...(options.proxyProtocol === false ? [] : [proxyProtocolListenerFilter('proxy_protocol', false)]),
    TLS_INSPECTOR,
  ];
  const chains = options.chains.map((chain) => ({
    filter_chain_match: { server_names: [...chain.serverNames] },
    filters: [tcpProxyFilter(chain.cluster)],
  }));
  return listenerFrame({ logicalPort: options.logicalPort ?? GARDENER_PORT.sni, family: options.family }, listenerFilters, chains);
}

// ---------------------------------------------------------------------------------------------
// HTTP-CONNECT listeners (8132 tls-tunnel, 8443 http-proxy)

export interface HttpConnectListenerOptions extends ListenerBinding {
  /** The header the CONNECT route requires (matching `destinationRegex`) and takes the cluster from. */
  header: string;
  destinationRegex: string;
  virtualHostName: string;
  /** Gardener's `proxy-protocol-vpn` / `proxy-protocol-http-proxy` EnvoyFilters. Default true. */
  proxyProtocol?: boolean;
}

function redirectToHttps(match: JsonObject): JsonObject {
  return { match, redirect: { https_redirect: true, port_redirect: 443 } };
}

function connectRoutes(header: string, destinationRegex: string): JsonObject[] {
  return [
    {
      match: { connect_matcher: {}, headers: [{ name: header, string_match: { safe_regex: { regex: destinationRegex } } }] },
      route: { cluster_header: header, upgrade_configs: [{ upgrade_type: 'CONNECT', connect_config: {} }] },
    },
    redirectToHttps({ connect_matcher: {} }),
    redirectToHttps({ prefix: '/' }),
  ];
}

/** HCM stat prefix as Istio names it for a gateway listener; HTTP RBAC stats live under `http.<it>.rbac.`. */
export function hcmStatPrefix(logicalPort: number): string {
  return `outbound_0.0.0.0_${logicalPort}`;
}

export function httpConnectListener(options: HttpConnectListenerOptions): GatewayListener {
  const hcm: JsonObject = {
    name: FILTER_NAME.httpConnectionManager,
    typed_config: {
      '@type': TYPE_URL.httpConnectionManager,
      stat_prefix: hcmStatPrefix(options.logicalPort),
      use_remote_address: true,
      // Gardener's `http-connect-listener` / `http-proxy` MERGE patches:
      http_protocol_options: { accept_http_10: true },
      upgrade_configs: [{ upgrade_type: 'CONNECT' }],
      route_config: {
        name: `http.${options.logicalPort}`,
        virtual_hosts: [{ name: options.virtualHostName, domains: ['*'], routes: connectRoutes(options.header, options.destinationRegex) }],
      },
      http_filters: [{ name: FILTER_NAME.router, typed_config: { '@type': TYPE_URL.router } }],
    },
  };
  const listenerFilters = options.proxyProtocol === false ? [] : [proxyProtocolListenerFilter('proxy_protocol', false)];
  return listenerFrame(options, listenerFilters, [{ filters: [hcm] }]);
}

// ---------------------------------------------------------------------------------------------
// Legacy apiserver-proxy listener (8443, Gardener < 1.123)

export interface LegacyApiserverProxyListenerOptions extends Partial<ListenerBinding> {
  /** Per-shoot chains, normally added by Gardener's EnvoyFilters (FILTER_CHAIN ADD) rather than here. */
  chains?: JsonObject[];
  /** Second, optional PROXY header when the seed's load balancer adds its own (`inner_proxy_protocol`). */
  innerProxyProtocol?: boolean;
}

/**
 * The `proxy-protocol` Gateway's listener: PROXY header required; Istio renders the blackhole
 * VirtualService as a catch-all chain (to Istio's BlackHoleCluster — inference); Gardener's
 * per-shoot chains select the shoot by the PROXY destination (destination_port + prefix_ranges).
 */
export function legacyApiserverProxyListener(options: LegacyApiserverProxyListenerOptions = {}): GatewayListener {
  const listenerFilters = [proxyProtocolListenerFilter('proxy_protocol', true)];
  if (options.innerProxyProtocol === true) listenerFilters.push(proxyProtocolListenerFilter('inner_proxy_protocol', false));
  const blackhole: JsonObject = { filters: [tcpProxyFilter(istioClusterName.blackHole)] };
  return listenerFrame(
    { logicalPort: options.logicalPort ?? GARDENER_PORT.legacyApiserverProxy, family: options.family },
    listenerFilters,
    [blackhole, ...(options.chains ?? [])],
  );
}

// ---------------------------------------------------------------------------------------------
// Clusters

/** A STATIC cluster with one loopback endpoint (the echo server standing in for a Service). */
export function staticCluster(name: string, port: number): JsonObject {
  return {
    name,
    type: 'STATIC',
    connect_timeout: '1s',
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }],
    },
  };
}

/** Istio's BlackHoleCluster: STATIC without endpoints, so every connection to it fails. */
export function blackHoleCluster(): JsonObject {
  return { name: istioClusterName.blackHole, type: 'STATIC', connect_timeout: '1s' };
}

// ---------------------------------------------------------------------------------------------
// A whole gateway

export interface ShootSpec {
  /** `shoot--<project>--<name>` (or the legacy `shoot-<project>--<name>`). */
  technicalID: string;
  /** One entry per 9443 filter chain (Istio: per Gateway server), each that chain's server names. */
  sniChains: string[][];
  /** HA VPN: number of `vpn-seed-server-<i>` upstreams; without it a single `vpn-seed-server`. */
  haVpnServers?: number;
  /** Gardener 1.141+: observability hosts, each with its own exact-SNI chain. */
  observabilityHosts?: string[];
}

export interface GardenerGatewaySpec {
  era: GardenerEra;
  shoots: ShootSpec[];
  namespace?: string;
  labels?: Readonly<Record<string, string>>;
  family?: LoopbackFamily;
  /** PROXY protocol on the SNI and HTTP-CONNECT listeners (a seed whose LB speaks it). Default true. */
  proxyProtocol?: boolean;
  /** Gardener 1.89-1.140: the nginx wildcard chain `*.<domain>` on 9443. */
  observabilityWildcardDomain?: string;
}

/** Stand-in cluster for a 1.141+ observability host (real Istio terminates TLS and routes by HTTP). */
export function observabilityClusterName(technicalID: string, host: string): string {
  return `outbound|443||${host.split('.')[0] ?? host}.${technicalID}.svc.cluster.local`;
}

function shootUpstreams(shoot: ShootSpec): EchoIdentity[] {
  const id = shoot.technicalID;
  const vpnServers =
    shoot.haVpnServers === undefined
      ? [istioClusterName.vpnSeedServer(id)]
      : Array.from({ length: shoot.haVpnServers }, (_unused, index) => istioClusterName.vpnSeedServer(id, index));
  const clusters = [
    istioClusterName.kubeApiserver(id),
    ...vpnServers,
    istioClusterName.kubeApiserverSocket(id),
    ...(shoot.observabilityHosts ?? []).map((host) => observabilityClusterName(id, host)),
  ];
  return clusters.map((cluster) => ({ shoot: id, cluster }));
}

/**
 * Every upstream the gateway routes to. All shoots' clusters are on every gateway, as before
 * Gardener 1.143 (Services exported to `*`), so crafted CONNECT headers can reach any shoot.
 */
export function gatewayUpstreams(spec: GardenerGatewaySpec): EchoIdentity[] {
  const nginx = spec.observabilityWildcardDomain === undefined ? [] : [{ shoot: 'garden', cluster: istioClusterName.nginxIngress }];
  return [...spec.shoots.flatMap(shootUpstreams), ...nginx];
}

function sniChains(spec: GardenerGatewaySpec): SniChain[] {
  const perShoot = spec.shoots.flatMap((shoot) => [
    ...shoot.sniChains.map((serverNames) => ({ serverNames, cluster: istioClusterName.kubeApiserver(shoot.technicalID) })),
    ...(shoot.observabilityHosts ?? []).map((host) => ({
      serverNames: [host],
      cluster: observabilityClusterName(shoot.technicalID, host),
    })),
  ]);
  const wildcard =
    spec.observabilityWildcardDomain === undefined
      ? []
      : [{ serverNames: [`*.${spec.observabilityWildcardDomain}`], cluster: istioClusterName.nginxIngress }];
  return [...perShoot, ...wildcard];
}

/** The gateway of `spec.era`; `upstreamPorts` maps each of `gatewayUpstreams(spec)` to its echo port. */
export function buildGardenerGateway(spec: GardenerGatewaySpec, upstreamPorts: ReadonlyMap<string, number>): GatewayModel {
  const era = GARDENER_ERAS[spec.era];
  const family = spec.family;
  const proxyProtocol = spec.proxyProtocol ?? true;
  const listeners = [
    sniListener({ chains: sniChains(spec), family, proxyProtocol }),
    ...era.connectPorts.map((port) =>
      httpConnectListener({ ...port, destinationRegex: era.destinationRegex, family, proxyProtocol }),
    ),
    ...(era.legacyApiserverProxyPort ? [legacyApiserverProxyListener({ family })] : []),
  ];
  const clusters = gatewayUpstreams(spec).map(({ cluster }) => {
    const port = upstreamPorts.get(cluster);
    if (port === undefined) throw new Error(`no upstream port for cluster ${cluster}`);
    return staticCluster(cluster, port);
  });
  clusters.push(blackHoleCluster());
  return {
    namespace: spec.namespace ?? DEFAULT_GATEWAY_NAMESPACE,
    labels: spec.labels ?? DEFAULT_GATEWAY_LABELS,
    listeners,
    clusters,
  };
}

/**
 * The runtime istio-proxy starts with (istio/istio pkg/bootstrap: extractRuntimeFlags) as far as it
 * changes what config Envoy accepts: Envoy's own RE2 program size limit is 100, which already
 * rejects Gardener's destination-header regexes; Istio raises it to 32768. The admin layer (Istio
 * has one too) lets tests flip runtime guards through `EnvoyInstance.setRuntime`.
 */
/** Envoy's extension that lets clusters reach internal listeners; Istio's proxy bootstrap always has it. */
export const INTERNAL_LISTENER_EXTENSION: JsonObject = {
  name: 'envoy.bootstrap.internal_listener',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener' },
};

export const ISTIO_PROXY_RUNTIME: JsonObject = {
  layers: [
    { name: 'global config', static_layer: { 're2.max_program_size.error_level': '32768' } },
    { name: 'admin', admin_layer: {} },
  ],
};

/** An Envoy bootstrap serving these listeners and clusters (admin is added by startEnvoy). */
/** Every listener of the gateway as Envoy takes it: the port listeners, then the internal ones. */
export function listenerConfigs(gateway: Pick<GatewayModel, 'listeners' | 'internalListeners'>): JsonObject[] {
  return [...gateway.listeners.map((listener) => listener.config), ...(gateway.internalListeners ?? [])];
}

export function gatewayBootstrap(gateway: Pick<GatewayModel, 'listeners' | 'clusters' | 'internalListeners'>): JsonObject {
  return {
    static_resources: {
      listeners: listenerConfigs(gateway),
      clusters: gateway.clusters,
    },
    layered_runtime: ISTIO_PROXY_RUNTIME,
    // As Istio's gateway bootstrap: internal listeners (the tunnel hop's), also those LDS brings later, need it.
    bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION],
  };
}
