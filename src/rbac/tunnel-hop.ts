// The per-shoot "hop" that lets a tightened ACL close the shoot's established VPN tunnels
// (operator setting tunnelRevocation: hop; README "Revocation"). Envoy keeps an established
// CONNECT tunnel whatever happens to its cluster, and with ECDS the listeners never change, so
// nothing else ends one shoot's tunnels. The hop puts an internal listener of the shoot's own
// between the CONNECT route and Gardener's cluster:
//
//   CONNECT route (cluster_header) -> cluster `outbound|1194||vpn-seed-server.<id>...` (ours:
//   a door into the hop) -> internal listener `gardener-acl-hop|<that name>` (tcp_proxy) ->
//   Gardener's cluster, renamed `gardener-acl-upstream|<that name>` and otherwise untouched.
//
// The listener's filter chain carries the shoot's tunnel generation. Raising it changes only that
// chain, and Envoy drains the connections of a replaced chain: at the end of the gateway's drain
// time every tunnel of this shoot through that destination is closed, no other shoot's. The
// shoot's VPN then reconnects through the CONNECT filters, which already hold the tightened ACL.
//
// Gardener's cluster keeps its traffic policy because it is only renamed (a MERGE of `name`); its
// endpoints still come from Istio by the EDS service name, which the rename does not change.
// Only the VPN destinations get a hop: they carry nothing but tunnels. Gardener's kube-apiserver
// cluster also serves the shoot's TLS-terminated API requests on the SNI path, which a hop would
// put behind our cluster; its tunnels end on their own (README "Revocation").

/** Istio applies EnvoyFilters by ascending priority: the hops go last (see tunnelHopFilters). */
export const TUNNEL_HOP_PRIORITY = 1000;

/** The tunnel-only CONNECT destinations of a shoot: Gardener's VPN server, and the two of an HA VPN (gardener's HighAvailabilityReplicaCount). */
export const HOP_SERVICES = ['vpn-seed-server', 'vpn-seed-server-0', 'vpn-seed-server-1'] as const;
const VPN_PORT = 1194;
const METADATA_NAMESPACE = 'gardener-acl';
export const TCP_PROXY_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
/** Envoy's default of 1024 connections per cluster would cap a shoot's tunnels; Istio sets the same maximum on its own clusters. */
const UNLIMITED = 4294967295;

export interface HopClusterPatch {
  readonly applyTo: 'CLUSTER';
  readonly match: { readonly context: 'GATEWAY'; readonly cluster?: { readonly name: string } };
  readonly patch: { readonly operation: 'MERGE' | 'ADD'; readonly value: Readonly<Record<string, unknown>> };
}

export interface HopListenerPatch {
  readonly applyTo: 'LISTENER';
  readonly match: { readonly context: 'GATEWAY' };
  readonly patch: { readonly operation: 'ADD'; readonly value: Readonly<Record<string, unknown>> };
}

export type HopPatch = HopClusterPatch | HopListenerPatch;

/** Istio's name of the cluster a CONNECT to `service` of the shoot is routed to (the header value). */
export function routedClusterName(service: string, technicalID: string): string {
  return `outbound|${VPN_PORT}||${service}.${technicalID}.svc.cluster.local`;
}

export function hopListenerName(routedCluster: string): string {
  return `gardener-acl-hop|${routedCluster}`;
}

/** The name Gardener's cluster goes on under, behind the hop. */
export function upstreamClusterName(routedCluster: string): string {
  return `gardener-acl-upstream|${routedCluster}`;
}

function internalAddress(listener: string): Record<string, unknown> {
  return { envoy_internal_address: { server_listener_name: listener } };
}

/** Our cluster under Gardener's name: the route's door into the hop listener. */
function doorCluster(routed: string): Record<string, unknown> {
  return {
    name: routed,
    type: 'STATIC',
    connect_timeout: '10s',
    circuit_breakers: { thresholds: [{ max_connections: UNLIMITED, max_pending_requests: UNLIMITED, max_requests: UNLIMITED, max_retries: UNLIMITED }] },
    load_assignment: { cluster_name: routed, endpoints: [{ lb_endpoints: [{ endpoint: { address: internalAddress(hopListenerName(routed)) } }] }] },
    transport_socket: {
      name: 'envoy.transport_sockets.internal_upstream',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport',
        transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' } },
      },
    },
  };
}

/**
 * The hop listener. Its one filter chain names the generation, so a new generation replaces the
 * chain (and drains its connections); idle_timeout 0 leaves idle handling to the CONNECT
 * listener in front, as without the hop.
 */
function hopListener(routed: string, technicalID: string, generation: number): Record<string, unknown> {
  const name = hopListenerName(routed);
  return {
    name,
    // Envoy refuses an internal listener that also has an address: the name is what doors connect to.
    internal_listener: {},
    filter_chains: [
      {
        metadata: { filter_metadata: { [METADATA_NAMESPACE]: { shoot: technicalID, tunnelGeneration: generation } } },
        filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY_TYPE, stat_prefix: `gardener_acl_hop.${technicalID}`, cluster: upstreamClusterName(routed), idle_timeout: '0s' } }],
      },
    ],
  };
}

/**
 * The patches that put the shoot's VPN destinations behind hops of `generation`. A gateway that
 * has no cluster for a destination (no HA VPN, a Service not exported there) is left with an
 * unused door and listener: the rename matches nothing.
 */
export function tunnelHopPatches(technicalID: string, generation: number): HopPatch[] {
  return HOP_SERVICES.flatMap((service): HopPatch[] => {
    const routed = routedClusterName(service, technicalID);
    return [
      { applyTo: 'CLUSTER', match: { context: 'GATEWAY', cluster: { name: routed } }, patch: { operation: 'MERGE', value: { name: upstreamClusterName(routed) } } },
      { applyTo: 'CLUSTER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: doorCluster(routed) } },
      { applyTo: 'LISTENER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: hopListener(routed, technicalID, generation) } },
    ];
  });
}
