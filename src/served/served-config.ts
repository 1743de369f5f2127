// What one gateway's Envoy serves, read from its admin /config_dump (or istioctl's dump of it):
// the filter chains of every listener with the network filters before their terminal filter, the
// HTTP filters of every connection manager up to its router, the headers its routes take the
// upstream cluster from, and the ECDS resources Envoy holds. Only what the served-protection
// check needs; everything else in the dump is ignored. The dump is foreign input: it is parsed
// loosely and anything unexpected is skipped, never trusted.
import { z } from 'zod';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import { HTTP_RBAC_TYPE, NETWORK_RBAC_TYPE } from '../rbac/envoy-rbac-types.js';
import { lookupOf } from '../rbac/connect-matcher.js';
import { TCP_PROXY_TYPE } from '../rbac/shared-tunnel-hop.js';

export const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
export const ROUTER_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

/** A network filter of a served chain: its name and, for an RBAC filter, its stat prefix. */
export interface ServedNetworkFilter {
  readonly name: string;
  readonly statPrefix: string | undefined;
}

/** An HTTP filter before the router: the shoots it holds a policy for, or the ECDS resource it takes its config from. */
export interface ServedHttpFilter {
  readonly name: string;
  readonly shoots: ReadonlySet<string>;
  readonly discovered: boolean;
}

export interface ServedConnectionManager {
  readonly httpFilters: readonly ServedHttpFilter[];
  /** Lower-cased headers the routes take the upstream cluster from (cluster_header). */
  readonly clusterHeaders: readonly string[];
}

export interface ServedChain {
  readonly listener: string;
  /** The listener's port; undefined for internal listeners and pipes. */
  readonly port: number | undefined;
  readonly serverNames: readonly string[];
  /** Network filters before the terminal one, in order. */
  readonly filters: readonly ServedNetworkFilter[];
  /** Upstream clusters of the chain's tcp_proxy filters. */
  readonly tcpClusters: readonly string[];
  readonly connectionManagers: readonly ServedConnectionManager[];
}

export interface ServedGateway {
  readonly listeners: readonly { readonly name: string; readonly port: number | undefined }[];
  readonly chains: readonly ServedChain[];
  /** ECDS resources Envoy holds: name → the shoots their RBAC config holds a policy for (undefined: held, config not read). */
  readonly ecds: ReadonlyMap<string, ReadonlySet<string> | undefined>;
}

const record = z.record(z.string(), z.unknown());
const typedConfig = z.looseObject({ '@type': z.string() });
const filterSchema = z.looseObject({ name: z.string().default(''), typed_config: typedConfig.optional(), config_discovery: z.unknown().optional() });
const chainSchema = z.looseObject({
  filter_chain_match: z.looseObject({ server_names: z.array(z.string()).optional() }).optional(),
  filters: z.array(z.unknown()).default([]),
});
const listenerSchema = z.looseObject({
  name: z.string().default(''),
  address: z.looseObject({ socket_address: z.looseObject({ port_value: z.number().optional() }).optional() }).optional(),
  filter_chains: z.array(z.unknown()).default([]),
  default_filter_chain: z.unknown().optional(),
  internal_listener: z.unknown().optional(),
});
const routeConfigSchema = z.looseObject({
  name: z.string().optional(),
  virtual_hosts: z.array(z.looseObject({ routes: z.array(z.looseObject({ route: z.looseObject({ cluster_header: z.string().optional() }).optional() })).default([]) })).default([]),
});
const sectionSchema = z.looseObject({ '@type': z.string().default('') });

function entries(value: unknown, key: string): unknown[] {
  const list = record.safeParse(value).data?.[key];
  return Array.isArray(list) ? list : [];
}

function nested(value: unknown, ...keys: string[]): unknown {
  let current = value;
  for (const key of keys) current = record.safeParse(current).data?.[key];
  return current;
}

function clusterHeadersOf(routeConfig: unknown): string[] {
  const parsed = routeConfigSchema.safeParse(routeConfig).data;
  if (!parsed) return [];
  return parsed.virtual_hosts.flatMap((host) => host.routes.flatMap((route) => (route.route?.cluster_header ? [route.route.cluster_header.toLowerCase()] : [])));
}

/** The technical IDs an HTTP RBAC config holds a policy for: keys of its rules (rules form) and of its matchers' lookup maps (matcher and ECDS forms). */
export function shootsOfRbacConfig(config: unknown): Set<string> {
  const shoots = new Set<string>();
  const parsed = record.safeParse(config).data;
  if (!parsed || (parsed['@type'] !== HTTP_RBAC_TYPE && parsed['@type'] !== undefined)) return shoots;
  for (const rules of ['rules', 'shadow_rules']) {
    for (const id of Object.keys(record.safeParse(nested(parsed, rules, 'policies')).data ?? {})) if (parseTechnicalID(id)) shoots.add(id);
  }
  for (const matcher of ['matcher', 'shadow_matcher']) {
    for (const key of Object.keys(lookupOf(parsed[matcher])?.map ?? {})) if (key.startsWith('=') && parseTechnicalID(key.slice(1))) shoots.add(key.slice(1));
  }
  return shoots;
}

function connectionManager(config: Record<string, unknown>, routes: ReadonlyMap<string, string[]>): ServedConnectionManager {
  const httpFilters: ServedHttpFilter[] = [];
  for (const raw of entries(config, 'http_filters')) {
    const filter = filterSchema.safeParse(raw).data;
    if (!filter) continue;
    // Nothing after the router runs.
    if (filter.typed_config?.['@type'] === ROUTER_TYPE) break;
    const discovered = filter.config_discovery !== undefined;
    httpFilters.push({ name: filter.name, discovered, shoots: discovered ? new Set() : shootsOfRbacConfig(filter.typed_config) });
  }
  const rdsName = nested(config, 'rds', 'route_config_name');
  const clusterHeaders = typeof rdsName === 'string' ? (routes.get(rdsName) ?? []) : clusterHeadersOf(config['route_config']);
  return { httpFilters, clusterHeaders };
}

function servedChain(listener: string, port: number | undefined, raw: unknown, routes: ReadonlyMap<string, string[]>): ServedChain | undefined {
  const chain = chainSchema.safeParse(raw).data;
  if (!chain) return undefined;
  const filters: ServedNetworkFilter[] = [];
  const tcpClusters: string[] = [];
  const connectionManagers: ServedConnectionManager[] = [];
  for (const raw of chain.filters) {
    const filter = filterSchema.safeParse(raw).data;
    if (!filter) continue;
    const type = filter.typed_config?.['@type'];
    if (type === HCM_TYPE && filter.typed_config) connectionManagers.push(connectionManager(filter.typed_config, routes));
    else if (type === TCP_PROXY_TYPE) {
      const cluster = filter.typed_config?.['cluster'];
      if (typeof cluster === 'string') tcpClusters.push(cluster);
    } else if (connectionManagers.length === 0 && tcpClusters.length === 0) {
      const statPrefix = type === NETWORK_RBAC_TYPE ? filter.typed_config?.['stat_prefix'] : undefined;
      filters.push({ name: filter.name, statPrefix: typeof statPrefix === 'string' ? statPrefix : undefined });
    }
  }
  return { listener, port, serverNames: chain.filter_chain_match?.server_names ?? [], filters, tcpClusters, connectionManagers };
}

/**
 * A listener's port: its socket address's, or, where that is 0 (a proxy that binds ports the
 * kernel chooses, as a loopback test gateway does), the one Istio names gateway listeners by
 * (`<address>_<port>`).
 */
function listenerPort(name: string, portValue: number | undefined): number | undefined {
  if (portValue !== undefined && portValue > 0) return portValue;
  const named = /_(\d{1,5})$/.exec(name)?.[1];
  return named === undefined ? undefined : Number(named);
}

/**
 * Reads a config dump: Envoy admin /config_dump whole, or the concatenated `configs` of its
 * per-resource forms (?resource=dynamic_listeners, dynamic_route_configs, ecds_filters, whose
 * items are the resources themselves). ECDS resources dumped without their config (a
 * `mask=ecds_filter.name` read) count as held, with their shoots unknown.
 */
export function servedGateway(dump: unknown): ServedGateway {
  const configs = z.looseObject({ configs: z.array(z.unknown()).default([]) }).safeParse(dump).data?.configs ?? [];
  const rawListeners: unknown[] = [];
  const rawRoutes: unknown[] = [];
  const rawEcds: unknown[] = [];
  for (const config of configs) {
    const type = sectionSchema.safeParse(config).data?.['@type'] ?? '';
    if (type.endsWith('.ListenersConfigDump')) {
      rawListeners.push(...entries(config, 'static_listeners').map((l) => nested(l, 'listener')), ...entries(config, 'dynamic_listeners').map((l) => nested(l, 'active_state', 'listener')));
    } else if (type.endsWith('.ListenersConfigDump.DynamicListener')) rawListeners.push(nested(config, 'active_state', 'listener'));
    else if (type.endsWith('.ListenersConfigDump.StaticListener')) rawListeners.push(nested(config, 'listener'));
    else if (type.endsWith('.RoutesConfigDump')) rawRoutes.push(...[...entries(config, 'static_route_configs'), ...entries(config, 'dynamic_route_configs')].map((r) => nested(r, 'route_config')));
    else if (type.endsWith('.RoutesConfigDump.DynamicRouteConfig') || type.endsWith('.RoutesConfigDump.StaticRouteConfig')) rawRoutes.push(nested(config, 'route_config'));
    else if (type.endsWith('.EcdsConfigDump')) rawEcds.push(...entries(config, 'ecds_filters').map((e) => nested(e, 'ecds_filter')));
    else if (type.endsWith('.EcdsConfigDump.EcdsFilterConfig')) rawEcds.push(nested(config, 'ecds_filter'));
  }
  const routes = new Map<string, string[]>();
  for (const config of rawRoutes) {
    const name = routeConfigSchema.safeParse(config).data?.name;
    if (name !== undefined) routes.set(name, clusterHeadersOf(config));
  }
  const listeners: { name: string; port: number | undefined }[] = [];
  const chains: ServedChain[] = [];
  for (const raw of rawListeners) {
    const listener = listenerSchema.safeParse(raw).data;
    if (!listener) continue;
    // Internal listeners take connections from Envoy itself, never from a client.
    const port = listener.internal_listener === undefined ? listenerPort(listener.name, listener.address?.socket_address?.port_value) : undefined;
    listeners.push({ name: listener.name, port });
    for (const c of [...listener.filter_chains, ...(listener.default_filter_chain === undefined ? [] : [listener.default_filter_chain])]) {
      const chain = servedChain(listener.name, port, c, routes);
      if (chain) chains.push(chain);
    }
  }
  const ecds = new Map<string, ReadonlySet<string> | undefined>();
  for (const filter of rawEcds) {
    const name = nested(filter, 'name');
    const typed = nested(filter, 'typed_config');
    if (typeof name === 'string') ecds.set(name, typed === undefined ? undefined : shootsOfRbacConfig(typed));
  }
  return { listeners, chains, ecds };
}
