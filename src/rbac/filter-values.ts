import type { RuleMode } from '../acl/acl-rule.js';
import { HTTP_RBAC_TYPE, NETWORK_RBAC_TYPE, type HttpRbacConfig, type HttpRbacFilter, type NetworkRbacFilter, type Policy } from './envoy-rbac-types.js';

export const FILTER_NAMES = {
  sni: 'gardener-acl-sni',
  observability: 'gardener-acl-observability',
  connect: 'gardener-acl-connect',
  legacyProxy: 'gardener-acl-legacy-proxy',
} as const;

/**
 * A DENY filter: each policy says "targets S and S does not admit the client". In audit mode the
 * policies are shadow rules only: Envoy admits everything and counts in `rbac.shadow_denied` what
 * enforce would refuse.
 */
export function networkDenyFilter(name: string, statPrefix: string, policies: Readonly<Record<string, Policy>>, mode: RuleMode): NetworkRbacFilter {
  const rules = { action: 'DENY', policies } as const;
  return { name, typed_config: { '@type': NETWORK_RBAC_TYPE, stat_prefix: statPrefix, ...(mode === 'audit' ? { shadow_rules: rules } : { rules }) } };
}

/** One shoot's place in a combined filter: its policy, enforced or (audit) only counted. */
export interface PolicyEntry<P = Policy> {
  readonly mode: RuleMode;
  readonly policy: P;
}

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The RBAC config of a combined filter: enforced policies in `rules` (always present, so the
 * filter's shape does not depend on its shoots' modes), audited ones in `shadow_rules` with
 * per-policy counters. Keys in code-unit order, so the same entries give the same bytes.
 */
export function combinedRbacConfig<P>(entries: Iterable<readonly [string, PolicyEntry<P>]>): HttpRbacConfig<P> {
  const enforced: Record<string, P> = {};
  const audited: Record<string, P> = {};
  for (const [id, entry] of [...entries].sort(([a], [b]) => byCodeUnit(a, b))) (entry.mode === 'audit' ? audited : enforced)[id] = entry.policy;
  return {
    '@type': HTTP_RBAC_TYPE,
    rules: { action: 'DENY', policies: enforced },
    ...(Object.keys(audited).length > 0 ? { shadow_rules: { action: 'DENY', policies: audited }, track_per_rule_stats: true } : {}),
  };
}

/** The entries a combined RBAC config holds; a shoot listed in both sections counts as enforced. */
export function combinedEntries<P>(config: {
  readonly rules?: { readonly policies?: Readonly<Record<string, P>> } | undefined;
  readonly shadow_rules?: { readonly policies?: Readonly<Record<string, P>> } | undefined;
}): Map<string, PolicyEntry<P>> {
  const entries = new Map<string, PolicyEntry<P>>();
  for (const [id, policy] of Object.entries(config.shadow_rules?.policies ?? {})) entries.set(id, { mode: 'audit', policy });
  for (const [id, policy] of Object.entries(config.rules?.policies ?? {})) entries.set(id, { mode: 'enforce', policy });
  return entries;
}

export function httpDenyFilter(name: string, entries: Iterable<readonly [string, PolicyEntry]>): HttpRbacFilter {
  return { name, typed_config: combinedRbacConfig(entries) };
}

/**
 * The stat prefix of a shoot's own network RBAC filter: its denials count in
 * `gardener_acl_<path>.<technical ID>.rbac.denied`, so refused connections are visible per shoot
 * (network filters leave no access-log line of their own when they close a connection).
 */
export function shootStatPrefix(path: 'sni' | 'observability' | 'legacy_proxy', technicalID: string): string {
  return `gardener_acl_${path}.${technicalID}.`;
}
