import type { Operation } from 'fast-json-patch';
import { formatFieldErrors } from '../acl/field-errors.js';
import { parseOperatorConfig, type OperatorConfig } from '../config/operator-config.js';
import { classifyObjects, type SourcedObject } from '../gardener/inventory.js';
import type { Problem } from '../gardener/problems.js';
import type { SeedAcl } from '../acl/model.js';
import type { EnvoyFilterObject } from '../gardener/objects.js';
import { seedAclFromInventory } from '../gardener/seed-acl.js';
import type { AnyGeneratedEnvoyFilter } from '../rbac/seed-envoy-filters.js';
import { legacyProxyPatch } from '../rbac/legacy-proxy-patch.js';
import { allEnvoyFilters, buildSeedEnvoyFilters, seedEnvoyFilterStream } from '../rbac/seed-envoy-filters.js';
import { shootFilterName } from '../rbac/shoot-envoy-filters.js';

/** RFC 6902 operations for one of Gardener's EnvoyFilters, as the mutating webhook would return them. */
export interface EnvoyFilterPatch {
  readonly apiVersion: 'acl.gardener.cloud/v1alpha1';
  readonly kind: 'EnvoyFilterPatch';
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly spec: { readonly type: 'JSONPatch'; readonly operations: readonly Operation[] };
}

export interface SeedRender {
  readonly envoyFilters: readonly AnyGeneratedEnvoyFilter[];
  readonly patches: readonly EnvoyFilterPatch[];
  readonly problems: readonly Problem[];
}

/** The seed's ACL model from its objects, with Gardener's legacy EnvoyFilters and every problem found. */
export interface SeedModel {
  readonly seed: SeedAcl | undefined;
  readonly legacyFilters: readonly EnvoyFilterObject[];
  readonly problems: readonly Problem[];
  /** Technical IDs of the shoots the objects hold a Cluster or an Extension of (with an ACL or not). */
  readonly shoots: ReadonlySet<string>;
}

/** Objects in, ACL model out: the part `render` and `explain` share. `operator` overrides an OperatorConfiguration found among the objects. */
export function seedModelFromObjects(objects: readonly SourcedObject[], operator?: OperatorConfig): SeedModel {
  const classified = classifyObjects(objects);
  const problems: Problem[] = [...classified.problems];
  const shoots = new Set([...classified.inventory.clusters.map((c) => c.metadata.name), ...classified.inventory.extensions.map((e) => e.metadata.namespace)]);
  let config = operator;
  if (!config) {
    if (classified.operatorConfigs.length > 1) {
      problems.push({ severity: 'error', object: classified.operatorConfigs.map((c) => c.source).join(', '), message: 'more than one OperatorConfiguration; give exactly one' });
    }
    const raw = classified.operatorConfigs[0];
    const parsed = parseOperatorConfig(raw?.object);
    if (!parsed.ok) {
      problems.push({ severity: 'error', object: `${raw?.source ?? 'operator configuration'}: OperatorConfiguration`, message: formatFieldErrors(parsed.errors) });
      return { seed: undefined, legacyFilters: [], problems, shoots };
    }
    config = parsed.config;
  }
  const { seed, problems: seedProblems } = seedAclFromInventory(classified.inventory, config);
  for (const p of seedProblems) {
    const source = classified.sources.get(p.object);
    problems.push(source ? { ...p, object: `${source}: ${p.object}` } : p);
  }
  const legacyFilters = [...classified.envoyFilters]
    .filter((f) => f.metadata.name.startsWith('shoot-'))
    .sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace) || a.metadata.name.localeCompare(b.metadata.name));
  return { seed, legacyFilters, problems, shoots };
}

/** A render whose objects are produced one at a time. */
export interface SeedRenderStream {
  readonly problems: readonly Problem[];
  /** ACL shoots: the per-shoot filters of each come first, shoot by shoot. */
  readonly aclShoots: number;
  /**
   * The EnvoyFilters, then the legacy patches; empty when an error was found. Each call renders
   * anew. `onObject` hears, before each object is yielded (for progress), the position of the ACL
   * shoot whose filter it is (1 to aclShoots, in order), or undefined for an object of the whole
   * seed (combined filters, tunnel hop, legacy patches), which come after every shoot's.
   */
  documents(onObject?: (shoot: number | undefined) => void): Iterable<AnyGeneratedEnvoyFilter | EnvoyFilterPatch>;
}

function legacyPatches(seed: SeedAcl, legacyFilters: readonly EnvoyFilterObject[]): EnvoyFilterPatch[] {
  const aclByID = new Map(seed.shoots.map((s) => [s.technicalID, s]));
  const patches: EnvoyFilterPatch[] = [];
  for (const filter of legacyFilters) {
    const operations = legacyProxyPatch(filter, (id) => aclByID.get(id), seed.operator.legacyProxyPort);
    if (operations.length === 0) continue;
    patches.push({
      apiVersion: 'acl.gardener.cloud/v1alpha1',
      kind: 'EnvoyFilterPatch',
      metadata: { name: filter.metadata.name, namespace: filter.metadata.namespace },
      spec: { type: 'JSONPatch', operations },
    });
  }
  return patches;
}

/**
 * The offline pipeline behind `gardener-acl render`, streaming: the same documents as renderSeed,
 * in the same order, built as they are consumed, so a render holds the seed's model and one
 * object, never the whole output.
 */
export function renderSeedStream(objects: readonly SourcedObject[], operator?: OperatorConfig): SeedRenderStream {
  const { seed, legacyFilters, problems } = seedModelFromObjects(objects, operator);
  if (!seed) return { problems, aclShoots: 0, documents: () => [] };
  // Planned now, so that a seed that cannot be sharded is an error before anything is written.
  let planned: Iterable<AnyGeneratedEnvoyFilter> | undefined;
  try {
    planned = seedEnvoyFilterStream(seed);
  } catch (error) {
    return { problems: [...problems, { severity: 'error', object: 'seed', message: error instanceof Error ? error.message : String(error) }], aclShoots: 0, documents: () => [] };
  }
  const patches = legacyPatches(seed, legacyFilters);
  return {
    problems,
    aclShoots: seed.shoots.length,
    *documents(onObject?: (shoot: number | undefined) => void) {
      const filters = planned ?? seedEnvoyFilterStream(seed);
      planned = undefined;
      if (!onObject) {
        yield* filters;
        yield* patches;
        return;
      }
      // The stream's order: shoots by technical ID, each with its filters named after it (none for a shoot without hosts).
      const ids = seed.shoots.map((s) => s.technicalID).sort((a, b) => (a < b ? -1 : 1));
      const position = new Map(ids.map((id, i) => [shootFilterName(id), i + 1]));
      for (const filter of filters) {
        onObject(position.get(filter.metadata.name));
        yield filter;
      }
      for (const patch of patches) {
        onObject(undefined);
        yield patch;
      }
    },
  };
}

/**
 * The offline pipeline behind `gardener-acl render`: seed objects in, EnvoyFilters and legacy
 * patches out. `operator` overrides an OperatorConfiguration found among the objects.
 */
export function renderSeed(objects: readonly SourcedObject[], operator?: OperatorConfig): SeedRender {
  return renderSeedModel(seedModelFromObjects(objects, operator));
}

/** renderSeed from the model: a caller that lets go of the objects first holds only the model and the output. */
export function renderSeedModel({ seed, legacyFilters, problems }: SeedModel): SeedRender {
  if (!seed) return { envoyFilters: [], patches: [], problems };
  return { envoyFilters: allEnvoyFilters(buildSeedEnvoyFilters(seed)), patches: legacyPatches(seed, legacyFilters), problems };
}
