// The Gardener releases the Istio suites render, each as the set of seed-side differences that
// matter for the ACL paths (gardener-seed-networking.md sections 1-8). seed-fixture.ts turns an
// era into objects; nothing else is era-specific.

import { DESTINATION_HEADER_REGEX } from '../envoy/gardener-shapes.js';
import type { JsonObject } from '../envoy/json.js';

export type EraName = 'v1.113' | 'v1.118' | 'v1.142' | 'v1.145' | 'v1.149-no-legacy-port' | 'v1.149';

export interface ConnectPort {
  readonly port: number;
  /** The header Gardener's CONNECT route on this port checks and takes the cluster from. */
  readonly header: string;
}

export interface GardenerEraFixture {
  readonly name: EraName;
  readonly summary: string;
  readonly servicePorts: readonly JsonObject[];
  /** The legacy PROXY-protocol apiserver-proxy port 8443 and Gardener's per-shoot chains on it (<= 1.122). */
  readonly legacyApiserverProxy: boolean;
  /** Name of Gardener's per-shoot apiserver-proxy EnvoyFilter. */
  readonly apiserverProxyFilterName: (id: string) => string;
  /** `IstioTLSTermination` on in gardenlet (shoots without it carry the opt-out annotation). */
  readonly istioTLSTermination: boolean;
  /** Port 8132: the Gateway that opens it and the virtual host of Gardener's route table; absent with RemoveHTTPProxyLegacyPort (1.148+). */
  readonly tlsTunnel?: { readonly gateway: string; readonly gatewayHost: string; readonly virtualHost: string };
  readonly httpProxy: boolean;
  readonly destinationRegex: string;
  /** Wildcard host: own `kube-apiserver-ingress` Gateway (<= 1.113) or folded into `kube-apiserver` (1.114+). */
  readonly wildcardGateway: 'kube-apiserver-ingress' | 'kube-apiserver-wildcard';
  /** `istio-role: seed` in every gateway selector (1.144+). */
  readonly istioRoleLabel: boolean;
  /** Services, VirtualServices, DestinationRules exported to every namespace (<= 1.142). */
  readonly exportToAll: boolean;
  readonly nginxWildcard: boolean;
  /** Observability components with their own HTTPS Gateways (1.141+), and the 421 filter on 9443. */
  readonly observabilityGateways: boolean;
  /** The `hsts` EnvoyFilter on 9443 (1.149+): one more Lua HTTP filter before the router in every terminating connection manager. */
  readonly hstsFilter: boolean;
  readonly connectPorts: readonly ConnectPort[];
}

const PORT_TCP = { name: 'tcp', port: 443, targetPort: 9443, protocol: 'TCP' };
const PORT_PROXY = { name: 'proxy', port: 8443, targetPort: 8443, protocol: 'TCP' };
const PORT_TLS_TUNNEL = { name: 'tls-tunnel', port: 8132, targetPort: 8132, protocol: 'TCP' };
const PORT_HTTP_PROXY = { name: 'http-proxy', port: 8443, targetPort: 8443, protocol: 'TCP' };
const TUNNEL_V1_113 = { gateway: 'reversed-vpn-auth-server', gatewayHost: 'reversed-vpn-auth-server.garden.svc.cluster.local', virtualHost: 'reversed-vpn' };
const TUNNEL_V1_136 = { gateway: 'http-connect', gatewayHost: 'non-existing-blackhole.garden.svc.cluster.local', virtualHost: 'reversed-vpn-tls-tunnel' };
const REVERSED_VPN: ConnectPort = { port: 8132, header: 'Reversed-VPN' };
const X_GARDENER_DESTINATION: ConnectPort = { port: 8443, header: 'X-Gardener-Destination' };

const LEGACY_ERA = {
  servicePorts: [PORT_TCP, PORT_PROXY, PORT_TLS_TUNNEL],
  legacyApiserverProxy: true,
  tlsTunnel: TUNNEL_V1_113,
  httpProxy: false,
  istioRoleLabel: false,
  exportToAll: true,
  nginxWildcard: true,
  observabilityGateways: false,
  hstsFilter: false,
  connectPorts: [REVERSED_VPN],
} as const;

const UNIFIED_ERA = {
  servicePorts: [PORT_TCP, PORT_TLS_TUNNEL, PORT_HTTP_PROXY],
  legacyApiserverProxy: false,
  apiserverProxyFilterName: (id: string) => `${id}-apiserver-proxy`,
  istioTLSTermination: true,
  tlsTunnel: TUNNEL_V1_136,
  httpProxy: true,
  destinationRegex: DESTINATION_HEADER_REGEX.v1_139,
  wildcardGateway: 'kube-apiserver-wildcard',
  nginxWildcard: true,
  observabilityGateways: true,
  hstsFilter: false,
  connectPorts: [REVERSED_VPN, X_GARDENER_DESTINATION],
} as const;

/**
 * Gardener 1.149 with its default gates: nginx gone from the seed (DisableNginxIngressInSeed, Beta
 * and on), so no `*.<ingress domain>` passthrough chain; the Service lists 8443 before 8132
 * (1.148+); the `hsts` filter on 9443. Clients use 8443 only since 1.144, 8132 still routes.
 */
const V1_149 = {
  ...UNIFIED_ERA,
  servicePorts: [PORT_TCP, PORT_HTTP_PROXY, PORT_TLS_TUNNEL],
  istioRoleLabel: true,
  exportToAll: false,
  nginxWildcard: false,
  hstsFilter: true,
} as const;

export const ERAS: Readonly<Record<EraName, GardenerEraFixture>> = {
  'v1.113': {
    ...LEGACY_ERA,
    name: 'v1.113',
    summary: 'GEP-30 step 1: 8132 by regex, legacy PROXY port with per-shoot filters named <id>, wildcard host via kube-apiserver-ingress',
    apiserverProxyFilterName: (id) => id,
    istioTLSTermination: false,
    destinationRegex: DESTINATION_HEADER_REGEX.v1_113,
    wildcardGateway: 'kube-apiserver-ingress',
  },
  'v1.118': {
    ...LEGACY_ERA,
    name: 'v1.118',
    summary: 'legacy PROXY port with <id>-apiserver-proxy filters, 8132 with the socket form, Istio TLS termination for one shoot',
    apiserverProxyFilterName: (id) => `${id}-apiserver-proxy`,
    istioTLSTermination: true,
    destinationRegex: DESTINATION_HEADER_REGEX.v1_114,
    wildcardGateway: 'kube-apiserver-wildcard',
  },
  'v1.142': {
    ...UNIFIED_ERA,
    name: 'v1.142',
    summary: 'both CONNECT ports (8132 Reversed-VPN, 8443 X-Gardener-Destination), Services exported everywhere, nginx and per-host observability',
    istioRoleLabel: false,
    exportToAll: true,
  },
  'v1.145': {
    ...UNIFIED_ERA,
    name: 'v1.145',
    summary: 'unified port 8443 (8132 kept until RemoveHTTPProxyLegacyPort), istio-role: seed selectors, Services exported only where used',
    istioRoleLabel: true,
    exportToAll: false,
  },
  // Before v1.149 so that the suites that render "the newest era" (the last) keep both CONNECT ports.
  'v1.149-no-legacy-port': {
    ...V1_149,
    name: 'v1.149-no-legacy-port',
    summary: 'RemoveHTTPProxyLegacyPort on: no port 8132 (no tls-tunnel Service port, http-connect Gateway or reversed-vpn filters), 8443 only; nginx gone',
    servicePorts: [PORT_TCP, PORT_HTTP_PROXY],
    tlsTunnel: undefined,
    connectPorts: [X_GARDENER_DESTINATION],
  },
  'v1.149': {
    ...V1_149,
    name: 'v1.149',
    summary: 'default gates: nginx gone (observability only through per-host Gateways), 8132 kept but unused by clients, the hsts filter on 9443',
  },
};

export const ERA_NAMES = Object.keys(ERAS) as EraName[];
