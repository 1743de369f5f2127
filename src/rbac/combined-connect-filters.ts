import type { GatewayWorkload, SeedAcl, ShootPolicy } from '../acl/model.js';
import type { Policy } from './envoy-rbac-types.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  ROLE_LABEL,
  type ConfigPatch,
  type GeneratedEnvoyFilter,
} from './envoy-filter-types.js';
import { FILTER_NAMES, httpDenyFilter, type PolicyEntry } from './filter-values.js';
import { mentionsShoot } from './permissions.js';
import { notAdmittedPrincipal } from './principals.js';
import { indexedShards, type Sized } from './sharding.js';

export const CONNECT_FILTER_PREFIX = 'acl-connect-';
const HCM = 'envoy.filters.network.http_connection_manager';
// Room for metadata, selector and patch scaffolding around the policies of one shard.
const OBJECT_OVERHEAD_BYTES = 4096;
// Room for a gateway's namespace and selector beyond the ones a form's scaffolding is measured with.
export const GATEWAY_ROOM_BYTES = 2048;

function shardSuffix(port: number, shard: number): string {
  return `${port}-${String(shard).padStart(3, '0')}`;
}

export function connectFilterName(port: number, shard: number): string {
  return `${CONNECT_FILTER_PREFIX}${shardSuffix(port, shard)}`;
}

function connectPatch(port: number, filterName: string, entries: Iterable<readonly [string, PolicyEntry]>): ConfigPatch {
  return {
    applyTo: 'HTTP_FILTER',
    match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { filter: { name: HCM } } } },
    patch: { operation: 'INSERT_FIRST', value: httpDenyFilter(filterName, entries) },
  };
}

/** The policy one shoot has in the combined filters: "mentions S and S does not admit the client". */
export function combinedConnectPolicy(shoot: ShootPolicy, operator: Pick<SeedAcl['operator'], 'protectedHeaders'>): Policy {
  return {
    permissions: mentionsShoot(shoot.technicalID, operator.protectedHeaders),
    principals: [notAdmittedPrincipal(shoot.rule, shoot.alwaysAllowed)],
  };
}

/** The shoot's policy in the combined filters with its mode: enforced, or only counted (audit). */
export function combinedConnectEntry(shoot: ShootPolicy, operator: Pick<SeedAcl['operator'], 'protectedHeaders'>): PolicyEntry {
  return { mode: shoot.rule.mode, policy: combinedConnectPolicy(shoot, operator) };
}

/** Bytes one shoot takes in a shard: its policy plus its key. */
export function combinedPolicyBytes(technicalID: string, policy: Policy): number {
  return JSON.stringify(policy).length + technicalID.length + 4;
}

/**
 * Bytes the policies of one shard may take, given the operator's `maxObjectBytes` and the bytes of
 * the form's own scaffolding around them (guards, lookups; 0 for the rules form).
 */
export function shardBudget(maxObjectBytes: number, scaffoldingBytes = 0): number {
  return maxObjectBytes - Math.max(OBJECT_OVERHEAD_BYTES, scaffoldingBytes + GATEWAY_ROOM_BYTES);
}

/** Why a shoot's policy cannot be placed in any shard; names the size, the limit and the fix. */
export function unplaceableMessage(technicalID: string, bytes: number, maxObjectBytes: number, scaffoldingBytes = 0): string {
  const budget = shardBudget(maxObjectBytes, scaffoldingBytes);
  return (
    `the combined CONNECT policy of ${technicalID} needs ${bytes} bytes, more than the ${budget} bytes one combined filter may hold ` +
    `(operator maxObjectBytes ${maxObjectBytes} minus ${maxObjectBytes - budget} for the object around it); list fewer or wider CIDRs, or raise maxObjectBytes`
  );
}

/** The combined filter object of one gateway, port and shard holding exactly `entries`. */
export function combinedConnectFilter(gateway: GatewayWorkload, port: number, shard: number, entries: Iterable<readonly [string, PolicyEntry]>): GeneratedEnvoyFilter {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: {
      name: connectFilterName(port, shard),
      namespace: gateway.namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' },
    },
    spec: { workloadSelector: { labels: gateway.selector }, configPatches: [connectPatch(port, `${FILTER_NAMES.connect}-${shardSuffix(port, shard)}`, entries)] },
  };
}

/** Port and shard index of a combined filter name; undefined for any other name. */
export function parseConnectFilterName(name: string): { readonly port: number; readonly shard: number } | undefined {
  const match = /^acl-connect-(\d{1,5})-(\d{3,4})$/.exec(name);
  if (!match) return undefined;
  return { port: Number(match[1]), shard: Number(match[2]) };
}

export interface CombinedConnectPlan {
  readonly filters: GeneratedEnvoyFilter[];
  /** Shoots (technical ID) whose policy alone exceeds a shard, with the reason; they are in no filter. */
  readonly unplaced: ReadonlyMap<string, string>;
}

type SeedShoots = Pick<SeedAcl, 'operator' | 'gateways'> & { readonly shoots: readonly ShootPolicy[] };

/**
 * Every shoot sized for a shard by `measure`, or, when it alone exceeds a shard, reported with the
 * reason (the size, the limit and the fix): what every form's shard plan starts from.
 */
export function sizedForShards<S extends ShootPolicy, T>(
  shoots: readonly S[],
  maxObjectBytes: number,
  measure: (shoot: S) => { readonly bytes: number; readonly item: T },
  scaffoldingBytes = 0,
): { readonly items: Sized<T>[]; readonly unplaced: Map<string, string> } {
  const budget = shardBudget(maxObjectBytes, scaffoldingBytes);
  const items: Sized<T>[] = [];
  const unplaced = new Map<string, string>();
  for (const shoot of shoots) {
    const { bytes, item } = measure(shoot);
    if (bytes > budget) unplaced.set(shoot.technicalID, unplaceableMessage(shoot.technicalID, bytes, maxObjectBytes, scaffoldingBytes));
    else items.push({ key: shoot.technicalID, bytes, item });
  }
  return { items, unplaced };
}

/**
 * The shard plan from sizes alone, and the objects it gives, built one at a time when consumed
 * (a shard's policies only when its object is due, so a render of a large seed never holds all).
 */
function rulesShards(seed: SeedShoots): { readonly objects: () => Generator<GeneratedEnvoyFilter>; readonly unplaced: ReadonlyMap<string, string> } {
  const { operator } = seed;
  const { items, unplaced } = sizedForShards(seed.shoots, operator.maxObjectBytes, (shoot) => ({
    bytes: combinedPolicyBytes(shoot.technicalID, combinedConnectPolicy(shoot, operator)),
    item: shoot,
  }));
  const shards = indexedShards(items, shardBudget(operator.maxObjectBytes));
  const gateways = [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  const objects = function* (): Generator<GeneratedEnvoyFilter> {
    for (const gateway of gateways) {
      for (const port of operator.protectedPorts) {
        for (const { shard, index } of shards) yield combinedConnectFilter(gateway, port, index, shard.map(({ key, item }) => [key, combinedConnectEntry(item, operator)] as const));
      }
    }
  };
  return { objects, unplaced };
}

/**
 * The combined HTTP-CONNECT filters: for every ACL shoot of the seed a policy "the request
 * mentions S in a protected header and S does not admit the client", sharded by size into one
 * object per protected port and shard, first in the HTTP chain of that port, on every gateway
 * of the seed (before Gardener 1.143 every gateway could route to every shoot).
 *
 * A shoot whose policy alone exceeds a shard is left out and reported in `unplaced`, so that one
 * oversized shoot never stops the filters of every other shoot.
 */
export function planCombinedConnectFilters(seed: SeedShoots): CombinedConnectPlan {
  const plan = rulesShards(seed);
  return { filters: [...plan.objects()], unplaced: plan.unplaced };
}

/**
 * The combined filters one at a time, when every shoot fits: planned (and an oversized shoot
 * refused, an offline render fails loudly instead of leaving it out) when called; the objects
 * follow as they are consumed.
 */
export function combinedConnectFilterStream(seed: SeedShoots): Generator<GeneratedEnvoyFilter> {
  const plan = rulesShards(seed);
  const [first] = plan.unplaced.values();
  if (first !== undefined) throw new Error(`cannot shard: ${first}`);
  return plan.objects();
}

/** combinedConnectFilterStream, whole. */
export function buildCombinedConnectFilters(seed: SeedShoots): GeneratedEnvoyFilter[] {
  return [...combinedConnectFilterStream(seed)];
}
