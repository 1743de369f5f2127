// Keeps the combined HTTP-CONNECT filters of every gateway in line with the recorded ACLs of all
// active `acl` Extensions of the seed. It converges on what the informer cache STORES, never on
// a memory of its own writes: a foreign delete or edit shows up in the cache and is repaired by
// the next sync. The one use of its own writes: while the cache has not yet seen an apply, that
// same content is not applied again (see lastApplied).
//
// Protection never lapses (docs/design.md section 6):
// - add before remove: phase 1 writes every changed shard as its wanted content plus the stored
//   policies of active shoots that move out of it; phase 2 writes the exact wanted content; phase 3
//   deletes shards no longer wanted. At every instant every active shoot is in some stored shard.
// - a missing input never deletes: gateways are those with a Deployment PLUS those that already
//   hold stored combined filters; nothing runs before the caches have listed.
// - a shoot too large for a shard keeps whatever policy of it is stored.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { GatewayWorkload } from '../acl/model.js';
import type { OperatorConfig } from '../config/operator-config.js';
import type { EnvoyFilterObject, Extension } from '../gardener/objects.js';
import { describeError } from '../kube/errors.js';
import { FenceRefusedError } from '../kube/lease-fence.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import type { PolicyEntry } from '../rbac/filter-values.js';
import { SHARED_HOP_ENTRY_OBJECT, sharedHopLayout, storedHopChains } from '../rbac/shared-tunnel-hop.js';
import { appliedFromState, type AppliedAcl } from '../gardener/applied-state.js';
import { refOf, type ClusterClient } from './cluster-client.js';
import { storedCoverage, storedSelector, uncoveredPaths, type StoredCoverage } from './combined-coverage.js';
import { changesListeners, combinedForm, copiedFor, deletionRank, type CombinedForm, type CombinedWrite, isShardName, keptOnly, keptSupportRestored, keptWith, storedEntriesAnyForm } from './combined-forms.js';
import { hopGeneration, recordedTunnelGeneration, type RecordedHopGeneration } from './tunnel-generation.js';
import { perObject } from '../json/per-object.js';
import { resourceVersionAtLeast, WrittenVersions } from '../kube/written-versions.js';
import { isActive } from '../gardener/extension-class.js';

export interface CombinedSyncerDeps {
  readonly client: ClusterClient;
  readonly operator: OperatorConfig;
  readonly extensions: () => readonly Extension[];
  /** Gateways that have an `istio-ingressgateway` Deployment in the cache. */
  readonly gateways: () => readonly GatewayWorkload[];
  /** Our combined EnvoyFilters as the cache has them (label acl.gardener.cloud/role=connect). */
  readonly existing: () => readonly EnvoyFilterObject[];
  /** True once the Extension, gateway Deployment and EnvoyFilter caches have listed. */
  readonly cachesSynced: () => boolean;
  /** The resourceVersion up to which the EnvoyFilter cache has seen every change (its watch position). */
  readonly cacheProgress?: () => string | undefined;
  readonly logger: Logger;
  /** Longest wait for the cache to show our own writes before deciding without it (default 10 s). */
  readonly cacheLagLimitMs?: number;
  /** Where the gauge of shoots that fit no shard or bucket is registered. */
  readonly registry?: Registry;
  readonly now?: () => number;
}

/** What one sync did. */
export interface CombinedSyncOutcome {
  readonly applied: number;
  readonly deleted: number;
  /** Shoots (technical ID) left out of the combined filters, with the reason, e.g. a policy larger than one shard. */
  readonly unplaced: ReadonlyMap<string, string>;
  /** Nothing was decided: the cache does not show our last writes yet; sync again shortly. */
  readonly waitingForCache?: boolean;
  /** Writes (applies and deletes) that changed a CONNECT listener (see changesListeners). */
  readonly listenerWrites: number;
  /** Nothing was written: the plan changes stored listeners and the least interval holds it this long (ms). */
  readonly heldForMs?: number;
}

/** When a sync may change what is stored in the CONNECT listeners. */
export interface ListenerGate {
  /** ms until a write may change a stored listener object (≤ 0: now; see listenerWriteDelay). */
  readonly listenerWriteDelayMs: number;
}

export function appliedAcls(extensions: readonly Extension[]): AppliedAcl[] {
  return extensions.filter(isActive).flatMap((ext) => appliedFromState(ext.metadata.namespace, ext.status?.['state']) ?? []);
}

/** The recorded tunnel generation (and a raise not yet taken) of every active shoot that has one (tunnelRevocation hop). */
export function tunnelGenerations(extensions: readonly Extension[]): Map<string, RecordedHopGeneration> {
  const generations = new Map<string, RecordedHopGeneration>();
  for (const ext of extensions.filter(isActive)) {
    const generation = recordedTunnelGeneration(ext);
    if (generation !== undefined) generations.set(ext.metadata.namespace, generation);
  }
  return generations;
}

/**
 * Active shoots whose recorded ACL cannot be read (status.state missing, emptied or unreadable, for
 * example by another writer): whatever the stored combined filters hold of them stays as stored
 * until the next reconcile records the ACL again. A missing input never removes protection (a new
 * shoot has nothing stored, so nothing is kept for it).
 */
export function unreadableAcls(extensions: readonly Extension[]): string[] {
  return extensions
    .filter((ext) => isActive(ext) && appliedFromState(ext.metadata.namespace, ext.status?.['state']) === undefined)
    .map((ext) => ext.metadata.namespace)
    .sort();
}

const key = (o: { metadata: { namespace?: string | undefined; name: string } }): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * The gateways to write: every gateway with a Deployment, plus every namespace that already holds
 * stored combined filters, with their stored workload selector. A Deployment that is missing,
 * relabelled, orphaned or being recreated therefore never removes its gateway's protection, and a
 * recreated gateway is protected at once.
 */
export function combinedGateways(fromDeployments: readonly GatewayWorkload[], stored: readonly EnvoyFilterObject[]): GatewayWorkload[] {
  const gateways = new Map(fromDeployments.map((g) => [g.namespace, g]));
  // Asked on every reading of the stored filters: only the filters of namespaces without a Deployment are sorted.
  const byName = stored.filter((f) => !gateways.has(f.metadata.namespace)).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  for (const filter of byName) {
    const namespace = filter.metadata.namespace;
    const selector = storedSelector(filter);
    if (gateways.has(namespace) || !selector || Object.keys(selector).length === 0) continue;
    gateways.set(namespace, { namespace, selector });
  }
  return [...gateways.values()].sort((a, b) => a.namespace.localeCompare(b.namespace));
}

/** Where the stored combined filters do not protect a shoot as recorded, and why, if known. */
export interface CombinedProtection {
  readonly uncovered: readonly string[];
  readonly problem: string | undefined;
  /** Why the shoot fits no shard or bucket (a lasting condition only the operator can fix). */
  readonly unplaced?: string;
}


/** What a sync writes, in order. */
export interface CombinedWritePlan {
  /** Changed shards with the stored policies of active shoots moving out of them kept (add). */
  readonly grow: readonly CombinedWrite[];
  /** Shards whose exact content differs from what `grow` left (remove the moved shoots). */
  readonly settle: readonly CombinedWrite[];
  /** Stored shards no longer wanted (every active shoot of them is placed elsewhere by now). */
  readonly deletions: readonly EnvoyFilterObject[];
  readonly unplaced: ReadonlyMap<string, string>;
  /** Why a setting is not applied yet (see Placement.held). */
  readonly held?: string;
}

type Entries = Map<string, PolicyEntry<unknown>>;

/** The stored object already is `wanted`: our labels present, spec identical (key order aside). */
export function storedAs(stored: EnvoyFilterObject | undefined, wanted: CombinedWrite): boolean {
  if (!stored) return false;
  const labels = Object.entries(wanted.metadata.labels).every(([l, v]) => stored.metadata.labels?.[l] === v);
  return labels && jsonEqual(stored.spec, wanted.spec);
}

interface PlannedShard {
  readonly gateway: GatewayWorkload;
  readonly port: number;
  readonly shard: number;
  readonly entries: Entries;
}

/**
 * Plans the writes from what is stored (pure). Final content of a shard: the generated entries
 * plus the stored entries of active shoots that cannot be placed (their protection stays where
 * it is). Transitional content: final plus the stored entries of active shoots moving out. The
 * objects the shards rely on (matcher form: the extraction) are written first and deleted last;
 * objects that name the shards (ECDS form: the listener parts) are written last and deleted first.
 */
export function planCombinedWrites(input: {
  readonly operator: OperatorConfig;
  readonly gateways: readonly GatewayWorkload[];
  readonly shoots: readonly AppliedAcl[];
  readonly stored: readonly EnvoyFilterObject[];
  /** Active shoots without a readable recorded ACL (see unreadableAcls): kept as stored, like unplaced ones. */
  readonly unreadable?: readonly string[];
  /** The recorded tunnel generations (see tunnelGenerations); a shoot without one has generation 1. */
  readonly generations?: ReadonlyMap<string, RecordedHopGeneration>;
  /** Shoots whose stored CONNECT filters hold their recorded ACL: a raise recorded for one of them is taken now (hopGeneration). */
  readonly filtersHold?: ReadonlySet<string>;
}): CombinedWritePlan {
  const { operator, gateways, shoots, stored } = input;
  const form = combinedForm(operator);
  const placement = form.place(shoots, stored);
  const { unplaced } = placement;
  const keptAsIs = new Map<string, string>([...unplaced, ...(input.unreadable ?? []).map((id): [string, string] => [id, 'its recorded ACL is unreadable'])]);
  const active = new Set(shoots.map((s) => s.technicalID));
  const storedByKey = new Map(stored.map((f) => [key(f), f]));
  const sortedGateways = [...gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  const gatewayByNamespace = new Map(sortedGateways.map((g) => [g.namespace, g]));

  // No acl Extension at all (the last one was deleted; Gardener removes an extension no shoot on the
  // seed uses): nothing of ours stays on the gateways, each object after what names it. As long
  // as one exists, even without a recorded ACL yet, the layout stays (its going drains every tunnel).
  const nothingWanted = shoots.length === 0 && keptAsIs.size === 0;
  const finals = new Map<string, PlannedShard>();
  for (const gateway of nothingWanted ? [] : sortedGateways) {
    for (const port of form.shardPorts) {
      for (const { index, entries } of placement.shards) {
        const write = form.shard(gateway, port, index, new Map());
        finals.set(key(write), { gateway, port, shard: index, entries: new Map(entries) });
      }
    }
  }
  // Unplaced shoots and those whose ACL is unreadable keep every stored entry where it is: their shards are kept, never emptied.
  for (const filter of stored) {
    const gateway = gatewayByNamespace.get(filter.metadata.namespace);
    const name = form.parseName(filter.metadata.name);
    if (!gateway || !name) continue;
    const kept = [...storedEntriesAnyForm(filter)].filter(([id]) => keptAsIs.has(id));
    if (kept.length === 0) continue;
    const k = key(filter);
    const planned = finals.get(k) ?? { gateway, port: name.port, shard: name.shard, entries: new Map() };
    finals.set(k, planned);
    for (const [id, entry] of kept) planned.entries.set(id, entry);
  }

  // What the shards work with, for every gateway and port that has a shard.
  const supporting = new Map<string, CombinedWrite>();
  for (const { gateway, port } of finals.values()) {
    for (const write of form.supporting(gateway, port, placement)) supporting.set(key(write), write);
  }

  // A transitional write now, the final one in a later sync (once nothing stored needs more).
  const supportGrow: CombinedWrite[] = [];
  for (const [k, wanted] of supporting) {
    const current = storedByKey.get(k);
    const first = (current ? form.transitionalSupport(current, wanted, stored) : undefined) ?? wanted;
    if (!storedAs(current, first)) supportGrow.push(first);
  }
  const shardGrow: CombinedWrite[] = [];
  const settle: CombinedWrite[] = [];
  for (const [k, planned] of [...finals].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const current = storedByKey.get(k);
    const transitional = new Map(planned.entries);
    if (current) {
      for (const [id, entry] of storedEntriesAnyForm(current)) {
        if (active.has(id) && !transitional.has(id)) transitional.set(id, entry);
      }
    }
    const finalWrite = form.shard(planned.gateway, planned.port, planned.shard, planned.entries);
    const widened = form.transitionalShard?.(stored, planned.gateway, planned.shard, transitional);
    const growWrite = widened ?? (transitional.size === planned.entries.size ? finalWrite : form.shard(planned.gateway, planned.port, planned.shard, transitional));
    if (!storedAs(current, growWrite)) shardGrow.push(growWrite);
    if (growWrite !== finalWrite && widened === undefined) settle.push(finalWrite);
  }
  // Shards rely on their supporting objects (written first), or the supporting objects name the shards (written after them).
  const formGrow = form.supportNamesShards ? [...shardGrow, ...supportGrow] : [...supportGrow, ...shardGrow];
  const hop = nothingWanted || operator.tunnelRevocation !== 'hop' ? { writes: [], unplaced: new Map<string, string>() } : tunnelHopWrites(sortedGateways, operator, shoots, keptAsIs, stored, input.generations, input.filtersHold);
  const hopKeys = new Set(hop.writes.map(key));
  const hopChanged = hop.writes.filter((w) => !storedAs(storedByKey.get(key(w)), w));
  // The hop's shards name nothing: first. Its entry names their doors: last.
  const grow = [...hopChanged.filter((w) => w.metadata.name !== SHARED_HOP_ENTRY_OBJECT), ...formGrow, ...hopChanged.filter((w) => w.metadata.name === SHARED_HOP_ENTRY_OBJECT)];
  // Objects of another form (after a switch) that hold a shoot fitting nothing of this form stay,
  // with what they need: that shoot keeps the protection it has. They are rewritten to hold only
  // such shoots, once the others are protected by this form, so no stale policy of theirs stays.
  const keptOther = new Set<string>();
  for (const filter of stored) {
    if (!isShardName(filter.metadata.name) || form.parseName(filter.metadata.name) || !gatewayByNamespace.has(filter.metadata.namespace)) continue;
    if (![...storedEntriesAnyForm(filter).keys()].some((id) => keptAsIs.has(id))) continue;
    keptOther.add(key(filter));
    for (const needed of keptWith(filter, stored)) keptOther.add(key(needed));
  }
  const restored = keptSupportRestored(
    [...keptOther].flatMap((k) => storedByKey.get(k) ?? []),
    stored,
    sortedGateways,
    operator,
  );
  for (const f of restored.keep) keptOther.add(key(f));
  const keptAsStored: string[] = [];
  for (const k of [...keptOther].sort()) {
    const filter = storedByKey.get(k);
    const gateway = filter && gatewayByNamespace.get(filter.metadata.namespace);
    // Where something was restored, the kept objects are read again with it in the next sync.
    if (!filter || !gateway || restored.namespaces.has(filter.metadata.namespace)) continue;
    const rewrite = keptOnly(filter, gateway, keptAsIs, operator, stored);
    if (typeof rewrite === 'string') keptAsStored.push(rewrite);
    // Kept as stored, but for the gateway's current selector like everything else of the namespace.
    const write = typeof rewrite === 'object' ? rewrite : copiedFor(filter, gateway);
    if (!storedAs(filter, write)) settle.push(write);
  }
  // Only in namespaces of known gateways: filters elsewhere have no selector we could trust.
  // What names or relies on others goes first: nothing ever names or relies on a deleted object.
  const deletions = stored
    .filter((f) => gatewayByNamespace.has(f.metadata.namespace) && !finals.has(key(f)) && !supporting.has(key(f)) && !keptOther.has(key(f)) && !hopKeys.has(key(f)))
    .sort((a, b) => deletionRank(a.metadata.name) - deletionRank(b.metadata.name));
  const hopUnplaced = [...hop.unplaced].map(([id, why]) => `${id}: ${why}`);
  const held = [...(placement.held !== undefined ? [placement.held] : []), ...keptAsStored, ...restored.unrestorable, ...hopUnplaced].join('; ');
  // Restores first: a kept matcher shard without its extraction refuses every request carrying a protected header.
  return { grow: [...restored.writes, ...grow], settle, deletions, unplaced, ...(held !== '' ? { held } : {}) };
}

/**
 * The shared tunnel hop of every gateway (tunnelRevocation hop): a chain for each shoot at its
 * recorded generation; a shoot whose ACL is kept as stored keeps the chain stored for it on that
 * gateway (its tunnels are not closed by a missing input).
 */
function tunnelHopWrites(
  gateways: readonly GatewayWorkload[],
  operator: OperatorConfig,
  shoots: readonly AppliedAcl[],
  keptAsIs: ReadonlyMap<string, string>,
  stored: readonly EnvoyFilterObject[],
  generations: ReadonlyMap<string, RecordedHopGeneration> = new Map(),
  filtersHold: ReadonlySet<string> = new Set(),
): { writes: CombinedWrite[]; unplaced: Map<string, string> } {
  const unplaced = new Map<string, string>();
  const writes = gateways.flatMap((gateway) => {
    const kept = storedHopChains(stored.filter((f) => f.metadata.namespace === gateway.namespace));
    const hopShoots = [
      ...shoots.map((s) => ({
        technicalID: s.technicalID,
        tunnelGeneration: hopGeneration(generations.get(s.technicalID) ?? { generation: 1 }, kept.get(s.technicalID), filtersHold.has(s.technicalID)),
      })),
      ...[...kept].filter(([id]) => keptAsIs.has(id) && !shoots.some((s) => s.technicalID === id)).map(([technicalID, tunnelGeneration]) => ({ technicalID, tunnelGeneration })),
    ];
    const objects = sharedHopLayout(gateway, operator, hopShoots);
    for (const [id, why] of objects.unplaced) unplaced.set(id, why);
    return objects.objects;
  });
  return { writes, unplaced };
}

/** A field the stored spec has and the wanted one lacks: server-side apply keeps such fields of other managers. */
function hasForeignFields(stored: unknown, wanted: unknown): boolean {
  if (typeof stored !== 'object' || stored === null || Array.isArray(stored)) return false;
  if (typeof wanted !== 'object' || wanted === null || Array.isArray(wanted)) return true;
  const w = wanted as Record<string, unknown>;
  return Object.entries(stored).some(([k, v]) => !Object.hasOwn(w, k) || hasForeignFields(v, w[k]));
}

/** What an apply of `filter` stores that the sync decides on: its labels and spec. */
function contentDigest(filter: CombinedWrite): string {
  return createHash('sha256').update(JSON.stringify([filter.metadata.labels, filter.spec])).digest('hex');
}

/** One reading of the stored combined filters, with what it was read from. */
interface StoredReading {
  readonly stored: readonly EnvoyFilterObject[];
  readonly gatewaysKey: string;
  readonly coverage: StoredCoverage;
  readonly namespaces: readonly string[];
  /** Per gateway namespace, the technical IDs some stored filter (of any form) there holds a policy of. */
  readonly held: ReadonlyMap<string, ReadonlySet<string>>;
  /** Per gateway namespace, the tunnel hop chains stored there: technical ID -> generation. */
  readonly hopChains: ReadonlyMap<string, ReadonlyMap<string, number>>;
}

/** The same cached objects in the same order (the cache hands out a new object for every stored change). */
function sameObjects<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((item, i) => item === b[i]);
}

/** Writes refused or failed in some gateway namespaces; the others were written. */
export class CombinedWritesFailed extends Error {
  constructor(
    readonly namespaces: ReadonlyMap<string, string>,
    /** The first error, for its status code and Retry-After. */
    override readonly cause: unknown,
  ) {
    super([...namespaces].map(([namespace, reason]) => `in ${namespace}: ${reason}`).join('; '));
    this.name = 'CombinedWritesFailed';
  }
}

/** The tunnel hop chains of one stored filter, read once per object (a reading is taken for nearly every reconcile while the filters change). */
const hopChainsOf = perObject((filter: EnvoyFilterObject) => storedHopChains([filter]));

/** storedHopChains of `filters`, from each filter's own reading (a later filter's chain of a shoot wins, as there). */
function mergedHopChains(filters: readonly EnvoyFilterObject[]): Map<string, number> {
  const chains = new Map<string, number>();
  for (const filter of filters) for (const [id, generation] of hopChainsOf(filter)) chains.set(id, generation);
  return chains;
}

/** Syncs the combined filters from the caches; see the file comment for the rules. */
export class CombinedSyncer {
  /** Only to log a change once, not on every sync. */
  private reportedUnplaced = new Map<string, string>();
  private reportedKept = '';
  private reportedHeld: string | undefined;
  /**
   * Our writes the cache has not shown yet. Not a memory of contents: it only makes the next
   * decision wait (briefly) until the cache has caught up, so that a cache a few events behind
   * does not cause the same write twice. Decisions are still taken from the cache alone.
   */
  private readonly written: WrittenVersions;
  /**
   * Per object, what our last apply stored (a digest of labels and spec) and the resourceVersion
   * the server gave it. When the cache lags past cacheLagLimitMs, the sync decides on older
   * copies; an object whose wanted content is what we stored last, and whose cached copy is older
   * than that apply, is stored already: applying it again changes nothing on the server but costs
   * it the most of any request we make (these objects are the largest), which at 5,000 shoots kept
   * the API server, and so the cache, behind for minutes.
   */
  private readonly lastApplied = new Map<string, { readonly digest: string; readonly resourceVersion: string }>();
  /** The EnvoyFilter cache's watch position and since when it has been there (see cacheBehind). */
  private watchPosition: { readonly value: string | undefined; readonly since: number } = { value: undefined, since: 0 };
  /** Why the last sync failed (API error, webhook refusal); undefined after a successful one. */
  private lastFailure: string | undefined;
  /** Gateway namespaces whose writes failed in the last sync that wrote, with the error. */
  private refusedNamespaces: ReadonlyMap<string, string> = new Map();

  /** The last reading of the stored filters (see storedReading). */
  private lastReading: StoredReading | undefined;
  private readonly form: CombinedForm;
  private readonly unplacedGauge: Gauge | undefined;

  constructor(private readonly deps: CombinedSyncerDeps) {
    this.form = combinedForm(deps.operator);
    this.written = new WrittenVersions({
      holdMs: deps.cacheLagLimitMs ?? 10_000,
      now: () => this.now(),
      onGiveUp: (filter, waitedMs) => deps.logger.warn({ filter, waitedMs: Math.round(waitedMs) }, 'the EnvoyFilter cache has not shown our write yet; deciding without it'),
    });
    this.unplacedGauge =
      deps.registry &&
      new Gauge({
        name: 'gardener_acl_combined_unplaced_shoots',
        help: 'ACL shoots that fit no shard or bucket of the combined CONNECT filters (1 per shoot): unprotected on the CONNECT paths unless an earlier policy of theirs is stored. Raise ecdsBuckets or maxObjectBytes.',
        labelNames: ['shoot'],
        registers: [deps.registry],
      });
  }

  /**
   * Whether a cache event shows one of our own writes that is still awaited. Any other change
   * (someone else's delete or edit, or our own seen before its response) may have opened a gap.
   */
  isOwnWrite(event: 'add' | 'update' | 'delete', filter: EnvoyFilterObject): boolean {
    return this.written.isOwn(key(filter), event, filter.metadata.resourceVersion);
  }

  /**
   * Whether some stored combined filter still holds a policy of `technicalID` in a gateway
   * namespace where the last sync could write. A namespace whose writes are refused keeps a
   * deleted shoot's policy until they go through; that must not hold every deletion of the seed.
   */
  holds(technicalID: string): boolean {
    for (const [namespace, ids] of this.storedReading().held) if (ids.has(technicalID) && !this.refusedNamespaces.has(namespace)) return true;
    // The last acl Extension going: it waits for the whole layout to go (docs/operators/uninstall.md), so
    // that Gardener, which uninstalls the extension once no Extension is left, finds nothing of ours.
    // Only what a sync would delete counts: objects in a namespace that refuses writes, or where no gateway selector can be trusted, never hold it.
    const othersActive = this.deps.extensions().some((e) => e.metadata.namespace !== technicalID && isActive(e));
    if (othersActive) return false;
    const { namespaces } = this.storedReading();
    return this.deps.existing().some((f) => namespaces.includes(f.metadata.namespace) && !this.refusedNamespaces.has(f.metadata.namespace));
  }

  /**
   * Whether the STORED combined filters protect `shoot` exactly as recorded, on every gateway and
   * port: the `<namespace>:<port>` paths where they do not, and why the syncer cannot fix that
   * (the shoot does not fit a shard, or the last write failed), if it knows.
   */
  protection(shoot: AppliedAcl): CombinedProtection {
    const { coverage, namespaces } = this.storedReading();
    const uncovered = uncoveredPaths(coverage, shoot.technicalID, this.form.entry(shoot), namespaces, this.deps.operator.protectedPorts);
    const unplaced = this.reportedUnplaced.get(shoot.technicalID);
    return { uncovered, problem: unplaced ?? this.lastFailure, ...(unplaced !== undefined ? { unplaced } : {}) };
  }

  /**
   * Gateway namespaces whose stored tunnel hop lacks the chain of `technicalID` at `generation` or
   * later (a later one is stored when the Extension read here lags the status it was written from).
   */
  tunnelHopMissing(technicalID: string, generation: number): string[] {
    const { namespaces, hopChains } = this.storedReading();
    return namespaces.filter((namespace) => (hopChains.get(namespace)?.get(technicalID) ?? 0) < generation);
  }

  /** The shoots among `shoots` that the stored combined filters do not protect as recorded. */
  unprotected(shoots: readonly AppliedAcl[]): Set<string> {
    const { coverage, namespaces } = this.storedReading();
    const out = new Set<string>();
    for (const shoot of shoots) {
      if (uncoveredPaths(coverage, shoot.technicalID, this.form.entry(shoot), namespaces, this.deps.operator.protectedPorts).length > 0) out.add(shoot.technicalID);
    }
    return out;
  }

  /**
   * What the stored filters enforce, read again only when a stored filter or a gateway changed:
   * a reading costs O(shoots) (every policy of the seed is parsed), and every shoot's reconcile
   * asks, so reading per question made a seed's reconciles O(shoots²).
   */
  private storedReading(): StoredReading {
    const stored = this.deps.existing();
    const gateways = combinedGateways(this.deps.gateways(), stored);
    const gatewaysKey = JSON.stringify(gateways.map((g) => [g.namespace, g.selector]));
    const last = this.lastReading;
    if (last && last.gatewaysKey === gatewaysKey && sameObjects(last.stored, stored)) return last;
    const coverage = storedCoverage(stored, new Map(gateways.map((g) => [g.namespace, g.selector])), this.form);
    const held = new Map<string, Set<string>>();
    for (const filter of stored) {
      const namespace = filter.metadata.namespace;
      const ids = held.get(namespace) ?? new Set<string>();
      held.set(namespace, ids);
      for (const id of storedEntriesAnyForm(filter).keys()) ids.add(id);
    }
    // Only shards that select the gateway's pods serve them.
    const hopChains = new Map(gateways.map((g) => [g.namespace, mergedHopChains(stored.filter((f) => f.metadata.namespace === g.namespace && jsonEqual(storedSelector(f) ?? {}, g.selector)))]));
    this.lastReading = { stored, gatewaysKey, coverage, namespaces: gateways.map((g) => g.namespace), held, hopChains };
    return this.lastReading;
  }

  private now(): number {
    return this.deps.now?.() ?? performance.now();
  }

  /**
   * Drops the noted writes the cache shows (or that waited too long); true when none is left.
   * Whether the cache shows a write is asked before its age: a sync of many writes takes longer
   * than the limit itself, so its first writes are older than that when the next sync looks.
   */
  private cacheCaughtUp(stored: readonly EnvoyFilterObject[]): boolean {
    const byKey = new Map(stored.map((f) => [key(f), f.metadata.resourceVersion]));
    return this.written.caughtUp((k) => byKey.get(k), this.deps.cacheProgress?.());
  }

  async sync(gate: ListenerGate = { listenerWriteDelayMs: 0 }): Promise<CombinedSyncOutcome> {
    try {
      const outcome = await this.syncOnce(gate);
      if (!outcome.waitingForCache) this.lastFailure = undefined;
      return outcome;
    } catch (error) {
      this.lastFailure = `writing the combined CONNECT filters failed: ${describeError(error)}`;
      throw error;
    }
  }

  private async syncOnce(gate: ListenerGate): Promise<CombinedSyncOutcome> {
    const { deps } = this;
    if (!deps.cachesSynced()) {
      throw new Error('combined CONNECT filters: the Extension, gateway Deployment and EnvoyFilter caches have not listed yet; nothing is written or deleted until they have');
    }
    if (!this.cacheCaughtUp(deps.existing())) return { applied: 0, deleted: 0, listenerWrites: 0, unplaced: this.reportedUnplaced, waitingForCache: true };
    const stored = deps.existing();
    const storedByKey = new Map(stored.map((f) => [key(f), f]));
    const fromDeployments = deps.gateways();
    const gateways = combinedGateways(fromDeployments, stored);
    this.logKeptGateways(gateways.filter((g) => !fromDeployments.some((d) => d.namespace === g.namespace)).map((g) => g.namespace));
    const extensions = deps.extensions();
    const shoots = appliedAcls(extensions);
    const generations = tunnelGenerations(extensions);
    // Only a shoot with a raise not yet taken asks whether the stored filters hold its ACL.
    const filtersHold = new Set(shoots.filter((s) => generations.get(s.technicalID)?.raiseFrom !== undefined && this.protection(s).uncovered.length === 0).map((s) => s.technicalID));
    const plan = planCombinedWrites({ operator: deps.operator, gateways, shoots, stored, unreadable: unreadableAcls(extensions), generations, filtersHold });
    this.logUnplaced(plan.unplaced);
    if (plan.held !== undefined && plan.held !== this.reportedHeld) deps.logger.warn(plan.held);
    this.reportedHeld = plan.held;
    const writes = [...plan.grow, ...plan.settle];
    // Held only when all it does is change stored listeners: a missing object is a gap, written at
    // once; so is a gateway's new workload selector (pods it did not select have no filter at all,
    // and a pod both select keeps its listener as it is).
    const updatesListeners = writes.some((w) => changesListeners(w.metadata.name) && storedByKey.has(key(w))) || plan.deletions.some((d) => changesListeners(d.metadata.name));
    const createsMissing = writes.some((w) => !storedByKey.has(key(w)));
    const reselects = writes.some((w) => {
      const before = storedByKey.get(key(w));
      return before !== undefined && !jsonEqual(storedSelector(before) ?? {}, w.spec.workloadSelector.labels);
    });
    if (updatesListeners && !createsMissing && !reselects && gate.listenerWriteDelayMs > 0) {
      return { applied: 0, deleted: 0, listenerWrites: 0, unplaced: plan.unplaced, heldForMs: gate.listenerWriteDelayMs };
    }
    let applied = 0;
    let deleted = 0;
    let listenerWrites = 0;
    // Each gateway namespace protects every shoot on its own, so a write refused in one namespace
    // stops only that namespace's later steps (add before remove holds per namespace) and the
    // others converge. Without the fence nothing may be written anywhere: that ends the sync.
    const failed = new Map<string, unknown>();
    const step = async (namespace: string, run: () => Promise<void>): Promise<boolean> => {
      if (failed.has(namespace)) return false;
      try {
        await run();
        return true;
      } catch (error) {
        if (error instanceof FenceRefusedError) throw error;
        failed.set(namespace, error);
        return false;
      }
    };
    // Phase 1 may meet another writer's spec fields (write); phase 2 applies what phase 1 left;
    // phase 3 deletes. The namespaces go side by side: a sync then takes as long as its slowest
    // namespace's writes, not as long as all of them one after another.
    const phases: readonly { readonly filters: readonly CombinedWrite[]; readonly put: (f: CombinedWrite) => Promise<boolean> }[] = [
      { filters: plan.grow, put: (f) => this.write(f, storedByKey.get(key(f))) },
      { filters: plan.settle, put: (f) => this.apply(f, storedByKey.get(key(f))) },
    ];
    const writeNamespace = async (namespace: string): Promise<void> => {
      for (const { filters, put } of phases) {
        for (const filter of filters) {
          if (filter.metadata.namespace !== namespace) continue;
          let written = false;
          if (!(await step(namespace, async () => void (written = await put(filter)))) || !written) continue;
          applied++;
          if (changesListeners(filter.metadata.name)) listenerWrites++;
        }
      }
      for (const stale of plan.deletions) {
        if (stale.metadata.namespace !== namespace) continue;
        const done = await step(namespace, async () => {
          this.lastApplied.delete(key(stale));
          await deps.client.delete(refOf(stale));
          this.written.noteDeleted(key(stale));
        });
        if (!done) continue;
        deleted++;
        if (changesListeners(stale.metadata.name)) listenerWrites++;
      }
    };
    const namespaces = [...new Set([...writes, ...plan.deletions].map((f) => f.metadata.namespace))].sort();
    const settled = await Promise.allSettled(namespaces.map(writeNamespace));
    // Only a lost fence escapes step(): nothing may be written anywhere, so the sync ends with it.
    const fenceLost = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (fenceLost) throw fenceLost.reason;
    if (applied + deleted > 0) deps.logger.info({ applied, deleted, listenerWrites, unplaced: plan.unplaced.size }, 'combined CONNECT filters updated');
    this.refusedNamespaces = new Map([...failed].map(([namespace, error]) => [namespace, describeError(error)]));
    if (failed.size > 0) throw new CombinedWritesFailed(this.refusedNamespaces, failed.values().next().value);
    return { applied, deleted, listenerWrites, unplaced: plan.unplaced };
  }

  /**
   * Server-side apply; when another writer added spec fields (apply would keep them, they belong
   * to that writer), the spec is replaced as a whole instead.
   */
  private async write(filter: CombinedWrite, current: EnvoyFilterObject | undefined): Promise<boolean> {
    if (current && hasForeignFields(current.spec, filter.spec)) {
      this.lastApplied.delete(key(filter));
      await this.deps.client.jsonPatch(refOf(current), [{ op: 'replace', path: '/spec', value: filter.spec }]);
      return true;
    }
    return this.apply(filter, current);
  }

  /**
   * Whether the EnvoyFilter cache has not yet seen the write that got `resourceVersion`: its watch
   * position and the cached copy are both older. Once it has, the cache decides again, so a
   * foreign delete or edit after our write is repaired.
   */
  private cacheBehind(resourceVersion: string, cached: EnvoyFilterObject | undefined): boolean {
    const progress = this.deps.cacheProgress?.();
    if (progress === undefined) return false;
    // A watch position that has not moved for the lag limit is a watch that stopped: then a write
    // may be all that repairs what it missed, so it is made.
    const now = this.now();
    if (progress !== this.watchPosition.value) this.watchPosition = { value: progress, since: now };
    if (now - this.watchPosition.since > (this.deps.cacheLagLimitMs ?? 10_000)) return false;
    return !resourceVersionAtLeast(progress, resourceVersion) && !resourceVersionAtLeast(cached?.metadata.resourceVersion, resourceVersion);
  }

  /** Server-side apply, unless what is wanted is what our last apply stored and the cache only lags behind it (see lastApplied). */
  private async apply(filter: CombinedWrite, current: EnvoyFilterObject | undefined): Promise<boolean> {
    const k = key(filter);
    const digest = contentDigest(filter);
    const last = this.lastApplied.get(k);
    if (last !== undefined && last.digest === digest && this.cacheBehind(last.resourceVersion, current)) return false;
    const { resourceVersion } = await this.deps.client.apply(filter);
    if (resourceVersion) this.lastApplied.set(k, { digest, resourceVersion });
    else this.lastApplied.delete(k);
    this.written.note(k, resourceVersion);
    return true;
  }

  private logKeptGateways(namespaces: readonly string[]): void {
    const now = namespaces.join(',');
    if (now !== this.reportedKept && namespaces.length > 0) {
      this.deps.logger.warn({ namespaces }, 'no istio-ingressgateway Deployment in these gateway namespaces; their stored combined CONNECT filters are kept and updated (they go with the namespace)');
    }
    this.reportedKept = now;
  }

  private logUnplaced(unplaced: ReadonlyMap<string, string>): void {
    for (const [shoot, message] of unplaced) {
      if (this.reportedUnplaced.get(shoot) !== message) this.deps.logger.error({ shoot }, `${message}; the shoot is left out of the combined CONNECT filters and keeps its stored policy`);
    }
    for (const shoot of this.reportedUnplaced.keys()) if (!unplaced.has(shoot)) this.unplacedGauge?.remove({ shoot });
    for (const shoot of unplaced.keys()) this.unplacedGauge?.set({ shoot }, 1);
    this.reportedUnplaced = new Map(unplaced);
  }
}
