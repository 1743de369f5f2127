// The two forms the combined CONNECT protection can take, behind one interface so that the
// syncer's add-before-remove plan and the coverage check work the same for both:
// - rules: one RBAC filter per shard with a DENY policy per shoot (every request scans them);
// - matcher: per gateway and port an extraction object, and per shard one RBAC filter per protected
//   header whose matcher looks the routed shoot up (cost independent of the number of shoots).
// The two use different object names, so a switch writes the new form completely before the old
// objects are deleted: both are enforced meanwhile, never neither.
import type { GatewayWorkload, ShootPolicy } from '../acl/model.js';
import type { CombinedFormName, OperatorConfig } from '../acl/operator-config.js';
import type { EnvoyFilterObject } from '../gardener/objects.js';
import { combinedConnectEntry, combinedConnectFilter, combinedPolicyBytes, parseConnectFilterName } from '../rbac/combined-connect-filters.js';
import {
  extractedHeaders,
  extractionObject,
  extractionObjectName,
  parseExtractionObjectName,
  matcherConnectFilter,
  matcherEntryBytes,
  parseMatcherFilterName,
  shootAclLeaf,
  storedMatcherEntries,
  type MatcherEntry,
  type OnMatch,
} from '../rbac/connect-matcher.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { combinedRbacConfig, type PolicyEntry } from '../rbac/filter-values.js';
import type { Policy } from '../rbac/envoy-rbac-types.js';
import type { CombinedWrite } from './combined-syncer.js';
import { storedPatches, storedSelector, type CombinedFormReader } from './combined-coverage.js';

export interface ShardName {
  readonly port: number;
  readonly shard: number;
}

export interface CombinedForm extends CombinedFormReader {
  readonly name: CombinedFormName;
  /** What a shard holds for the shoot, with its mode (a DENY policy, or a matcher leaf). */
  entry(shoot: ShootPolicy): PolicyEntry<unknown>;
  /** Bytes the entry takes in a shard object. */
  bytes(technicalID: string, entry: PolicyEntry<unknown>): number;
  /** Port and shard of one of this form's shard names; undefined for any other name. */
  parseName(name: string): ShardName | undefined;
  /** The shard object holding exactly `entries`. */
  shard(gateway: GatewayWorkload, port: number, shard: number, entries: ReadonlyMap<string, PolicyEntry<unknown>>): CombinedWrite;
  /** Objects the shards of a gateway and port rely on: written before them, deleted after them. */
  supporting(gateway: GatewayWorkload, port: number): CombinedWrite[];
  /**
   * What a supporting object holds while shards of the stored and the wanted settings coexist
   * (both written before the shards, `wanted` after them); undefined when `wanted` can be written first.
   */
  transitionalSupport(stored: EnvoyFilterObject, wanted: CombinedWrite): CombinedWrite | undefined;
}

function rulesForm(operator: OperatorConfig): CombinedForm {
  return {
    name: 'rules',
    entry: (shoot) => combinedConnectEntry(shoot, operator),
    bytes: (id, entry) => combinedPolicyBytes(id, entry.policy as Policy),
    parseName: parseConnectFilterName,
    shard: (gateway, port, shard, entries) => {
      const filter = combinedConnectFilter(gateway, port, shard, []);
      return {
        ...filter,
        spec: {
          ...filter.spec,
          configPatches: filter.spec.configPatches.map((p) => ({ ...p, patch: { ...p.patch, value: { ...p.patch.value, typed_config: combinedRbacConfig(entries) } } })),
        },
      };
    },
    supporting: () => [],
    transitionalSupport: () => undefined,
    storedShards: (filter) => storedPatches(filter),
    supportStored: () => true,
  };
}

function matcherForm(operator: OperatorConfig): CombinedForm {
  const headers = operator.protectedHeaders;
  return {
    name: 'matcher',
    entry: (shoot) => ({ mode: shoot.rule.mode, policy: shootAclLeaf(shoot) }),
    bytes: (id, entry) => matcherEntryBytes(id, entry.policy as OnMatch, headers.length),
    parseName: parseMatcherFilterName,
    shard: (gateway, port, shard, entries) => matcherConnectFilter(gateway, port, shard, headers, entries as ReadonlyMap<string, MatcherEntry>),
    supporting: (gateway, port) => [extractionObject(gateway, port, headers)],
    // Shards written for headers the extraction no longer reads would refuse every request carrying
    // them: extract the union until the shards are rewritten.
    transitionalSupport: (stored, wanted) => {
      const port = parseExtractionObjectName(stored.metadata.name);
      if (port === undefined || !storedSelector(stored)) return undefined;
      const union = [...new Set([...headers, ...extractedHeaders(stored.spec)])];
      if (union.length === headers.length) return undefined;
      return extractionObject({ namespace: stored.metadata.namespace, selector: wanted.spec.workloadSelector.labels }, port, union);
    },
    storedShards: (filter) => {
      const name = parseMatcherFilterName(filter.metadata.name);
      const selector = storedSelector(filter);
      if (!name || !selector) return [];
      const entries = storedMatcherEntries(filter.spec);
      // Only an object exactly as written counts: anything else another writer changed may not enforce the leaves it holds.
      const rebuilt = matcherConnectFilter({ namespace: filter.metadata.namespace, selector }, name.port, name.shard, headers, entries);
      return jsonEqual(rebuilt.spec, filter.spec) ? [{ port: name.port, entries }] : [];
    },
    supportStored: (stored, gateway, port) => {
      const wanted = extractionObject(gateway, port, headers);
      const found = stored.find((f) => f.metadata.namespace === gateway.namespace && f.metadata.name === extractionObjectName(port));
      return found !== undefined && jsonEqual(found.spec, wanted.spec);
    },
  };
}

export function combinedForm(operator: OperatorConfig): CombinedForm {
  return operator.combinedForm === 'matcher' ? matcherForm(operator) : rulesForm(operator);
}

/**
 * Every entry a stored object of either form holds, read loosely: what it may still enforce, even
 * if it is not exactly what this version writes (another version, other operator settings). What
 * the plan carries over while shoots move and keeps for shoots that fit no shard; coverage reads
 * strictly (`storedShards`) instead.
 */
export function storedEntriesAnyForm(filter: EnvoyFilterObject): Map<string, PolicyEntry<unknown>> {
  if (parseMatcherFilterName(filter.metadata.name)) return storedMatcherEntries(filter.spec);
  return new Map(storedPatches(filter).flatMap((p) => [...p.entries]));
}
