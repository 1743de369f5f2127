// The shared tunnel hop: what lets a tightened ACL close the shoot's established VPN tunnels at a
// cost that fits thousands of ACL shoots (docs/operators/revocation.md). Envoy closes an established tunnel
// only when it drains the filter chain the tunnel runs through; the per-shoot hop (tunnel-hop.ts)
// gives every shoot a listener of its own (~134 KiB per shoot and gateway). Here every VPN tunnel
// runs through one of a fixed number of shared internal listeners, where each ACL shoot has a
// filter chain of its own (a few KiB), named by its tunnel generation:
//
//   CONNECT listener: RBAC filters (the ACL, on the header as sent), then the hop's entry, then the
//   router. The entry (Lua) reads the VPN destination the request names, remembers it and the shoot
//   in filter state, rewrites the header to the door of the shoot's shard and has the route looked
//   up again: Gardener's route (cluster_header) -> door cluster of shard k -> internal listener
//   `gardener-acl-hop-k`: the shoot's chain (selected by its ID in filter state; shoots without
//   ACL share a default chain) -> tcp_proxy to Gardener's cluster, by the remembered destination.
//
// Raising a shoot's generation renames only its chain, so Envoy drains that chain alone: at the end
// of the drain every tunnel of that shoot's VPN servers is closed, no other shoot's. Gardener's
// routes and clusters stay as they are. The entry is the same for every shoot and never changes
// while the shard count stays, so an ACL change never touches a CONNECT listener.
import type { GatewayWorkload, ShootPolicy } from '../acl/model.js';
import type { OperatorConfig } from '../acl/operator-settings.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL } from './envoy-filter-types.js';

/** Shared hop listeners per gateway; fixed, because the entry's Lua hashes into this many. */
export const SHARED_HOP_SHARDS = 16;

/** Istio applies EnvoyFilters by ascending priority: the entry goes in front of the router after every RBAC filter. */
export const SHARED_HOP_PRIORITY = 1000;


const VPN_PORT = 1194;
const HCM = 'envoy.filters.network.http_connection_manager';
const ROUTER = 'envoy.filters.http.router';
/** Dynamic metadata the Lua entry leaves for set_filter_state (Lua cannot write filter state). */
const METADATA_NAMESPACE = 'gardener-acl-hop';
/** Filter state the hop listener selects the shoot's chain by. */
export const HOP_SHOOT_KEY = 'gardener-acl.hop-shoot';
/** tcp_proxy's cluster when the destination is missing: no such cluster exists, so such a connection goes nowhere. */
const NO_DESTINATION = 'gardener-acl-hop-no-destination';
/** The chain of every shoot without one of its own (no ACL, or not placed): its tunnels are not revocable. */
export const DEFAULT_CHAIN = 'gardener-acl-hop-default';
const UNLIMITED = 4294967295;
export const TCP_PROXY_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
/** Bytes of a shard object besides its chains, with room to spare (measured: about 2.3 KiB). */
const SHARD_SCAFFOLDING_BYTES = 4096;

/** Gardener's VPN servers of a shoot: the plain one, and the two of an HA VPN (gardener's HighAvailabilityReplicaCount). */
export const VPN_SERVICES = ['vpn-seed-server', 'vpn-seed-server-0', 'vpn-seed-server-1'] as const;

/** Istio's cluster name for a VPN server of the shoot: what a CONNECT names in its header. */
export function vpnClusterName(service: string, technicalID: string): string {
  return `outbound|${VPN_PORT}||${service}.${technicalID}.svc.cluster.local`;
}

const VPN_DESTINATION = new RegExp(`^outbound\\|${VPN_PORT}\\|\\|vpn-seed-server(?:-[0-4])?\\.[a-z0-9-]+\\.svc\\.cluster\\.local$`);

/**
 * The distinct VPN servers a request's protected headers name as the entry's Lua reads them (the
 * first value of each header, names without case): more than one, and the entry refuses the request.
 */
export function vpnDestinationsNamed(headers: readonly (readonly [string, string])[], protectedHeaders: readonly string[]): string[] {
  const first = protectedHeaders.flatMap((name) => headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1].trim() ?? []);
  return [...new Set(first.filter((value) => VPN_DESTINATION.test(value)))];
}

/** Whether `name` is one of the shared hop's objects. */
export function isSharedHopObjectName(name: string): boolean {
  return name === SHARED_HOP_ENTRY_OBJECT || SHARD_OBJECT_NAME.test(name);
}

const SHARD_OBJECT_NAME = /^gardener-acl-hop-s\d{2}$/;

export function sharedHopListenerName(shard: number): string {
  return `gardener-acl-hop-${shard}`;
}

/**
 * The door of a shard: a cluster name Gardener's CONNECT routes accept (every era's regex takes any
 * namespace of `vpn-seed-server`), in a namespace that cannot exist (`_`), so no Service of the
 * seed ever has it.
 */
export function sharedHopDoorName(shard: number): string {
  return `outbound|${VPN_PORT}||vpn-seed-server.gardener_acl_hop_${shard}.svc.cluster.local`;
}

export function sharedHopObjectName(shard: number): string {
  return `gardener-acl-hop-s${String(shard).padStart(2, '0')}`;
}

export const SHARED_HOP_ENTRY_OBJECT = 'gardener-acl-hop-entry';

/** The chain of a shoot at a generation: a new name is a new chain, which Envoy drains the old one for. */
export function sharedHopChainName(technicalID: string, generation: number): string {
  return `${technicalID}/${generation}`;
}

/**
 * The shard of a shoot: a hash the entry's Lua computes the same way (LuaJIT numbers are doubles,
 * so it stays below 2^31 and multiplies exactly).
 */
export function sharedHopShard(technicalID: string): number {
  let hash = 0;
  for (let i = 0; i < technicalID.length; i++) hash = (hash * 31 + technicalID.charCodeAt(i)) % 2147483647;
  return hash % SHARED_HOP_SHARDS;
}

/**
 * The entry's Lua. Every protected header whose first value (the one Envoy routes by) names a VPN
 * server of a shoot is rewritten to the door; two headers naming different VPN servers are refused,
 * since the hop forwards to one destination and the route may take either header.
 */
export function sharedHopEntryLua(headers: readonly string[]): string {
  const names = headers.map((h) => JSON.stringify(h.toLowerCase())).join(', ');
  return [
    '-- gardener-acl shared tunnel hop entry (README "Revocation")',
    `local HEADERS = { ${names} }`,
    `local SHARDS = ${SHARED_HOP_SHARDS}`,
    'local function shoot_of(value)',
    `  local id = string.match(value, "^outbound|${VPN_PORT}||vpn%-seed%-server%.([a-z0-9%-]+)%.svc%.cluster%.local$")`,
    `  if id == nil then id = string.match(value, "^outbound|${VPN_PORT}||vpn%-seed%-server%-[0-4]%.([a-z0-9%-]+)%.svc%.cluster%.local$") end`,
    '  return id',
    'end',
    'local function shard_of(id)',
    '  local hash = 0',
    '  for i = 1, #id do hash = (hash * 31 + string.byte(id, i)) % 2147483647 end',
    '  return hash % SHARDS',
    'end',
    'function envoy_on_request(handle)',
    '  local headers = handle:headers()',
    '  local destination, shoot, named = nil, nil, {}',
    '  for _, name in ipairs(HEADERS) do',
    '    local value = headers:getAtIndex(name, 0)',
    '    local id = value and shoot_of(value)',
    '    if id ~= nil then',
    '      if destination ~= nil and value ~= destination then',
    '        handle:respond({ [":status"] = "403" }, "gardener-acl: the request names two VPN destinations")',
    '        return',
    '      end',
    '      destination, shoot = value, id',
    '      named[#named + 1] = name',
    '    end',
    '  end',
    '  if destination == nil then return end',
    '  local metadata = handle:streamInfo():dynamicMetadata()',
    `  metadata:set("${METADATA_NAMESPACE}", "destination", destination)`,
    `  metadata:set("${METADATA_NAMESPACE}", "shoot", shoot)`,
    `  local door = "outbound|${VPN_PORT}||vpn-seed-server.gardener_acl_hop_" .. shard_of(shoot) .. ".svc.cluster.local"`,
    '  for _, name in ipairs(named) do headers:replace(name, door) end',
    '  handle:clearRouteCache()',
    'end',
    '',
  ].join('\n');
}

const fromMetadata = (key: string): Record<string, unknown> => ({
  text_format_source: { inline_string: `%DYNAMIC_METADATA(${METADATA_NAMESPACE}:${key})%` },
  omit_empty_values: true,
});

/** The entry's HTTP filters, in order: the Lua, then the filter state the hop and the door's connection pool read. */
export function sharedHopEntryFilters(headers: readonly string[]): Record<string, unknown>[] {
  const remembered = (objectKey: string, key: string, factory?: string): Record<string, unknown> => ({
    object_key: objectKey,
    ...(factory !== undefined ? { factory_key: factory } : {}),
    format_string: fromMetadata(key),
    skip_if_empty: true,
    shared_with_upstream: 'ONCE',
  });
  return [
    {
      name: 'gardener-acl.hop-entry',
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua', default_source_code: { inline_string: sharedHopEntryLua(headers) } },
    },
    {
      name: 'gardener-acl.hop-remember',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config',
        on_request_headers: [
          // Gardener's cluster, for the hop's tcp_proxy.
          remembered('envoy.tcp_proxy.cluster', 'destination'),
          remembered(HOP_SHOOT_KEY, 'shoot', 'envoy.string'),
          // Hashed into the door's connection pool key: without it a later tunnel could reuse the
          // filter state of another destination's pool and reach that VPN server.
          remembered('envoy.network.upstream_server_name', 'destination'),
        ],
      },
    },
  ];
}

function doorCluster(shard: number): Record<string, unknown> {
  const name = sharedHopDoorName(shard);
  return {
    name,
    type: 'STATIC',
    connect_timeout: '10s',
    circuit_breakers: { thresholds: [{ max_connections: UNLIMITED, max_pending_requests: UNLIMITED, max_requests: UNLIMITED, max_retries: UNLIMITED }] },
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { envoy_internal_address: { server_listener_name: sharedHopListenerName(shard) } } } }] }] },
    transport_socket: {
      name: 'envoy.transport_sockets.internal_upstream',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport',
        transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' } },
      },
    },
  };
}

/** idle_timeout 0: idle handling stays with the CONNECT listener in front, as without the hop. */
const TCP_PROXY = { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY_TYPE, stat_prefix: 'gardener_acl_hop', cluster: NO_DESTINATION, idle_timeout: '0s' } };

/** One shard's listener: a chain per shoot of `generations` (sorted by ID), the default chain for everyone else. */
function hopListener(shard: number, generations: ReadonlyMap<string, number>): Record<string, unknown> {
  const ids = [...generations.keys()].sort();
  const action = (chain: string): Record<string, unknown> => ({ action: { name: 'chain', typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: chain } } });
  return {
    name: sharedHopListenerName(shard),
    // Envoy refuses an internal listener that also has an address: the name is what the door connects to.
    internal_listener: {},
    filter_chain_matcher: {
      matcher_tree: {
        input: { name: 'shoot', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.FilterStateInput', key: HOP_SHOOT_KEY } },
        // Envoy refuses an empty map: an empty shard maps a name no technical ID can have.
        exact_match_map: { map: Object.fromEntries(ids.length === 0 ? [['-', action(DEFAULT_CHAIN)]] : ids.map((id) => [id, action(sharedHopChainName(id, generations.get(id) ?? 1))])) },
      },
      on_no_match: action(DEFAULT_CHAIN),
    },
    filter_chains: [{ name: DEFAULT_CHAIN, filters: [TCP_PROXY] }, ...ids.map((id) => ({ name: sharedHopChainName(id, generations.get(id) ?? 1), filters: [TCP_PROXY] }))],
  };
}

/** Bytes a shoot's chain and matcher entry add to its shard object (serialized JSON). */
export function sharedHopChainBytes(technicalID: string, generation: number): number {
  const chain = sharedHopChainName(technicalID, generation);
  return JSON.stringify([technicalID, { action: { name: 'chain', typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: chain } } }]).length + JSON.stringify({ name: chain, filters: [TCP_PROXY] }).length + 2;
}

/** A patch of the shared hop: an entry filter in front of the router, a door cluster or a shard listener. */
export interface SharedHopPatch {
  readonly applyTo: 'HTTP_FILTER' | 'CLUSTER' | 'LISTENER';
  readonly match: { readonly context: 'GATEWAY'; readonly listener?: { readonly portNumber: number; readonly filterChain: { readonly filter: { readonly name: string; readonly subFilter: { readonly name: string } } } } };
  readonly patch: { readonly operation: 'INSERT_BEFORE' | 'ADD'; readonly value: Record<string, unknown> };
}

export interface SharedHopObject {
  readonly apiVersion: 'networking.istio.io/v1alpha3';
  readonly kind: 'EnvoyFilter';
  readonly metadata: { readonly name: string; readonly namespace: string; readonly labels: Readonly<Record<string, string>> };
  readonly spec: { readonly workloadSelector: { readonly labels: Readonly<Record<string, string>> }; readonly priority: number; readonly configPatches: readonly SharedHopPatch[] };
}

function hopObject(gateway: GatewayWorkload, name: string, configPatches: SharedHopPatch[]): SharedHopObject {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace: gateway.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' } },
    spec: { workloadSelector: { labels: gateway.selector }, priority: SHARED_HOP_PRIORITY, configPatches },
  };
}

/** The entry on every protected CONNECT port, right in front of the router. */
export function sharedHopEntryObject(gateway: GatewayWorkload, operator: Pick<OperatorConfig, 'protectedPorts' | 'protectedHeaders'>): SharedHopObject {
  const patches = [...operator.protectedPorts].sort((a, b) => a - b).flatMap((port) =>
    sharedHopEntryFilters(operator.protectedHeaders).map((value): SharedHopPatch => ({
      applyTo: 'HTTP_FILTER',
      match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { filter: { name: HCM, subFilter: { name: ROUTER } } } } },
      patch: { operation: 'INSERT_BEFORE', value },
    })),
  );
  return hopObject(gateway, SHARED_HOP_ENTRY_OBJECT, patches);
}

/** One shard's door and listener, with a chain for each of `generations` (technical ID -> generation). */
export function sharedHopShardObject(gateway: GatewayWorkload, shard: number, generations: ReadonlyMap<string, number>): SharedHopObject {
  return hopObject(gateway, sharedHopObjectName(shard), [
    { applyTo: 'CLUSTER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: doorCluster(shard) } },
    { applyTo: 'LISTENER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: hopListener(shard, generations) } },
  ]);
}

/** Where the ACL shoots' chains go: per shard, technical ID -> generation; shoots beyond `maxObjectBytes` stay on the default chain (`unplaced`). */
export function sharedHopPlacement(
  shoots: readonly HopShoot[],
  maxObjectBytes: number,
): { readonly shards: readonly ReadonlyMap<string, number>[]; readonly unplaced: ReadonlyMap<string, string> } {
  const shards = Array.from({ length: SHARED_HOP_SHARDS }, () => new Map<string, number>());
  const bytes = new Array<number>(SHARED_HOP_SHARDS).fill(SHARD_SCAFFOLDING_BYTES);
  const unplaced = new Map<string, string>();
  for (const shoot of [...shoots].sort((a, b) => (a.technicalID < b.technicalID ? -1 : 1))) {
    const shard = sharedHopShard(shoot.technicalID);
    const generation = shoot.tunnelGeneration ?? 1;
    const size = sharedHopChainBytes(shoot.technicalID, generation);
    if ((bytes[shard] ?? 0) + size > maxObjectBytes) {
      unplaced.set(shoot.technicalID, `tunnel hop shard ${shard} is full (maxObjectBytes ${maxObjectBytes}); its tunnels are not closed on a tightening`);
      continue;
    }
    bytes[shard] = (bytes[shard] ?? 0) + size;
    shards[shard]?.set(shoot.technicalID, generation);
  }
  return { shards, unplaced };
}

type HopShoot = Pick<ShootPolicy, 'technicalID'> & { readonly tunnelGeneration?: number };
type HopOperator = Pick<OperatorConfig, 'protectedPorts' | 'protectedHeaders' | 'maxObjectBytes'>;

/**
 * Every shared hop object of a gateway: the shards, then the entry that names their doors (each
 * shard exists, empty or not, since the entry may send any VPN tunnel to it), and the shoots that
 * fit no shard.
 */
export function sharedHopLayout(gateway: GatewayWorkload, operator: HopOperator, shoots: readonly HopShoot[]): { objects: SharedHopObject[]; unplaced: ReadonlyMap<string, string> } {
  const { shards, unplaced } = sharedHopPlacement(shoots, operator.maxObjectBytes);
  return { objects: [...shards.map((generations, shard) => sharedHopShardObject(gateway, shard, generations)), sharedHopEntryObject(gateway, operator)], unplaced };
}

export function sharedHopObjects(gateway: GatewayWorkload, operator: HopOperator, shoots: readonly HopShoot[]): SharedHopObject[] {
  return sharedHopLayout(gateway, operator, shoots).objects;
}

const CHAIN_NAME = /^(shoot-[a-z0-9-]+)\/([1-9][0-9]*)$/;

/**
 * The chains the stored shard objects among `filters` hold: technical ID -> generation. Foreign
 * input, read loosely: anything that is not a chain of ours is skipped.
 */
export function storedHopChains(filters: readonly { readonly metadata: { readonly name: string }; readonly spec?: unknown }[]): Map<string, number> {
  const chains = new Map<string, number>();
  for (const filter of filters) {
    if (!SHARD_OBJECT_NAME.test(filter.metadata.name)) continue;
    const patches = (filter.spec as { configPatches?: unknown } | undefined)?.configPatches;
    for (const patch of Array.isArray(patches) ? patches : []) {
      const listener = (patch as { applyTo?: unknown; patch?: { value?: { filter_chains?: unknown } } }).patch?.value;
      const list = listener?.filter_chains;
      if ((patch as { applyTo?: unknown }).applyTo !== 'LISTENER' || !Array.isArray(list)) continue;
      for (const chain of list) {
        const match = CHAIN_NAME.exec(String((chain as { name?: unknown } | null)?.name ?? ''));
        if (match?.[1] !== undefined && match[2] !== undefined) chains.set(match[1], Number(match[2]));
      }
    }
  }
  return chains;
}
