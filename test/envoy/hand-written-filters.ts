// Small builders for HAND-WRITTEN EnvoyFilters used by the harness's own tests. They exist so the
// harness can be proven without the generator under test; they are deliberately not shared with
// src/ (a test that used the generator's own builders to check the generator would prove nothing).

import { DEFAULT_GATEWAY_LABELS, DEFAULT_GATEWAY_NAMESPACE, FILTER_NAME, TYPE_URL } from './gardener-shapes.js';
import type { JsonObject } from './json.js';

export interface EnvoyFilterOptions {
  namespace?: string;
  priority?: number;
  creationTimestamp?: string;
  /** Workload selector labels; `null` for no selector. Default: the default gateway's labels. */
  selector?: Readonly<Record<string, string>> | null;
}

export function envoyFilterObject(name: string, configPatches: JsonObject[], options: EnvoyFilterOptions = {}): JsonObject {
  const spec: JsonObject = { configPatches };
  if (options.selector !== null) spec['workloadSelector'] = { labels: { ...(options.selector ?? DEFAULT_GATEWAY_LABELS) } };
  if (options.priority !== undefined) spec['priority'] = options.priority;
  const metadata: JsonObject = { name, namespace: options.namespace ?? DEFAULT_GATEWAY_NAMESPACE };
  if (options.creationTimestamp !== undefined) metadata['creationTimestamp'] = options.creationTimestamp;
  return { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', metadata, spec };
}

/** HTTP_FILTER INSERT_FIRST into the HCM of the listener on Gardener port `portNumber`. */
export function insertFirstHttpFilter(portNumber: number, filter: JsonObject): JsonObject {
  return {
    applyTo: 'HTTP_FILTER',
    match: { context: 'GATEWAY', listener: { portNumber, filterChain: { filter: { name: FILTER_NAME.httpConnectionManager } } } },
    patch: { operation: 'INSERT_FIRST', value: filter },
  };
}

/** NETWORK_FILTER INSERT_FIRST into the chain whose server_names contain `sni`. */
export function insertFirstNetworkFilterBySni(portNumber: number, sni: string, filter: JsonObject): JsonObject {
  return {
    applyTo: 'NETWORK_FILTER',
    match: { context: 'GATEWAY', listener: { portNumber, filterChain: { sni } } },
    patch: { operation: 'INSERT_FIRST', value: filter },
  };
}

export function httpRbacFilter(name: string, rules: JsonObject): JsonObject {
  return { name, typed_config: { '@type': TYPE_URL.httpRbac, rules } };
}

export function networkRbacFilter(name: string, statPrefix: string, rules: JsonObject): JsonObject {
  return { name, typed_config: { '@type': TYPE_URL.networkRbac, stat_prefix: statPrefix, rules } };
}

/** An EnvoyFilter putting HTTP RBAC `name` first into the HCM on Gardener port `portNumber`. */
export function httpRbacEnvoyFilter(name: string, portNumber: number, rules: JsonObject): JsonObject {
  return envoyFilterObject(name, [insertFirstHttpFilter(portNumber, httpRbacFilter(name, rules))]);
}

/** An EnvoyFilter putting network RBAC `name` first into the chain serving `sni` on Gardener port `portNumber`. */
export function sniRbacEnvoyFilter(name: string, portNumber: number, sni: string, rules: JsonObject): JsonObject {
  const statPrefix = `${name.replace(/-/g, '_')}.`;
  return envoyFilterObject(name, [insertFirstNetworkFilterBySni(portNumber, sni, networkRbacFilter(name, statPrefix, rules))]);
}

/** RBAC rules with one policy `name` of one permission and one principal. */
export function singlePolicyRules(action: 'ALLOW' | 'DENY', name: string, permission: JsonObject, principal: JsonObject): JsonObject {
  return { action, policies: { [name]: { permissions: [permission], principals: [principal] } } };
}

export function remoteIp(addressPrefix: string, prefixLen: number): JsonObject {
  return { remote_ip: { address_prefix: addressPrefix, prefix_len: prefixLen } };
}

export function headerExact(name: string, exact: string): JsonObject {
  return { header: { name, string_match: { exact } } };
}

export const ANY: JsonObject = { any: true };
