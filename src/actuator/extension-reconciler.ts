// Gardener's generic Extension reconciler (extensions/pkg/controller/extension/reconciler.go),
// around any Actuator: picks the operation (ComputeOperationType), keeps the finalizer, removes
// the operation annotations, and writes Processing before and Error or Succeeded after every
// actuator call. Unlike Gardener's, it also runs on resyncs and foreign writes to converge on what
// is stored; those passes write the status only when something it shows has changed, so a
// converged seed gets no writes.
import type { Logger } from 'pino';
import type { Extension } from '../gardener/objects.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { mergePatchTo } from '../kube/object-json.js';
import { ReportedProblem, type Actuator, type ActuatorResult } from './actuator.js';
import type { WrittenVersions } from '../kube/written-versions.js';
import type { ClusterClient, ObjectRef, Written } from './cluster-client.js';
import { conditionsWith, protectionVerdict, servedVerdict, type Condition } from './health-condition.js';
import { describeServedFaults, type ServedFault } from '../served/served-checker.js';
import {
  ERR_CONFIGURATION_PROBLEM,
  FINALIZER,
  OPERATION_ANNOTATION,
  Operation,
  hasFinalizer,
  isMigrated,
  isRequested,
  isWaitingForState,
  lastOperation,
  operationType,
  type OperationType,
} from '../gardener/extension-contract.js';

export interface ExtensionReconcilerDeps {
  readonly client: ClusterClient;
  readonly actuator: Actuator;
  readonly now: () => Date;
  readonly logger: Logger;
  /** Warning events on the Extension, for failures a shoot owner must see. */
  readonly warn: (ext: Extension, reason: string, message: string) => Promise<void>;
  /**
   * Finalizers of a controller this one replaces: taken off once this controller's own work for
   * the Extension succeeded (ours holds the Extension from then on), and on delete with ours.
   */
  readonly adoptedFinalizers?: readonly string[];
  /** What the gateways serve (the served check); absent: not checked. */
  readonly served?: ServedView;
  /** Each write of an Extension, by `namespace/name`, until the caller's cache shows it. */
  readonly written?: WrittenVersions;
}

/** The served check's answers the reconciler reads. */
export interface ServedView {
  faultsOf(technicalID: string): readonly ServedFault[];
  absentFor(technicalID: string): readonly ServedFault[];
  uncheckedReason(): string | undefined;
}

export type ReconcileOutcome = { readonly kind: 'done' } | { readonly kind: 'retry'; readonly reason: string };

const DONE: ReconcileOutcome = { kind: 'done' };

function keyOf(ext: Extension): string {
  return `${ext.metadata.namespace}/${ext.metadata.name}`;
}

function extensionRef(ext: Extension): ObjectRef {
  return { apiVersion: ext.apiVersion, kind: 'Extension', name: ext.metadata.name, namespace: ext.metadata.namespace };
}

function finalizers(ext: Extension): string[] {
  return (ext.metadata as { finalizers?: string[] }).finalizers ?? [];
}

/**
 * JSON patch adding our finalizer; other controllers' finalizers are never rewritten. Appending
 * to an existing list is safe whatever the server holds; creating the list is not (a cache that
 * has not seen another controller's finalizer would replace it), so it is guarded by the
 * resourceVersion the decision was taken on: a stale cache gets a conflict and a retry.
 */
export function addFinalizer(ext: Extension): Record<string, unknown>[] {
  const current = finalizers(ext);
  if (current.length > 0) return [{ op: 'add', path: '/metadata/finalizers/-', value: FINALIZER }];
  return [
    { op: 'test', path: '/metadata/resourceVersion', value: ext.metadata.resourceVersion ?? '' },
    { op: 'add', path: '/metadata/finalizers', value: [FINALIZER] },
  ];
}

/** JSON patch removing gardenlet's `reconcile` request; refused (and retried) when the server holds another operation by now. */
export function removeReconcileAnnotation(): Record<string, unknown>[] {
  const path = `/metadata/annotations/${OPERATION_ANNOTATION.replace(/~/g, '~0').replace(/\//g, '~1')}`;
  return [
    { op: 'test', path, value: Operation.reconcile },
    { op: 'remove', path },
  ];
}

/** JSON patch removing `names` from the finalizers, each guarded by a test so a concurrent change cannot shift them. */
function removeFinalizers(ext: Extension, names: readonly string[]): Record<string, unknown>[] {
  const indices = finalizers(ext)
    .map((name, index) => ({ name, index }))
    .filter(({ name }) => names.includes(name))
    .reverse();
  return indices.flatMap(({ name, index }) => [
    { op: 'test', path: `/metadata/finalizers/${index}`, value: name },
    { op: 'remove', path: `/metadata/finalizers/${index}` },
  ]);
}

/**
 * gardenlet asked anew: `reconcile` is removed as soon as work starts, so seeing it means a fresh
 * request (its status write must get a new lastUpdateTime). `migrate` and `restore` stay until
 * the operation succeeded; they mark the operation, not a new request, and must not make every
 * retry write again (each write is an event that would start the next attempt at once).
 */
function isNewRequest(ext: Extension): boolean {
  return ext.metadata.annotations?.[OPERATION_ANNOTATION] === Operation.reconcile;
}

interface StoredOperation {
  readonly type?: string;
  readonly state?: string;
}

function storedOperation(ext: Extension): StoredOperation | undefined {
  return ext.status?.['lastOperation'] as StoredOperation | undefined;
}

const DESCRIPTIONS: Record<OperationType, { readonly processing: string; readonly succeeded: string }> = {
  Create: { processing: 'Creating the ACL filters', succeeded: 'ACL applied' },
  Reconcile: { processing: 'Reconciling the ACL filters', succeeded: 'ACL applied' },
  Restore: { processing: 'Restoring the ACL filters', succeeded: 'ACL restored' },
  Delete: { processing: 'Deleting the ACL filters', succeeded: 'ACL filters deleted' },
  Migrate: { processing: 'Removing the ACL filters from this seed', succeeded: 'ACL filters removed from this seed' },
};

export class ExtensionReconciler {
  constructor(private readonly deps: ExtensionReconcilerDeps) {}

  reconcile(ext: Extension, options: { readonly forceDelete?: boolean } = {}): Promise<ReconcileOutcome> {
    return this.decide(ext, options);
  }

  /**
   * Every write of the Extension goes through here, so `written` learns the version it left: the
   * caller holds the next pass until its cache shows that version (deciding again on an older
   * copy would repeat writes already made).
   */
  private async writeExtension(ext: Extension, write: (client: ClusterClient, ref: ObjectRef) => Promise<Written>): Promise<void> {
    const result = await write(this.deps.client, extensionRef(ext));
    this.deps.written?.note(keyOf(ext), result?.resourceVersion);
  }

  private async decide(ext: Extension, options: { readonly forceDelete?: boolean }): Promise<ReconcileOutcome> {
    if (isWaitingForState(ext)) return DONE;
    if (isMigrated(ext)) return this.finishMigration(ext);
    const type = operationType(ext);
    if (type === 'Migrate') return this.migrate(ext);
    if (ext.metadata.deletionTimestamp) return this.delete(ext, options.forceDelete === true);
    return this.reconcileOrRestore(ext, type);
  }

  private async reconcileOrRestore(ext: Extension, type: OperationType): Promise<ReconcileOutcome> {
    const annotation = ext.metadata.annotations?.[OPERATION_ANNOTATION];
    const requested = isRequested(ext);
    // The finalizer first (or with the annotation's removal, in one patch): its patch is guarded by
    // the resourceVersion of `ext`, which a separate removal would change. Gardener removes
    // `reconcile` when work starts, `restore` after success.
    if (!hasFinalizer(ext)) {
      // A new Extension comes with gardenlet's `reconcile`: one patch takes both steps (one write
      // less per shoot on a cold start), the removal guarded by the value it removes.
      const takeUp = annotation === Operation.reconcile ? removeReconcileAnnotation() : [];
      await this.writeExtension(ext, (c, ref) => c.jsonPatch(ref, [...addFinalizer(ext), ...takeUp]));
    } else if (annotation === Operation.reconcile) {
      await this.writeExtension(ext, (c, ref) => c.mergePatch(ref, { metadata: { annotations: { [OPERATION_ANNOTATION]: null } } }));
    }
    // No Processing before the actuator runs (Gardener's library writes one): the pass ends with a
    // status write of its outcome anyway (Processing with the recorded state, Succeeded or Error),
    // milliseconds later, so the early one was one more write per request, 5,000 of them on a cold
    // start, for a state nobody waits on.
    const result = await this.call(ext, type, () => (type === 'Restore' ? this.deps.actuator.restore(ext) : this.deps.actuator.reconcile(ext)));
    if ('outcome' in result) return result.outcome;
    // Only reconcile and restore speak for the shoot's protection; an error keeps what was reported.
    const faults = result.kind === 'done' ? (this.deps.served?.faultsOf(ext.metadata.namespace) ?? []) : [];
    const verdict =
      result.kind === 'done' ? servedVerdict(protectionVerdict(result), faults, this.deps.served?.uncheckedReason(), this.deps.served?.absentFor(ext.metadata.namespace)) : protectionVerdict(result);
    const conditions = conditionsWith(ext, verdict, this.deps.now());
    if (result.kind === 'pending') return this.pending(ext, type, result, conditions);
    const stateChanged = result.state !== undefined && !jsonEqual(ext.status?.['state'] ?? null, result.state);
    if (faults.length > 0) {
      // Stored is not enough: Succeeded means served. The served check enqueues the shoot when this changes.
      await this.error(ext, type, describeServedFaults(faults), false, conditions, { reason: 'ProtectionNotServed', ...(stateChanged ? { state: result.state } : {}) });
      return DONE;
    }
    if (requested || stateChanged || ext.status?.['lastError'] || annotation === Operation.restore) {
      await this.succeeded(ext, type, result.state, result.description, conditions);
      if (stateChanged) this.log(ext).info({ state: result.state }, 'ACL applied');
    } else if (conditions) {
      await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, { conditions }));
    }
    if (annotation === Operation.restore) {
      await this.writeExtension(ext, (c, ref) => c.mergePatch(ref, { metadata: { annotations: { [OPERATION_ANNOTATION]: null } } }));
    }
    const adopted = this.adoptedFinalizersOf(ext);
    if (adopted.length > 0 && hasFinalizer(ext)) {
      await this.writeExtension(ext, (c, ref) => c.jsonPatch(ref, removeFinalizers(ext, adopted)));
      this.log(ext).info({ finalizers: adopted }, 'adopted the Extension from the controller it replaces');
    }
    return DONE;
  }

  private adoptedFinalizersOf(ext: Extension): string[] {
    return finalizers(ext).filter((name) => this.deps.adoptedFinalizers?.includes(name));
  }

  private async delete(ext: Extension, force: boolean): Promise<ReconcileOutcome> {
    // An Extension the replaced controller still holds is cleaned up here as well: nobody else will.
    if (!hasFinalizer(ext) && this.adoptedFinalizersOf(ext).length === 0) return DONE;
    await this.processing(ext, 'Delete');
    const result = await this.call(ext, 'Delete', () => (force ? this.deps.actuator.forceDelete(ext) : this.deps.actuator.delete(ext)));
    if ('outcome' in result) return result.outcome;
    if (result.kind === 'pending') return this.pending(ext, 'Delete', result);
    await this.succeeded(ext, 'Delete', undefined, force ? 'ACL filters deleted (force-deletion)' : undefined);
    await this.writeExtension(ext, (c, ref) => c.jsonPatch(ref, removeFinalizers(ext, [FINALIZER, ...this.adoptedFinalizersOf(ext)])));
    this.log(ext).info({ force }, 'ACL deleted');
    return DONE;
  }

  private async migrate(ext: Extension): Promise<ReconcileOutcome> {
    await this.processing(ext, 'Migrate');
    const result = await this.call(ext, 'Migrate', () => this.deps.actuator.migrate(ext));
    if ('outcome' in result) return result.outcome;
    if (result.kind === 'pending') return this.pending(ext, 'Migrate', result);
    // status.state stays: the restore on the next seed starts from it.
    await this.succeeded(ext, 'Migrate', undefined);
    this.log(ext).info('ACL migrated away from this seed');
    return this.finishMigration(ext);
  }

  /**
   * After a successful Migrate: every finalizer and the `migrate` annotation go (Gardener's
   * RemoveAllFinalizers, then RemoveAnnotation). Also run on later passes, so a failure between
   * the status write and these patches is finished rather than left behind.
   */
  private async finishMigration(ext: Extension): Promise<ReconcileOutcome> {
    if (finalizers(ext).length > 0) await this.writeExtension(ext, (c, ref) => c.mergePatch(ref, { metadata: { finalizers: null } }));
    if (ext.metadata.annotations?.[OPERATION_ANNOTATION] === Operation.migrate) {
      await this.writeExtension(ext, (c, ref) => c.mergePatch(ref, { metadata: { annotations: { [OPERATION_ANNOTATION]: null } } }));
    }
    return DONE;
  }

  /** Runs one actuator call; a problem it reported becomes the Extension's Error status. */
  private async call(ext: Extension, type: OperationType, run: () => Promise<ActuatorResult>): Promise<ActuatorResult | { readonly outcome: ReconcileOutcome }> {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof ReportedProblem)) throw error;
      await this.error(ext, type, error.message, error.configuration);
      return { outcome: error.configuration ? DONE : { kind: 'retry', reason: error.message } };
    }
  }

  /**
   * Work under way: Processing with the state it records (the combined filters are built from
   * it); Error when the actuator knows why it cannot get there. Written only when that changes
   * what is stored: each write is an update event that would start the next attempt at once,
   * bypassing the retry backoff.
   */
  private async pending(
    ext: Extension,
    type: OperationType,
    result: Extract<ActuatorResult, { kind: 'pending' }>,
    conditions?: readonly Condition[],
  ): Promise<ReconcileOutcome> {
    const stored = storedOperation(ext);
    const stateChanged = result.state !== undefined && !jsonEqual(ext.status?.['state'] ?? null, result.state);
    if (stateChanged || isNewRequest(ext) || stored?.type !== type || (stored.state !== 'Processing' && stored.state !== 'Error')) {
      await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, {
        lastOperation: lastOperation(type, 'Processing', result.reason, this.deps.now()),
        ...(result.state !== undefined ? { state: mergePatchTo(ext.status?.['state'], result.state), observedGeneration: ext.metadata.generation ?? null } : {}),
        ...(conditions ? { conditions } : {}),
      }));
    } else if (result.problem !== undefined) {
      await this.error(ext, type, result.problem, false, conditions);
    } else if (conditions) {
      await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, { conditions }));
    }
    return { kind: 'retry', reason: result.problem ?? result.reason };
  }

  /**
   * Processing before the actuator runs, as Gardener writes it (gardenlet sees the request taken
   * up); not again while this operation is already Processing or Error for this generation and
   * nothing new was asked for.
   */
  private async processing(ext: Extension, type: OperationType): Promise<void> {
    const stored = storedOperation(ext);
    // The cache may not show our own last write yet; a new generation alone does not need a new
    // Processing either (the outcome's write records it).
    const continuing = stored?.type === type && (stored.state === 'Processing' || stored.state === 'Error') && !isNewRequest(ext);
    if (continuing) return;
    await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, { lastOperation: lastOperation(type, 'Processing', DESCRIPTIONS[type].processing, this.deps.now()) }));
  }

  private async succeeded(
    ext: Extension,
    type: OperationType,
    state: Record<string, unknown> | undefined,
    description?: string,
    conditions?: readonly Condition[],
  ): Promise<void> {
    await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, {
      ...(conditions ? { conditions } : {}),
      lastOperation: lastOperation(type, 'Succeeded', description ?? DESCRIPTIONS[type].succeeded, this.deps.now()),
      lastError: null,
      ...(type === 'Delete' || type === 'Migrate' ? {} : { observedGeneration: ext.metadata.generation ?? null }),
      // Exactly the new state: a field the new ACL no longer has (e.g. mode audit) must not survive.
      ...(state !== undefined ? { state: mergePatchTo(ext.status?.['state'], state) } : {}),
    }));
  }

  /**
   * A failure in the Extension's status, as Gardener's library writes it for every failure; the
   * same error already stored for this operation and generation is not written again unless
   * gardenlet asked anew (an operation annotation gets a fresh lastUpdateTime).
   */
  private async error(
    ext: Extension,
    type: OperationType,
    description: string,
    configuration: boolean,
    conditions?: readonly Condition[],
    options: { readonly reason?: string; readonly state?: Record<string, unknown> | undefined } = {},
  ): Promise<void> {
    const previous = (ext.status?.['lastError'] as { description?: string } | undefined)?.description;
    const stored = storedOperation(ext);
    const alreadyStored =
      previous === description && stored?.state === 'Error' && stored.type === type && ext.status?.['observedGeneration'] === ext.metadata.generation && options.state === undefined;
    if (alreadyStored && !isNewRequest(ext)) {
      if (conditions) await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, { conditions }));
      return;
    }
    const now = this.deps.now();
    await this.writeExtension(ext, (c, ref) => c.patchStatus(ref, {
      ...(conditions ? { conditions } : {}),
      lastOperation: lastOperation(type, 'Error', description, now),
      lastError: { description, ...(configuration ? { codes: [ERR_CONFIGURATION_PROBLEM] } : {}), lastUpdateTime: now.toISOString() },
      observedGeneration: ext.metadata.generation ?? null,
      ...(options.state !== undefined ? { state: mergePatchTo(ext.status?.['state'], options.state) } : {}),
    }));
    if (previous !== description) await this.deps.warn(ext, options.reason ?? (configuration ? 'InvalidACL' : 'ACLNotApplied'), description);
  }

  /** A reconcile that failed outside the actuator's own reports (API refusal, timeout, ...) says so in the status; a failing status write changes nothing (the retry comes anyway). */
  async reportFailure(ext: Extension, description: string): Promise<void> {
    try {
      await this.error(ext, operationType(ext), description, false);
    } catch (error) {
      this.log(ext).debug({ err: error instanceof Error ? error.message : String(error) }, 'could not write the failure into the status');
    }
  }

  private log(ext: Extension): Logger {
    return this.deps.logger.child({ shoot: ext.metadata.namespace });
  }
}
