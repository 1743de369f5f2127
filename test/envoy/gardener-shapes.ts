// Names, regexes and objects exactly as Gardener and Istio spell them on a seed
// (shared/docs/gardener-seed-networking.md, sections 2-6). The test gateway is built from these,
// so a typo here would make every real-Envoy test test the wrong thing: keep them verbatim.

import { isIPv4 } from 'node:net';
import type { JsonObject } from './json.js';

export const DEFAULT_GATEWAY_NAMESPACE = 'istio-ingress';
export const DEFAULT_GATEWAY_LABELS: Readonly<Record<string, string>> = {
  app: 'istio-ingressgateway',
  istio: 'ingressgateway',
};

/** Gardener's listener ports (the Istio Service targetPorts), which EnvoyFilters match as `portNumber`. */
export const GARDENER_PORT = { sni: 9443, httpProxy: 8443, legacyApiserverProxy: 8443, tlsTunnel: 8132 } as const;

export const HEADER_REVERSED_VPN = 'Reversed-VPN';
export const HEADER_GARDENER_DESTINATION = 'X-Gardener-Destination';

/** Envoy cluster names as Istio generates them for Gardener's Services (and Gardener's own socket cluster). */
export const istioClusterName = {
  kubeApiserver: (technicalID: string): string => `outbound|443||kube-apiserver.${technicalID}.svc.cluster.local`,
  vpnSeedServer: (technicalID: string, haIndex?: number): string =>
    `outbound|1194||vpn-seed-server${haIndex === undefined ? '' : `-${haIndex}`}.${technicalID}.svc.cluster.local`,
  kubeApiserverSocket: (technicalID: string): string => `${technicalID}--kube-apiserver-socket`,
  nginxIngress: 'outbound|443||nginx-ingress-controller.garden.svc.cluster.local',
  /** Istio's cluster for routes whose destination does not exist. */
  blackHole: 'BlackHoleCluster',
} as const;

/** The `safe_regex` Gardener's CONNECT routes require of the destination header (section 5.4). */
export const DESTINATION_HEADER_REGEX = {
  v1_113: String.raw`^outbound\|(1194\|\|vpn-seed-server(-[0-4])?|443\|\|kube-apiserver)\..*\.svc\.cluster\.local$`,
  v1_114: String.raw`^(outbound\|(1194\|\|vpn-seed-server(-[0-4])?|443\|\|kube-apiserver)\..*\.svc\.cluster\.local|shoot--.*--.*--kube-apiserver-socket)$`,
  v1_139: String.raw`^(outbound\|(1194\|\|vpn-seed-server(-[0-4])?|443\|\|kube-apiserver)\..*\.svc\.cluster\.local|(shoot-[a-z0-9]+(-[a-z0-9]+)*|shoot--[a-z0-9]+(-[a-z0-9]+)*--[a-z0-9]+(-[a-z0-9]+)*)--kube-apiserver-socket)$`,
} as const;

export interface ConnectPortShape {
  logicalPort: number;
  /** The header the CONNECT route checks and takes `cluster_header` from. */
  header: string;
  virtualHostName: string;
}

export interface GardenerEraShape {
  /** PROXY-protocol port 8443 with per-shoot filter chains (removed in v1.123). */
  legacyApiserverProxyPort: boolean;
  connectPorts: readonly ConnectPortShape[];
  destinationRegex: string;
}

const TLS_TUNNEL_V1_113: ConnectPortShape = { logicalPort: 8132, header: HEADER_REVERSED_VPN, virtualHostName: 'reversed-vpn' };
const TLS_TUNNEL_V1_130: ConnectPortShape = { ...TLS_TUNNEL_V1_113, virtualHostName: 'reversed-vpn-tls-tunnel' };
const HTTP_PROXY: ConnectPortShape = { logicalPort: 8443, header: HEADER_GARDENER_DESTINATION, virtualHostName: 'http-proxy' };

/**
 * Seed-side gateway shapes per Gardener release range (sections 1, 5, 6). Before v1.113 port 8132
 * was authorised by an ext_authz server that the harness does not emulate. v1.130-v1.137 assume
 * the `UseUnifiedHTTPProxyPort` gate on (8443 serves HTTP CONNECT, always so from v1.138). The
 * 8132 listener stays until `RemoveHTTPProxyLegacyPort` (alpha, off, v1.148+) even though shoots
 * stop using it in v1.144.
 */
export const GARDENER_ERAS = {
  'v1.113': { legacyApiserverProxyPort: true, connectPorts: [TLS_TUNNEL_V1_113], destinationRegex: DESTINATION_HEADER_REGEX.v1_113 },
  'v1.114-v1.122': { legacyApiserverProxyPort: true, connectPorts: [TLS_TUNNEL_V1_113], destinationRegex: DESTINATION_HEADER_REGEX.v1_114 },
  'v1.123-v1.129': { legacyApiserverProxyPort: false, connectPorts: [TLS_TUNNEL_V1_113], destinationRegex: DESTINATION_HEADER_REGEX.v1_114 },
  'v1.130-v1.138': { legacyApiserverProxyPort: false, connectPorts: [TLS_TUNNEL_V1_130, HTTP_PROXY], destinationRegex: DESTINATION_HEADER_REGEX.v1_114 },
  'v1.139-v1.149': { legacyApiserverProxyPort: false, connectPorts: [TLS_TUNNEL_V1_130, HTTP_PROXY], destinationRegex: DESTINATION_HEADER_REGEX.v1_139 },
  'v1.148-v1.149-no-legacy-port': { legacyApiserverProxyPort: false, connectPorts: [HTTP_PROXY], destinationRegex: DESTINATION_HEADER_REGEX.v1_139 },
} as const satisfies Record<string, GardenerEraShape>;

export type GardenerEra = keyof typeof GARDENER_ERAS;

/** The era's CONNECT port that Gardener's logical port (e.g. GARDENER_PORT.httpProxy) maps to; throws when the era has none. */
export function connectPortOf(era: GardenerEraShape, logicalPort: number): ConnectPortShape {
  const port = era.connectPorts.find((candidate) => candidate.logicalPort === logicalPort);
  if (port === undefined) throw new Error(`the era has no CONNECT port for logical port ${logicalPort}`);
  return port;
}

export const TYPE_URL = {
  tcpProxy: 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
  httpConnectionManager: 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  router: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  proxyProtocol: 'type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol',
  tlsInspector: 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector',
  networkRbac: 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC',
  httpRbac: 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC',
} as const;

export const FILTER_NAME = {
  tcpProxy: 'envoy.filters.network.tcp_proxy',
  httpConnectionManager: 'envoy.filters.network.http_connection_manager',
  router: 'envoy.filters.http.router',
  networkRbac: 'envoy.filters.network.rbac',
  httpRbac: 'envoy.filters.http.rbac',
} as const;

/** A tcp_proxy network filter the way Istio renders one (stat prefix = cluster name). */
export function tcpProxyFilter(cluster: string): JsonObject {
  return { name: FILTER_NAME.tcpProxy, typed_config: { '@type': TYPE_URL.tcpProxy, stat_prefix: cluster, cluster } };
}

/** The FILTER_CHAIN that Gardener's per-shoot EnvoyFilter ADDs to the legacy port 8443 (section 4.2). */
export function gardenerLegacyProxyChain(technicalID: string, apiserverIP: string): JsonObject {
  return {
    filter_chain_match: {
      destination_port: 443,
      prefix_ranges: [{ address_prefix: apiserverIP, prefix_len: isIPv4(apiserverIP) ? 32 : 128 }],
    },
    filters: [tcpProxyFilter(istioClusterName.kubeApiserver(technicalID))],
  };
}

export interface GardenerLegacyProxyEnvoyFilterOptions {
  technicalID: string;
  /** What the shoot's apiserver-proxy puts as PROXY destination (ClusterIP, 240.x mapping since v1.111). */
  apiserverIP: string;
  namespace?: string;
  labels?: Readonly<Record<string, string>>;
  /** `<technicalID>` up to v1.113, `<technicalID>-apiserver-proxy` v1.114-v1.122. */
  name?: string;
}

/** Gardener's per-shoot legacy apiserver-proxy EnvoyFilter (v1.69+ shape: portNumber only). */
export function gardenerLegacyProxyEnvoyFilter(options: GardenerLegacyProxyEnvoyFilterOptions): JsonObject {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name: options.name ?? options.technicalID, namespace: options.namespace ?? DEFAULT_GATEWAY_NAMESPACE },
    spec: {
      workloadSelector: { labels: { ...(options.labels ?? DEFAULT_GATEWAY_LABELS) } },
      configPatches: [
        {
          applyTo: 'FILTER_CHAIN',
          match: { context: 'ANY', listener: { portNumber: GARDENER_PORT.legacyApiserverProxy } },
          patch: { operation: 'ADD', value: gardenerLegacyProxyChain(options.technicalID, options.apiserverIP) },
        },
      ],
    },
  };
}
