import type { SeedAcl } from '../acl/model.js';
import { buildCombinedConnectFilters, combinedConnectFilterStream } from './combined-connect-filters.js';
import { buildMatcherConnectFilters } from './connect-matcher.js';
import { buildEcdsConnectObjects } from './connect-matcher-ecds.js';
import type { ExtensionConfigPatch, GeneratedEnvoyFilter, MatcherFormPatch } from './envoy-filter-types.js';
import { sharedHopObjects, type SharedHopObject } from './shared-tunnel-hop.js';
import { buildShootEnvoyFilters, type ShootEnvoyFilter } from './shoot-envoy-filters.js';

/** A generated object of either combined form (or a per-shoot filter). */
export type AnyGeneratedEnvoyFilter = GeneratedEnvoyFilter | ShootEnvoyFilter | GeneratedEnvoyFilter<MatcherFormPatch> | GeneratedEnvoyFilter<ExtensionConfigPatch> | SharedHopObject;

/** The matcher forms' combined objects, built whole (a fraction of the rules form's size); undefined for the rules form. */
function matcherFormObjects(seed: SeedAcl, shoots: SeedAcl['shoots']): AnyGeneratedEnvoyFilter[] | undefined {
  if (seed.operator.combinedForm === 'matcher') return buildMatcherConnectFilters({ ...seed, shoots });
  if (seed.operator.combinedForm === 'ecds') return buildEcdsConnectObjects({ ...seed, shoots });
  return undefined;
}

/** Whether the gateways run the shared tunnel hop: tunnelRevocation hop and some ACL shoot (without one nothing of ours is there). */
export function tunnelHopServed(seed: Pick<SeedAcl, 'operator' | 'shoots'>): boolean {
  return seed.operator.tunnelRevocation === 'hop' && seed.shoots.length > 0;
}

/** With tunnelRevocation hop: the shared hop of every gateway. */
function tunnelHopObjects(seed: SeedAcl, shoots: SeedAcl['shoots']): SharedHopObject[] {
  if (!tunnelHopServed({ operator: seed.operator, shoots })) return [];
  return [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace)).flatMap((gateway) => sharedHopObjects(gateway, seed.operator, shoots));
}

export interface SeedEnvoyFilters {
  /** Per technical ID, sorted: what travels in the shoot's ManagedResource. */
  readonly perShoot: ReadonlyMap<string, readonly ShootEnvoyFilter[]>;
  /** The combined HTTP-CONNECT shards for every gateway namespace, sorted by namespace and name. */
  readonly combined: readonly AnyGeneratedEnvoyFilter[];
  /** With tunnelRevocation hop: the shared tunnel hop of every gateway (decides nothing; closes tunnels). */
  readonly tunnelHop: readonly SharedHopObject[];
}

/** The whole seed's EnvoyFilters from its ACL model; pure and deterministic. */
export function buildSeedEnvoyFilters(seed: SeedAcl): SeedEnvoyFilters {
  const shoots = [...seed.shoots].sort((a, b) => (a.technicalID < b.technicalID ? -1 : 1));
  const perShoot = new Map<string, readonly ShootEnvoyFilter[]>();
  for (const shoot of shoots) perShoot.set(shoot.technicalID, buildShootEnvoyFilters(shoot, seed));
  const combined = matcherFormObjects(seed, shoots) ?? buildCombinedConnectFilters({ ...seed, shoots });
  return { perShoot, combined, tunnelHop: tunnelHopObjects(seed, shoots) };
}

export function allEnvoyFilters(filters: SeedEnvoyFilters): AnyGeneratedEnvoyFilter[] {
  return [...[...filters.perShoot.values()].flat(), ...filters.combined, ...filters.tunnelHop];
}

/**
 * allEnvoyFilters(buildSeedEnvoyFilters(seed)), the same objects in the same order, one at a time:
 * what a render of a large seed writes out as it goes instead of holding. The combined shards are
 * planned by this call, so an oversized shoot throws here, before any object exists.
 */
export function seedEnvoyFilterStream(seed: SeedAcl): Iterable<AnyGeneratedEnvoyFilter> {
  const shoots = [...seed.shoots].sort((a, b) => (a.technicalID < b.technicalID ? -1 : 1));
  const combined: Iterable<AnyGeneratedEnvoyFilter> = matcherFormObjects(seed, shoots) ?? combinedConnectFilterStream({ ...seed, shoots });
  return (function* () {
    for (const shoot of shoots) yield* buildShootEnvoyFilters(shoot, seed);
    yield* combined;
    yield* tunnelHopObjects(seed, shoots);
  })();
}
