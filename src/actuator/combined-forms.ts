// The forms the combined CONNECT protection can take, behind one interface so that the syncer's
// add-before-remove plan and the coverage check work the same for all:
// - rules: one RBAC filter per shard with a DENY policy per shoot (every request scans them);
// - matcher: per gateway and port an extraction object, and per shard one RBAC filter per protected
//   header whose matcher looks the routed shoot up (cost independent of the number of shoots);
// - ecds: the matcher form's leaves in a fixed number of buckets delivered through ECDS, so that an
//   ACL change changes no listener (src/rbac/connect-matcher-ecds.ts); per gateway and port a
//   listener part naming every bucket.
// The forms use different object names, so a switch writes the new form completely before the old
// objects are deleted: both are enforced meanwhile, never neither.
import type { GatewayWorkload, Labels, ShootPolicy } from '../acl/model.js';
import { MAX_OBJECT_BYTES, type CombinedFormName, type OperatorConfig } from '../config/operator-config.js';
import type { EnvoyFilterObject } from '../gardener/objects.js';
import { combinedConnectEntry, combinedConnectFilter, combinedPolicyBytes, parseConnectFilterName, shardBudget, sizedForShards } from '../rbac/combined-connect-filters.js';
import {
  ecdsBucketObject,
  ecdsBucketObjectName,
  ecdsBucketPlan,
  ecdsEntryBytes,
  ecdsListenerObject,
  ecdsListenerObjectName,
  ecdsResourceName,
  ecdsScaffoldingBytes,
  definedResourceNames,
  discoveredResourceNames,
  otherStoredResources,
  parseEcdsBucketObjectName,
  parseEcdsListenerObjectName,
  storedBucketCount,
} from '../rbac/connect-matcher-ecds.js';
import { indexedShards, type StoredPlace } from '../rbac/sharding.js';
import {
  checkedHeaders,
  extractedHeaders,
  extractionObject,
  extractionObjectName,
  parseExtractionObjectName,
  matcherConnectFilter,
  matcherEntryBytes,
  matcherScaffoldingBytes,
  parseMatcherFilterName,
  shootAclLeaf,
  storedMatcherEntries,
  targetHeader,
  type MatcherEntry,
  type OnMatch,
} from '../rbac/connect-matcher.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { combinedRbacConfig, type PolicyEntry } from '../rbac/filter-values.js';
import type { Policy } from '../rbac/envoy-rbac-types.js';
import type { GeneratedEnvoyFilter } from '../rbac/envoy-filter-types.js';
import { SHARED_HOP_ENTRY_OBJECT, isSharedHopObjectName } from '../rbac/shared-tunnel-hop.js';
import { storedPatches, storedSelector, type CombinedFormReader } from './combined-coverage.js';
import { perObject } from '../json/per-object.js';

/** A combined filter to write; policies may be copied verbatim from a stored object. */
export interface CombinedWrite {
  readonly apiVersion: GeneratedEnvoyFilter['apiVersion'];
  readonly kind: GeneratedEnvoyFilter['kind'];
  readonly metadata: { readonly name: string; readonly namespace: string; readonly labels: Labels };
  readonly spec: { readonly workloadSelector: { readonly labels: Labels }; readonly configPatches: readonly unknown[] };
}

export interface ShardName {
  readonly port: number;
  readonly shard: number;
}

/** Where the shoots go: the entries of every shard to write, and the shoots that fit none (why). */
export interface Placement {
  readonly shards: readonly { readonly index: number; readonly entries: ReadonlyMap<string, PolicyEntry<unknown>> }[];
  readonly unplaced: ReadonlyMap<string, string>;
  /** Buckets the ECDS listener parts name (may stay above the setting while a shoot would otherwise lose its bucket). */
  readonly buckets?: number;
  /** Why a setting is not applied yet (logged). */
  readonly held?: string;
}

/** The ECDS form's bucket objects serve every port: their shards are planned once, under this port. */
export const ALL_PORTS = 0;

export interface CombinedForm extends CombinedFormReader {
  readonly name: CombinedFormName;
  /** The ports shards are planned for: each protected port, or ALL_PORTS (ECDS buckets). */
  readonly shardPorts: readonly number[];
  /** Shards name nothing; the supporting objects name the shards (ECDS): written after them, deleted before them. */
  readonly supportNamesShards: boolean;
  /** Sizes and places the shoots; `stored` is what the API server holds now. */
  place(shoots: readonly ShootPolicy[], stored: readonly EnvoyFilterObject[]): Placement;
  /** What a shard holds for the shoot, with its mode (a DENY policy, or a matcher leaf). */
  entry(shoot: ShootPolicy): PolicyEntry<unknown>;
  /** Bytes the entry takes in a shard object. */
  bytes(technicalID: string, entry: PolicyEntry<unknown>): number;
  /** Bytes a shard object takes besides its entries (guards, lookups); 0 when the general reserve covers it. */
  readonly scaffoldingBytes: number;
  /** Port and shard of one of this form's shard names; undefined for any other name. */
  parseName(name: string): ShardName | undefined;
  /** The shard object holding exactly `entries`. */
  shard(gateway: GatewayWorkload, port: number, shard: number, entries: ReadonlyMap<string, PolicyEntry<unknown>>): CombinedWrite;
  /** Objects the shards of a gateway and port work with (see supportNamesShards for their order). */
  supporting(gateway: GatewayWorkload, port: number, placement: Placement): CombinedWrite[];
  /**
   * What a shard holds while stored supporting objects still expect more of it (ECDS: guards for
   * headers a stored listener part still checks, and an earlier version's resources it still
   * names); the final content follows in a later sync, once none does. Undefined when the final
   * content can be written now.
   */
  transitionalShard?(stored: readonly EnvoyFilterObject[], gateway: GatewayWorkload, shard: number, entries: ReadonlyMap<string, PolicyEntry<unknown>>): CombinedWrite | undefined;
  /**
   * What a supporting object holds while stored shards still need more of it than `wanted` gives
   * (written before the shards; `wanted` follows in a later sync, once no stored shard needs
   * more); undefined when `wanted` can be written now.
   */
  transitionalSupport(current: EnvoyFilterObject, wanted: CombinedWrite, stored: readonly EnvoyFilterObject[]): CombinedWrite | undefined;
}

/** Packs the shoots into as few shards as fit (rules and matcher forms: shards come and go with the shoots). */
function packedPlacement(form: Pick<CombinedForm, 'entry' | 'bytes' | 'scaffoldingBytes'>, operator: OperatorConfig, shoots: readonly ShootPolicy[]): Placement {
  const { items, unplaced } = sizedForShards(
    shoots,
    operator.maxObjectBytes,
    (shoot) => {
      const entry = form.entry(shoot);
      return { bytes: form.bytes(shoot.technicalID, entry), item: entry };
    },
    form.scaffoldingBytes,
  );
  const shards = indexedShards(items, shardBudget(operator.maxObjectBytes, form.scaffoldingBytes)).map(({ shard, index }) => ({ index, entries: new Map(shard.map(({ key, item }) => [key, item])) }));
  return { shards, unplaced };
}

function rulesForm(operator: OperatorConfig): CombinedForm {
  const form: CombinedForm = {
    name: 'rules',
    shardPorts: operator.protectedPorts,
    supportNamesShards: false,
    place: (shoots) => packedPlacement(form, operator, shoots),
    entry: (shoot) => combinedConnectEntry(shoot, operator),
    bytes: (id, entry) => combinedPolicyBytes(id, entry.policy as Policy),
    scaffoldingBytes: 0,
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
  return form;
}

function matcherForm(operator: OperatorConfig): CombinedForm {
  const headers = operator.protectedHeaders;
  const form: CombinedForm = {
    name: 'matcher',
    shardPorts: operator.protectedPorts,
    supportNamesShards: false,
    place: (shoots) => packedPlacement(form, operator, shoots),
    entry: (shoot) => ({ mode: shoot.rule.mode, policy: shootAclLeaf(shoot) }),
    bytes: (id, entry) => matcherEntryBytes(id, entry.policy as OnMatch, headers.length),
    scaffoldingBytes: matcherScaffoldingBytes(headers),
    parseName: parseMatcherFilterName,
    shard: (gateway, port, shard, entries) => matcherConnectFilter(gateway, port, shard, headers, entries as ReadonlyMap<string, MatcherEntry>),
    supporting: (gateway, port) => [extractionObject(gateway, port, headers)],
    // A stored shard that checks a header the extraction no longer reads would refuse every request
    // carrying it: extract the union while any stored shard of the port still checks a removed header.
    transitionalSupport: (current, wanted, stored) => {
      const port = parseExtractionObjectName(current.metadata.name);
      if (port === undefined || !storedSelector(current)) return undefined;
      const removed = extractedHeaders(current.spec).filter((h) => !headers.includes(h));
      const stillChecked = removed.filter((h) =>
        stored.some((f) => f.metadata.namespace === current.metadata.namespace && parseMatcherFilterName(f.metadata.name)?.port === port && JSON.stringify(f.spec).includes(targetHeader(h))),
      );
      if (stillChecked.length === 0) return undefined;
      return extractionObject({ namespace: current.metadata.namespace, selector: wanted.spec.workloadSelector.labels }, port, [...new Set([...headers, ...stillChecked])].sort());
    },
    storedShards: perObject((filter) => {
      const name = parseMatcherFilterName(filter.metadata.name);
      const selector = storedSelector(filter);
      if (!name || !selector) return [];
      const entries = storedMatcherEntries(filter.spec);
      // Only an object exactly as written counts: anything else another writer changed may not enforce the leaves it holds.
      const rebuilt = matcherConnectFilter({ namespace: filter.metadata.namespace, selector }, name.port, name.shard, headers, entries);
      return jsonEqual(rebuilt.spec, filter.spec) ? [{ port: name.port, entries }] : [];
    }),
    supportStored: (stored, gateway, port) => {
      const wanted = extractionObject(gateway, port, headers);
      const found = stored.find((f) => f.metadata.namespace === gateway.namespace && f.metadata.name === extractionObjectName(port));
      return found !== undefined && jsonEqual(found.spec, wanted.spec);
    },
  };
  return form;
}

const sameNamespace = (namespace: string) => (f: EnvoyFilterObject): boolean => f.metadata.namespace === namespace;

/** The bucket count stored ECDS objects stand for: the most any listener part names, or the highest stored bucket's; 0 when there are none. */
function storedBuckets(stored: readonly EnvoyFilterObject[]): number {
  return Math.max(
    0,
    ...stored.map((f) => (parseEcdsListenerObjectName(f.metadata.name) !== undefined ? (storedBucketCount(f.spec) ?? 0) : (parseEcdsBucketObjectName(f.metadata.name) ?? -1) + 1)),
  );
}

/** The headers stored ECDS listener parts check (sorted), or `fallback` when none is stored. */
function headersOfParts(parts: readonly EnvoyFilterObject[], fallback: readonly string[]): readonly string[] {
  const named = parts.flatMap((f) => extractedHeaders(f.spec));
  return named.length > 0 ? [...new Set(named)].sort() : fallback;
}

/**
 * `bucketObject` with the resources of an earlier version that `storedBucket` holds and stored
 * listener `parts` still name, verbatim (so no listener names a resource that is not stored), and
 * how many such resources there are.
 */
function withCarriedResources(bucketObject: CombinedWrite, bucket: number, storedBucket: EnvoyFilterObject | undefined, parts: readonly EnvoyFilterObject[]): { readonly object: CombinedWrite; readonly carried: number } {
  const named = new Set(parts.flatMap((f) => discoveredResourceNames(f.spec)));
  const carried = storedBucket ? otherStoredResources(storedBucket.spec, ecdsResourceName(bucket)).filter((p) => named.has(p.patch.value.name)) : [];
  return { object: { ...bucketObject, spec: { ...bucketObject.spec, configPatches: [...bucketObject.spec.configPatches, ...carried] } }, carried: carried.length };
}

function ecdsForm(operator: OperatorConfig): CombinedForm {
  const headers = operator.protectedHeaders;
  const leafForm = matcherForm(operator);
  // Asked for every bucket of the port on every reading: the listener part is compared once per stored object.
  const bucketCountOf = perObject((part: EnvoyFilterObject) => storedBucketCount(part.spec));
  const checksOf = perObject((_part: EnvoyFilterObject) => new Map<string, boolean>());
  const partAsWritten = (part: EnvoyFilterObject, gateway: GatewayWorkload, port: number, count: number): boolean => {
    const checks = checksOf(part);
    const key = JSON.stringify([gateway.namespace, gateway.selector, port, count]);
    const known = checks.get(key);
    if (known !== undefined) return known;
    const asWritten = jsonEqual(part.spec, ecdsListenerObject(gateway, port, headers, count).spec);
    checks.set(key, asWritten);
    return asWritten;
  };
  // Asked for every bucket of a reading, and the answer is the same for all of a gateway's port:
  // once per stored list (a reading's), gateway and port.
  const supportByReading = new WeakMap<readonly EnvoyFilterObject[], Map<string, number | undefined>>();
  /** The bucket count the port's stored listener part names when it is stored as written and every bucket it names exists; undefined otherwise. */
  const supportedBuckets = (stored: readonly EnvoyFilterObject[], gateway: GatewayWorkload, port: number): number | undefined => {
    const answers = supportByReading.get(stored) ?? new Map<string, number | undefined>();
    supportByReading.set(stored, answers);
    const k = `${gateway.namespace}:${port}:${JSON.stringify(gateway.selector)}`;
    if (answers.has(k)) return answers.get(k);
    const inNamespace = stored.filter(sameNamespace(gateway.namespace));
    const part = inNamespace.find((f) => f.metadata.name === ecdsListenerObjectName(port));
    const count = part === undefined ? undefined : bucketCountOf(part);
    const names = new Set(inNamespace.map((f) => f.metadata.name));
    const supported =
      part !== undefined && count !== undefined && partAsWritten(part, gateway, port, count) && Array.from({ length: count }, (_, b) => ecdsBucketObjectName(b)).every((name) => names.has(name));
    const answer = supported ? count : undefined;
    answers.set(k, answer);
    return answer;
  };
  const bytes = (id: string, entry: PolicyEntry<unknown>): number => ecdsEntryBytes(id, entry.policy as OnMatch);
  const scaffolding = ecdsScaffoldingBytes(headers);
  const bucketPlacement = (shoots: readonly ShootPolicy[], buckets: number, stored: readonly EnvoyFilterObject[]): Placement & { readonly overflowing: boolean } => {
    const { items, unplaced } = sizedForShards(
      shoots,
      operator.maxObjectBytes,
      (shoot) => {
        const entry = leafForm.entry(shoot);
        return { bytes: bytes(shoot.technicalID, entry), item: entry };
      },
      scaffolding,
    );
    // Where each shoot is stored now (the first gateway's buckets: all gateways get the same content).
    const places = new Map<string, StoredPlace>();
    for (const filter of [...stored].sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace))) {
      const bucket = parseEcdsBucketObjectName(filter.metadata.name);
      if (bucket === undefined) continue;
      for (const [id, entry] of storedMatcherEntries(filter.spec)) if (!places.has(id)) places.set(id, { bucket, bytes: bytes(id, entry) });
    }
    const plan = ecdsBucketPlan(items, buckets, operator.maxObjectBytes, headers, places);
    return {
      shards: plan.buckets.map((content, index) => ({ index, entries: new Map(content.map(({ key, item }) => [key, item])) })),
      unplaced: new Map([...unplaced, ...plan.overflow]),
      buckets,
      overflowing: plan.overflow.size > 0,
    };
  };
  return {
    name: 'ecds',
    shardPorts: [ALL_PORTS],
    supportNamesShards: true,
    entry: leafForm.entry,
    bytes,
    scaffoldingBytes: scaffolding,
    place: (shoots, stored) => {
      const wanted = bucketPlacement(shoots, operator.ecdsBuckets, stored);
      // Fewer buckets than stored would leave a full bucket's shoot out of every bucket the listeners
      // still name: keep the stored count until the shoots fit the setting.
      const kept = storedBuckets(stored);
      if (!wanted.overflowing || kept <= operator.ecdsBuckets) return wanted;
      const held = `ecdsBuckets ${operator.ecdsBuckets} is not applied: ${wanted.unplaced.size} shoots would not fit that many buckets, so the stored ${kept} stay; raise maxObjectBytes or keep ecdsBuckets at ${kept}`;
      return { ...bucketPlacement(shoots, kept, stored), held };
    },
    parseName: (name) => {
      const bucket = parseEcdsBucketObjectName(name);
      return bucket === undefined ? undefined : { port: ALL_PORTS, shard: bucket };
    },
    shard: (gateway, _port, bucket, entries) => ecdsBucketObject(gateway, bucket, headers, entries as ReadonlyMap<string, MatcherEntry>),
    supporting: (gateway, _port, placement) => operator.protectedPorts.map((port) => ecdsListenerObject(gateway, port, headers, placement.buckets ?? operator.ecdsBuckets)),
    transitionalSupport: () => undefined,
    // While stored listener parts still check a removed header, the bucket guards it too; while
    // they name resources of an earlier version (one per bucket and header), the bucket keeps
    // those verbatim, so no listener names a resource that is not stored. Both go in a later sync.
    transitionalShard: (stored, gateway, bucket, entries) => {
      const parts = stored.filter(sameNamespace(gateway.namespace)).filter((f) => parseEcdsListenerObjectName(f.metadata.name) !== undefined);
      const union = [...new Set([...headers, ...parts.flatMap((f) => extractedHeaders(f.spec))])].sort();
      const storedBucket = stored.find((f) => f.metadata.namespace === gateway.namespace && f.metadata.name === ecdsBucketObjectName(bucket));
      const widened = ecdsBucketObject(gateway, bucket, union, entries as ReadonlyMap<string, MatcherEntry>);
      const withCarried = withCarriedResources(widened, bucket, storedBucket, parts);
      if (union.length === headers.length && withCarried.carried === 0) return undefined;
      // Too large to store: the earlier resources go at once (a gateway pod starting before the listener parts are rewritten waits for them; running ones keep what they hold).
      if (JSON.stringify(withCarried.object).length <= operator.maxObjectBytes) return withCarried.object;
      return union.length === headers.length ? undefined : widened;
    },
    storedShards: perObject((filter) => {
      const bucket = parseEcdsBucketObjectName(filter.metadata.name);
      const selector = storedSelector(filter);
      if (bucket === undefined || !selector) return [];
      const entries = storedMatcherEntries(filter.spec);
      const rebuilt = ecdsBucketObject({ namespace: filter.metadata.namespace, selector }, bucket, headers, entries);
      return jsonEqual(rebuilt.spec, filter.spec) ? operator.protectedPorts.map((port) => ({ port, entries })) : [];
    }),
    // A bucket protects on a port when that port's listener part is stored as written and names it,
    // and every bucket it names exists (a listener naming a missing resource never starts serving).
    supportStored: (stored, gateway, port, shard) => {
      const bucket = parseEcdsBucketObjectName(shard);
      const count = supportedBuckets(stored, gateway, port);
      return bucket !== undefined && count !== undefined && bucket < count;
    },
  };
}

export function combinedForm(operator: OperatorConfig): CombinedForm {
  if (operator.combinedForm === 'ecds') return ecdsForm(operator);
  return operator.combinedForm === 'matcher' ? matcherForm(operator) : rulesForm(operator);
}

/** A shard name of any form: an object holding shoots' entries. */
export function isShardName(name: string): boolean {
  return parseConnectFilterName(name) !== undefined || parseMatcherFilterName(name) !== undefined || parseEcdsBucketObjectName(name) !== undefined;
}

/**
 * Whether writing or deleting a combined object changes a CONNECT listener (Envoy then drains
 * every tunnel on it): every object of ours except an ECDS bucket, whose resource Envoy swaps in
 * place, and a tunnel hop shard, whose internal listener drains only the chains that changed.
 */
export function changesListeners(name: string): boolean {
  return parseEcdsBucketObjectName(name) === undefined && !(isSharedHopObjectName(name) && name !== SHARED_HOP_ENTRY_OBJECT);
}

/**
 * Deletion order of stored combined objects: what names or relies on others first (rules and
 * matcher shards, ECDS listener parts, the tunnel hop's entry), then what they name (extractions,
 * ECDS buckets, the hop's shards).
 */
export function deletionRank(name: string): number {
  if (parseConnectFilterName(name) || parseMatcherFilterName(name) || parseEcdsListenerObjectName(name) !== undefined || name === SHARED_HOP_ENTRY_OBJECT) return 0;
  return 1;
}

/** The stored objects a kept shard of any form needs to go on protecting (matcher: its extraction; ECDS: every listener part and bucket of its gateway). */
export function keptWith(shard: EnvoyFilterObject, stored: readonly EnvoyFilterObject[]): EnvoyFilterObject[] {
  const matcher = parseMatcherFilterName(shard.metadata.name);
  const inNamespace = stored.filter(sameNamespace(shard.metadata.namespace));
  if (matcher) return inNamespace.filter((f) => f.metadata.name === extractionObjectName(matcher.port));
  if (parseEcdsBucketObjectName(shard.metadata.name) !== undefined) {
    return inNamespace.filter((f) => parseEcdsListenerObjectName(f.metadata.name) !== undefined || parseEcdsBucketObjectName(f.metadata.name) !== undefined);
  }
  return [];
}

/**
 * Every entry a stored object of either form holds, read loosely: what it may still enforce, even
 * if it is not exactly what this version writes (another version, other operator settings). What
 * the plan carries over while shoots move and keeps for shoots that fit no shard; coverage reads
 * strictly (`storedShards`) instead.
 */
export const storedEntriesAnyForm = perObject((filter: EnvoyFilterObject): ReadonlyMap<string, PolicyEntry<unknown>> => {
  if (parseMatcherFilterName(filter.metadata.name) || parseEcdsBucketObjectName(filter.metadata.name) !== undefined) return storedMatcherEntries(filter.spec);
  return new Map(storedPatches(filter).flatMap((p) => [...p.entries]));
});

/**
 * A kept object of another form rewritten to hold only the entries of `unplaced` shoots (they
 * stay protected where they are; everyone else is protected by the current form by then, and a
 * stale policy of theirs must not go on deciding), for the gateway's current selector. Undefined
 * for objects kept as stored; a string says why an object that should be rewritten stays as stored.
 */
export function keptOnly(
  filter: EnvoyFilterObject,
  gateway: GatewayWorkload,
  unplaced: ReadonlyMap<string, string>,
  operator: OperatorConfig,
  stored: readonly EnvoyFilterObject[],
): CombinedWrite | string | undefined {
  const inNamespace = stored.filter(sameNamespace(filter.metadata.namespace));
  const listenerPort = parseEcdsListenerObjectName(filter.metadata.name);
  if (listenerPort !== undefined) return keptListenerPart(filter, gateway, listenerPort, inNamespace);
  const extractionPort = parseExtractionObjectName(filter.metadata.name);
  if (extractionPort !== undefined) return extractionObject(gateway, extractionPort, keptExtractionHeaders(inNamespace, extractionPort, operator));
  const entries = new Map([...storedEntriesAnyForm(filter)].filter(([id]) => unplaced.has(id)));
  const rules = parseConnectFilterName(filter.metadata.name);
  if (rules) return rulesForm(operator).shard(gateway, rules.port, rules.shard, entries);
  const matcher = parseMatcherFilterName(filter.metadata.name);
  // Exactly the headers its extraction is kept reading: every one a shard of the port checks or the
  // extraction reads (one another writer removed from this shard comes back; one added to the
  // operator's list since is not refused here).
  if (matcher) return matcherConnectFilter(gateway, matcher.port, matcher.shard, keptExtractionHeaders(inNamespace, matcher.port, operator), entries as ReadonlyMap<string, MatcherEntry>);
  const bucket = parseEcdsBucketObjectName(filter.metadata.name);
  if (bucket === undefined) return undefined;
  const parts = inNamespace.filter((f) => parseEcdsListenerObjectName(f.metadata.name) !== undefined);
  // The headers the stored listener parts check, whatever the headers are now.
  const rewritten = ecdsBucketObject(gateway, bucket, headersOfParts(parts, operator.protectedHeaders), entries as ReadonlyMap<string, MatcherEntry>);
  // Earlier resources stay until the parts name this version's (keptListenerPart).
  const withCarried = withCarriedResources(rewritten, bucket, filter, parts);
  if (withCarried.carried === 0) return rewritten;
  const needed = JSON.stringify(withCarried.object).length;
  if (needed <= operator.maxObjectBytes) return withCarried.object;
  // The stale policies it holds go on deciding next to the current form's: nothing is admitted that either refuses.
  const fixes = [...(needed <= MAX_OBJECT_BYTES ? [`raise maxObjectBytes to at least ${needed}`] : []), 'switch back to combinedForm ecds to finish the upgrade first'];
  return (
    `${filter.metadata.namespace}/${filter.metadata.name} is kept as stored, other shoots' earlier policies included, while listener parts name an earlier version's resources: ` +
    `this version's resource next to them takes ${needed} bytes, more than maxObjectBytes ${operator.maxObjectBytes}; ${fixes.join(', or ')}`
  );
}

/**
 * What a kept extraction reads: what it reads now and every header a stored matcher shard of its
 * port checks (one it did not read would be refused), in that order; the operator's headers when
 * there is neither.
 */
function keptExtractionHeaders(inNamespace: readonly EnvoyFilterObject[], port: number, operator: OperatorConfig): readonly string[] {
  const extraction = inNamespace.find((f) => f.metadata.name === extractionObjectName(port));
  const checked = inNamespace.filter((f) => parseMatcherFilterName(f.metadata.name)?.port === port).flatMap((f) => checkedHeaders(f.spec));
  const headers = [...new Set([...(extraction ? extractedHeaders(extraction.spec) : []), ...checked])];
  return headers.length > 0 ? headers : operator.protectedHeaders;
}

/**
 * A kept ECDS listener part in this version's shape (same headers, same bucket count), once every
 * bucket it would name is stored with this version's resource; until then as stored.
 */
function keptListenerPart(part: EnvoyFilterObject, gateway: GatewayWorkload, port: number, inNamespace: readonly EnvoyFilterObject[]): CombinedWrite | undefined {
  const count = storedBucketCount(part.spec);
  if (count === undefined) return undefined;
  const defined = new Set(inNamespace.filter((f) => parseEcdsBucketObjectName(f.metadata.name) !== undefined).flatMap((f) => definedResourceNames(f.spec)));
  if (!Array.from({ length: count }, (_, b) => ecdsResourceName(b)).every((name) => defined.has(name))) return undefined;
  return ecdsListenerObject(gateway, port, extractedHeaders(part.spec), count);
}

/** A stored object of ours as it would be written for `gateway` (its content verbatim, the gateway's selector). */
export function copiedFor(source: EnvoyFilterObject, gateway: GatewayWorkload): CombinedWrite {
  const spec = source.spec as Readonly<Record<string, unknown>> & { readonly configPatches?: readonly unknown[] };
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name: source.metadata.name, namespace: gateway.namespace, labels: { ...(source.metadata.labels ?? {}) } },
    spec: { ...spec, workloadSelector: { labels: gateway.selector }, configPatches: spec.configPatches ?? [] },
  };
}

/**
 * What kept objects of another form need and another writer deleted (or a gateway added since),
 * written again: a kept matcher shard without its extraction refuses every request that carries a
 * protected header; a kept listener part naming a missing bucket keeps new gateway pods from
 * serving; kept buckets without listener parts protect nobody. While any gateway keeps a bucket,
 * every gateway keeps the whole ECDS set (`keep`: stored objects not to delete). A missing bucket
 * or listener part is copied from another gateway (every gateway gets the same content, whichever
 * version wrote it; keptOnly then narrows it to the unplaced shoots); with no copy anywhere, it is built in this version's shape (a listener part
 * only when every bucket it names holds this version's resource). `namespaces`: where something
 * is restored; kept objects there are rewritten in a later sync, once they can be read with it.
 */
export function keptSupportRestored(
  kept: readonly EnvoyFilterObject[],
  stored: readonly EnvoyFilterObject[],
  gateways: readonly GatewayWorkload[],
  operator: OperatorConfig,
): { readonly writes: CombinedWrite[]; readonly keep: EnvoyFilterObject[]; readonly namespaces: ReadonlySet<string>; readonly unrestorable: readonly string[] } {
  const writes: CombinedWrite[] = [];
  const unrestorable: string[] = [];
  const storedNames = new Set(stored.map((f) => `${f.metadata.namespace}/${f.metadata.name}`));
  const known = new Map(gateways.map((g) => [g.namespace, g]));
  for (const shard of kept) {
    const gateway = known.get(shard.metadata.namespace);
    const matcher = parseMatcherFilterName(shard.metadata.name);
    const name = matcher && `${shard.metadata.namespace}/${extractionObjectName(matcher.port)}`;
    if (!gateway || !matcher || !name || storedNames.has(name)) continue;
    storedNames.add(name);
    writes.push(extractionObject(gateway, matcher.port, keptExtractionHeaders(stored.filter(sameNamespace(shard.metadata.namespace)), matcher.port, operator)));
  }
  const isEcds = (f: EnvoyFilterObject) => parseEcdsBucketObjectName(f.metadata.name) !== undefined || parseEcdsListenerObjectName(f.metadata.name) !== undefined;
  const keep = kept.some((f) => parseEcdsBucketObjectName(f.metadata.name) !== undefined)
    ? stored.filter((f) => known.has(f.metadata.namespace) && isEcds(f)).sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace) || a.metadata.name.localeCompare(b.metadata.name))
    : [];
  const parts = keep.filter((f) => parseEcdsListenerObjectName(f.metadata.name) !== undefined);
  const buckets = keep.filter((f) => parseEcdsBucketObjectName(f.metadata.name) !== undefined);
  const partCounts = parts.flatMap((f) => storedBucketCount(f.spec) ?? []);
  const count = partCounts.length > 0 ? Math.max(...partCounts) : Math.max(0, ...buckets.map((f) => (parseEcdsBucketObjectName(f.metadata.name) ?? 0) + 1));
  const headers = headersOfParts(parts, operator.protectedHeaders);
  const inOrder = keep.length > 0 ? [...gateways].sort((a, b) => a.namespace.localeCompare(b.namespace)) : [];
  const storedHere = (gateway: GatewayWorkload, name: string) => keep.find((f) => f.metadata.namespace === gateway.namespace && f.metadata.name === name);
  const elsewhere = (gateway: GatewayWorkload, name: string) => keep.find((f) => f.metadata.namespace !== gateway.namespace && f.metadata.name === name);
  // Every gateway's buckets before any listener part: the parts name them.
  const defined = new Map<string, Set<string>>();
  for (const gateway of inOrder) {
    const resources = new Set<string>();
    for (let bucket = 0; bucket < count; bucket++) {
      const name = ecdsBucketObjectName(bucket);
      const here = storedHere(gateway, name);
      const source = elsewhere(gateway, name);
      const write = here ? undefined : source ? copiedFor(source, gateway) : ecdsBucketObject(gateway, bucket, headers, new Map());
      if (write) writes.push(write);
      for (const resource of definedResourceNames((here ?? write)?.spec)) resources.add(resource);
    }
    defined.set(gateway.namespace, resources);
  }
  for (const gateway of inOrder) {
    const thisVersion = Array.from({ length: count }, (_, b) => ecdsResourceName(b)).every((resource) => defined.get(gateway.namespace)?.has(resource));
    for (const port of operator.protectedPorts) {
      const name = ecdsListenerObjectName(port);
      if (storedHere(gateway, name)) continue;
      // A copy only where this gateway's buckets define every resource it names (gateways may be at different steps of an upgrade).
      const source = elsewhere(gateway, name);
      if (source && discoveredResourceNames(source.spec).every((resource) => defined.get(gateway.namespace)?.has(resource))) writes.push(copiedFor(source, gateway));
      else if (thisVersion && count > 0) writes.push(ecdsListenerObject(gateway, port, headers, count));
      else
        unrestorable.push(
          `${gateway.namespace}/${name} is missing and cannot be written again yet: the buckets there do not define every resource it would name (an earlier version's, or edited by another writer); ` +
            `the shoots kept in them are unprotected on port ${port} of that gateway until a later sync has rewritten the buckets, or the fix logged for a bucket kept as stored is applied`,
        );
    }
  }
  return { writes, keep, namespaces: new Set(writes.map((w) => w.metadata.namespace)), unrestorable };
}
