// The virtual garden's EnvoyFilter: a network RBAC filter first in each TLS chain of the virtual
// garden's API server on its ingress gateway, the same DENY-the-not-admitted filter a shoot's SNI
// chain gets (docs/design.md section 3). One object per gateway namespace.
import type { GardenAcl, GatewayWorkload } from '../acl/model.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL, type ConfigPatch, type GeneratedEnvoyFilter } from './envoy-filter-types.js';
import { FILTER_NAMES } from './filter-values.js';
import { notAdmittedPrincipal } from './principals.js';
import { sniPatch } from './shoot-envoy-filters.js';

export const GARDEN_FILTER_NAME = 'acl-virtual-garden';
/** The RBAC policy's name, as a shoot's is its technical ID: Envoy names it in a denial's access-log line. */
export const GARDEN_POLICY = 'virtual-garden';
/** Denials count in gardener_acl_garden.virtual-garden.rbac.denied. */
export const GARDEN_STAT_PREFIX = `gardener_acl_garden.${GARDEN_POLICY}.`;

export function buildGardenEnvoyFilters(acl: GardenAcl, sniPort: number): GeneratedEnvoyFilter[] {
  const principal = notAdmittedPrincipal(acl.rule, acl.alwaysAllowed);
  const byNamespace = new Map<string, { gateway: GatewayWorkload; patches: ConfigPatch[]; seen: Set<string> }>();
  const chains = acl.sniChains
    .map((chain) => ({ gateway: chain.gateway, hosts: [...new Set(chain.hosts)].sort() }))
    .filter((chain) => chain.hosts.length > 0)
    .sort((a, b) => a.gateway.namespace.localeCompare(b.gateway.namespace) || a.hosts.join(',').localeCompare(b.hosts.join(',')));
  for (const chain of chains) {
    const entry = byNamespace.get(chain.gateway.namespace) ?? { gateway: chain.gateway, patches: [], seen: new Set<string>() };
    byNamespace.set(chain.gateway.namespace, entry);
    // Any one server name selects the whole chain; the smallest keeps the output stable.
    const sni = chain.hosts[0] as string;
    if (entry.seen.has(sni)) continue;
    entry.seen.add(sni);
    entry.patches.push(sniPatch(sniPort, sni, FILTER_NAMES.sni, GARDEN_STAT_PREFIX, { [GARDEN_POLICY]: { permissions: [{ any: true }], principals: [principal] } }, acl.rule.mode));
  }
  return [...byNamespace.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([namespace, { gateway, patches }]) => ({
      apiVersion: 'networking.istio.io/v1alpha3',
      kind: 'EnvoyFilter',
      metadata: { name: GARDEN_FILTER_NAME, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'garden' } },
      spec: { workloadSelector: { labels: gateway.selector }, configPatches: patches },
    }));
}
