import type { GatewayWorkload, SeedAcl, ShootAcl } from '../acl/model.js';
import type { RuleMode } from '../acl/acl-rule.js';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import type { Policy } from './envoy-rbac-types.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  ROLE_LABEL,
  SHOOT_LABEL,
  type ConfigPatch,
  type GeneratedEnvoyFilter,
} from './envoy-filter-types.js';
import { FILTER_NAMES, networkDenyFilter, shootStatPrefix } from './filter-values.js';
import { observabilityHostsOf } from './permissions.js';
import { notAdmittedPrincipal } from './principals.js';

export function shootFilterName(technicalID: string): string {
  return `acl-${technicalID}`;
}

export function sniPatch(port: number, sni: string, filterName: string, statPrefix: string, policies: Record<string, Policy>, mode: RuleMode): ConfigPatch {
  return {
    applyTo: 'NETWORK_FILTER',
    match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { sni } } },
    patch: { operation: 'INSERT_FIRST', value: networkDenyFilter(filterName, statPrefix, policies, mode) },
  };
}

export type ShootEnvoyFilter = GeneratedEnvoyFilter;

interface NamespacePatches {
  readonly gateway: GatewayWorkload;
  readonly patches: ConfigPatch[];
}

/**
 * The per-shoot EnvoyFilters (one per gateway namespace the shoot has chains on): a network
 * RBAC filter first in every SNI chain of the shoot, and in the seed's shared observability
 * chain a filter that only looks at the shoot's own host names. (Its tunnel hop chains are
 * seed-wide objects: shared-tunnel-hop.ts.)
 */
export function buildShootEnvoyFilters(shoot: ShootAcl, seed: SeedAcl): ShootEnvoyFilter[] {
  const identity = parseTechnicalID(shoot.technicalID);
  if (!identity) throw new Error(`internal: invalid technical ID "${shoot.technicalID}" reached the generator`);
  const principal = notAdmittedPrincipal(shoot.rule, shoot.alwaysAllowed);
  const byNamespace = new Map<string, NamespacePatches>();
  const add = (gateway: GatewayWorkload, patch: ConfigPatch): void => {
    const entry = byNamespace.get(gateway.namespace) ?? { gateway, patches: [] };
    entry.patches.push(patch);
    byNamespace.set(gateway.namespace, entry);
  };

  const seen = new Set<string>();
  const chains = shoot.sniChains
    .map((chain) => ({ gateway: chain.gateway, hosts: [...new Set(chain.hosts)].sort() }))
    .filter((chain) => chain.hosts.length > 0)
    .sort((a, b) => a.gateway.namespace.localeCompare(b.gateway.namespace) || a.hosts.join(',').localeCompare(b.hosts.join(',')));
  for (const chain of chains) {
    const key = `${chain.gateway.namespace}|${chain.hosts.join(',')}`;
    if (seen.has(key)) continue;
    seen.add(key);
    // Any one server name selects the whole chain; the smallest keeps the output stable.
    const sni = chain.hosts[0] as string;
    add(chain.gateway, sniPatch(seed.operator.sniPort, sni, FILTER_NAMES.sni, shootStatPrefix('sni', shoot.technicalID), {
      [shoot.technicalID]: { permissions: [{ any: true }], principals: [principal] },
    }, shoot.rule.mode));
  }

  for (const wildcard of seed.observabilityWildcards) {
    add(wildcard.gateway, sniPatch(seed.operator.sniPort, `*.${wildcard.domain}`, FILTER_NAMES.observability, shootStatPrefix('observability', shoot.technicalID), {
      [shoot.technicalID]: { permissions: [observabilityHostsOf(identity.shortID, wildcard.domain)], principals: [principal] },
    }, shoot.rule.mode));
  }

  return [...byNamespace.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([namespace, { gateway, patches }]) => ({
      apiVersion: 'networking.istio.io/v1alpha3',
      kind: 'EnvoyFilter',
      metadata: {
        name: shootFilterName(shoot.technicalID),
        namespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'shoot', [SHOOT_LABEL]: shoot.technicalID },
      },
      spec: { workloadSelector: { labels: gateway.selector }, configPatches: patches },
    }));
}

/**
 * The per-shoot tunnel hops of earlier versions (`tunnelRevocation: hop` before the shared hop):
 * a ManagedResource someone else deleted with keepObjects leaves them behind, so the shoot's
 * deletion still removes them by this name. Not `acl-<id>-hop`, the SNI filter of a shoot called `<name>-hop`.
 */
export function tunnelHopFilterName(technicalID: string): string {
  return `acl-hop-${technicalID}`;
}
