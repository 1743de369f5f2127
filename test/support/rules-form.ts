// Tests that read the rules form's `rules` (the RBAC evaluator, shard inspection) take the
// generated objects through this, which also checks that they are rules-form objects.
import type { GeneratedEnvoyFilter } from '../../src/rbac/envoy-filter-types.js';
import type { AnyGeneratedEnvoyFilter } from '../../src/rbac/seed-envoy-filters.js';

export function rulesFormOnly(filters: readonly AnyGeneratedEnvoyFilter[]): GeneratedEnvoyFilter[] {
  return filters.map((filter) => {
    if (filter.spec.configPatches.some((p) => p.applyTo === 'CLUSTER' || p.applyTo === 'LISTENER' || !('typed_config' in p.patch.value) || (!('rules' in p.patch.value.typed_config) && !('shadow_rules' in p.patch.value.typed_config)))) {
      throw new Error(`${filter.metadata.name} is not a rules-form object`);
    }
    return filter as GeneratedEnvoyFilter;
  });
}
