// Which of our generated RBAC configs apply to a given chain or listener of a gateway,
// following the EnvoyFilter match fields we emit (a pure stand-in for Istio's placement).
import type { GeneratedEnvoyFilter } from '../../src/rbac/envoy-filter-types.js';
import type { RbacRules } from '../../src/rbac/envoy-rbac-types.js';

export function connectRules(filters: readonly GeneratedEnvoyFilter[], namespace: string, port: number): RbacRules[] {
  return filters
    .filter((f) => f.metadata.namespace === namespace)
    .flatMap((f) => f.spec.configPatches)
    .filter((p) => p.applyTo === 'HTTP_FILTER' && p.match.listener.portNumber === port)
    .flatMap((p) => p.patch.value.typed_config.rules ?? []); // an audit-mode filter (shadow rules only) enforces nothing
}

export function sniChainRules(filters: readonly GeneratedEnvoyFilter[], namespace: string, port: number, chainHosts: readonly string[]): RbacRules[] {
  return filters
    .filter((f) => f.metadata.namespace === namespace)
    .flatMap((f) => f.spec.configPatches)
    .filter((p) => p.applyTo === 'NETWORK_FILTER' && p.match.listener.portNumber === port)
    .filter((p) => 'sni' in p.match.listener.filterChain && chainHosts.includes(p.match.listener.filterChain.sni))
    .flatMap((p) => p.patch.value.typed_config.rules ?? []); // an audit-mode filter (shadow rules only) enforces nothing
}
