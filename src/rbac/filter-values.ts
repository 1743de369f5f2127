import { HTTP_RBAC_TYPE, NETWORK_RBAC_TYPE, type HttpRbacFilter, type NetworkRbacFilter, type Policy } from './envoy-rbac-types.js';

export const FILTER_NAMES = {
  sni: 'gardener-acl-sni',
  observability: 'gardener-acl-observability',
  connect: 'gardener-acl-connect',
  legacyProxy: 'gardener-acl-legacy-proxy',
} as const;

/** A DENY filter: each policy says "targets S and S does not admit the client". */
export function networkDenyFilter(name: string, statPrefix: string, policies: Readonly<Record<string, Policy>>): NetworkRbacFilter {
  return { name, typed_config: { '@type': NETWORK_RBAC_TYPE, stat_prefix: statPrefix, rules: { action: 'DENY', policies } } };
}

export function httpDenyFilter(name: string, policies: Readonly<Record<string, Policy>>): HttpRbacFilter {
  return { name, typed_config: { '@type': HTTP_RBAC_TYPE, rules: { action: 'DENY', policies } } };
}

/**
 * The stat prefix of a shoot's own network RBAC filter: its denials count in
 * `gardener_acl_<path>.<technical ID>.rbac.denied`, so refused connections are visible per shoot
 * (network filters leave no access-log line of their own when they close a connection).
 */
export function shootStatPrefix(path: 'sni' | 'observability' | 'legacy_proxy', technicalID: string): string {
  return `gardener_acl_${path}.${technicalID}.`;
}
