// Read-only queries on Envoy listener config as Istio renders it (snake_case JSON), for the
// structural tests: which chain serves which server names, which filters come first.

import { FILTER_NAME } from '../envoy/gardener-shapes.js';
import { getField, getObject, getObjectList, getString, type JsonObject } from '../envoy/json.js';

export function listenerPort(listener: JsonObject): number | undefined {
  const port = getObject(getObject(listener, 'address') ?? {}, 'socket_address')?.['port_value'];
  return typeof port === 'number' ? port : undefined;
}

export function listenerOnPort(listeners: readonly JsonObject[], port: number): JsonObject | undefined {
  const matches = listeners.filter((listener) => listenerPort(listener) === port);
  if (matches.length > 1) throw new Error(`${matches.length} listeners on port ${port}`);
  return matches[0];
}

export function filterChains(listener: JsonObject | undefined): JsonObject[] {
  return listener === undefined ? [] : getObjectList(listener, 'filter_chains');
}

export function serverNames(chain: JsonObject): string[] {
  const names = getField(getObject(chain, 'filter_chain_match') ?? {}, 'server_names');
  return Array.isArray(names) ? names.filter((n): n is string => typeof n === 'string') : [];
}

/** A chain's server names as one comparable key (order-independent). */
export function chainKey(names: readonly string[]): string {
  return [...names].sort().join(',');
}

export function networkFilters(chain: JsonObject): JsonObject[] {
  return getObjectList(chain, 'filters');
}

export function filterName(filter: JsonObject): string {
  return getString(filter, 'name') ?? '?';
}

/** The HTTP filters of every HTTP connection manager in the chain, in order. */
export function httpFilters(chain: JsonObject): JsonObject[] {
  return networkFilters(chain)
    .filter((filter) => filterName(filter) === FILTER_NAME.httpConnectionManager)
    .flatMap((hcm) => getObjectList(getObject(hcm, 'typed_config') ?? {}, 'http_filters'));
}

/** The RBAC policy names (technical IDs) of a generated filter. */
export function policyNames(filter: JsonObject): string[] {
  const policies = getObject(getObject(getObject(filter, 'typed_config') ?? {}, 'rules') ?? {}, 'policies');
  return policies === undefined ? [] : Object.keys(policies).sort();
}

/** The leading run of filters whose names start with `prefix` (our filters go first). */
export function leadingFilters(filters: readonly JsonObject[], prefix: string): JsonObject[] {
  const end = filters.findIndex((filter) => !filterName(filter).startsWith(prefix));
  return filters.slice(0, end < 0 ? filters.length : end);
}

/** JSON with object keys sorted, to compare configs whatever order the keys were written in. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}
