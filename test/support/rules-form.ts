// Tests that read the rules form's `rules` (the RBAC evaluator, shard inspection) take the
// generated objects through this, which also checks that they are rules-form objects.
import type { GeneratedEnvoyFilter } from '../../src/rbac/envoy-filter-types.js';
import type { AnyGeneratedEnvoyFilter } from '../../src/rbac/seed-envoy-filters.js';
import { isSharedHopObjectName } from '../../src/rbac/shared-tunnel-hop.js';

/** A patch inserting an RBAC filter with `rules` or `shadow_rules`. */
function insertsRules(patch: unknown): boolean {
  const value = (patch as { patch?: { value?: { typed_config?: unknown } } }).patch?.value;
  const config = value?.typed_config;
  return typeof config === 'object' && config !== null && ('rules' in config || 'shadow_rules' in config);
}

export function rulesFormOnly(filters: readonly AnyGeneratedEnvoyFilter[]): GeneratedEnvoyFilter[] {
  // The shared tunnel hop is no form of the ACL: it decides nothing.
  return filters
    .filter((filter) => !isSharedHopObjectName(filter.metadata.name))
    .map((filter) => {
      if (!(filter.spec.configPatches as readonly unknown[]).every(insertsRules)) throw new Error(`${filter.metadata.name} is not a rules-form object`);
      return filter as GeneratedEnvoyFilter;
    });
}
