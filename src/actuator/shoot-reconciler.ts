// Reconciles one `Extension` of type acl along Gardener's contract: reconcile/create/restore
// write the shoot's ManagedResource and record what was applied; delete and migrate remove the
// shoot's filters; an invalid providerConfig or a missing input reports an error and changes
// nothing that protects the shoot.
import type { Logger } from 'pino';
import { MAX_LISTED_ERRORS } from '../acl/field-errors.js';
import type { OperatorConfig } from '../acl/operator-config.js';
import { boundedLines } from '../acl/quote-input.js';
import type { Extension } from '../gardener/objects.js';
import { formatProblem } from '../gardener/problems.js';
import { seedContext, shootAclFromInventory, type SeedInventory } from '../gardener/seed-acl.js';
import { isNotFound } from '../kube/errors.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { legacyProxyPatch, type LegacyProxyAcl } from '../rbac/legacy-proxy-patch.js';
import { buildShootEnvoyFilters, shootFilterName } from '../rbac/shoot-envoy-filters.js';
import { appliedFromState, stateFor, stateSchema, type AppliedAcl } from './applied-state.js';
import type { ClusterClient, ObjectRef } from './cluster-client.js';
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
} from './extension-contract.js';
import { MANAGED_RESOURCE_NAME, checkStoredManagedResource, managedResourceObjects } from './managed-resource.js';

export interface ShootReconcilerDeps {
  readonly client: ClusterClient;
  readonly operator: OperatorConfig;
  /** The informer caches, as a seed inventory. */
  readonly inventory: () => SeedInventory;
  readonly now: () => Date;
  readonly logger: Logger;
  /** Warning events on the Extension, for failures a shoot owner must see. */
  readonly warn: (ext: Extension, reason: string, message: string) => Promise<void>;
  /** Whether some stored combined CONNECT filter still holds a policy of this shoot. */
  readonly combinedHolds: (technicalID: string) => boolean;
  /** Ask for a combined rebuild soon (coalesced). */
  readonly combinedChanged: () => void;
  /** Where the stored combined filters do not protect `shoot` as recorded, and why, if known. */
  readonly combinedProtection: (shoot: AppliedAcl) => { readonly uncovered: readonly string[]; readonly problem: string | undefined };
  /** Reconcile `ext` again when the stored combined filters change. */
  readonly awaitCombined: (ext: Extension) => void;
}

export type ReconcileOutcome = { readonly kind: 'done' } | { readonly kind: 'retry'; readonly reason: string };

const DONE: ReconcileOutcome = { kind: 'done' };

/** Names Gardener gave its per-shoot EnvoyFilter for the legacy apiserver-proxy port over the releases. */
export function legacyProxyFilterNames(technicalID: string): string[] {
  return [technicalID, `${technicalID}-apiserver-proxy`];
}

function extensionRef(ext: Extension): ObjectRef {
  return { apiVersion: ext.apiVersion, kind: 'Extension', name: ext.metadata.name, namespace: ext.metadata.namespace };
}

const MR_REF = (namespace: string): ObjectRef => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace });

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

/** JSON patch removing our finalizer, guarded by a test so a concurrent change cannot shift it. */
function removeFinalizer(ext: Extension): Record<string, unknown>[] {
  const index = finalizers(ext).indexOf(FINALIZER);
  return [
    { op: 'test', path: `/metadata/finalizers/${index}`, value: FINALIZER },
    { op: 'remove', path: `/metadata/finalizers/${index}` },
  ];
}

/** What this process last wrote into an Extension's status, while the cache may still lag. */
interface WrittenStatus {
  readonly generation: number | undefined;
  readonly state: string;
  readonly phase: 'Processing' | 'Succeeded';
}

export class ShootReconciler {
  private readonly written = new Map<string, WrittenStatus>();

  constructor(private readonly deps: ShootReconcilerDeps) {}

  /**
   * `forceDelete`: the shoot carries Gardener's force-deletion confirmation; a delete then takes
   * the shoot's objects away without waiting for the resource manager or the combined filters
   * (Gardener's actuator ForceDelete: the flow must not hang on a broken dependency).
   */
  async reconcile(ext: Extension, options: { readonly forceDelete?: boolean } = {}): Promise<ReconcileOutcome> {
    if (isWaitingForState(ext) || isMigrated(ext)) return DONE;
    const type = operationType(ext);
    if (type === 'Delete') return this.remove(ext, 'Delete', options.forceDelete === true);
    if (type === 'Migrate') return this.remove(ext, 'Migrate', false);
    return this.apply(ext, type);
  }

  private log(ext: Extension): Logger {
    return this.deps.logger.child({ shoot: ext.metadata.namespace });
  }

  private async apply(ext: Extension, type: OperationType): Promise<ReconcileOutcome> {
    const { client } = this.deps;
    const log = this.log(ext);
    const annotation = ext.metadata.annotations?.[OPERATION_ANNOTATION];
    const key = `${ext.metadata.namespace}/${ext.metadata.name}`;
    // The cache can show our own earlier write's trigger (annotation removed) before the status
    // write itself: a success already written for this generation answers the request.
    const written = this.written.get(key);
    const answered = annotation === undefined && written?.phase === 'Succeeded' && written.generation === ext.metadata.generation;
    const requested = isRequested(ext) && !answered;
    // Gardener: `reconcile` is removed when work starts, `restore` after success.
    // The finalizer first: its patch is guarded by the resourceVersion of `ext`, which our own
    // annotation removal would change.
    if (!hasFinalizer(ext)) await client.jsonPatch(extensionRef(ext), addFinalizer(ext));
    if (annotation === Operation.reconcile) {
      await client.mergePatch(extensionRef(ext), { metadata: { annotations: { [OPERATION_ANNOTATION]: null } } });
    }

    const ctx = seedContext(this.deps.inventory(), this.deps.operator);
    const result = shootAclFromInventory(ext, ctx);
    const errors = [...ctx.problems, ...result.problems].filter((p) => p.severity === 'error');
    if (!result.acl || errors.length > 0) {
      this.written.delete(key);
      const description = boundedLines(errors.map(formatProblem), MAX_LISTED_ERRORS).join('\n') || 'the ACL could not be computed';
      log.warn({ problems: errors.length, description }, 'ACL not applied; the previous protection stays in place');
      await this.reportError(ext, type, description, result.configurationProblem);
      return result.configurationProblem ? DONE : { kind: 'retry', reason: description };
    }
    const acl = result.acl;
    const previousState = stateSchema.safeParse(ext.status?.['state'] ?? {});
    let state = stateFor(acl);
    if (result.noGateways) {
      // Hibernated or not yet deployed: the SNI chains are unknown, so the ManagedResource keeps
      // what it has; the gateway namespaces it was written to stay recorded.
      state = { ...state, gatewayNamespaces: previousState.success ? previousState.data.gatewayNamespaces : [] };
      log.info('no Gateway in the shoot namespace; keeping the existing per-shoot filters');
    } else {
      const filters = buildShootEnvoyFilters(acl, { operator: this.deps.operator, gateways: ctx.gateways, observabilityWildcards: ctx.observabilityWildcards, shoots: [] });
      await this.writeManagedResource(ext.metadata.namespace, filters);
    }

    const stateJson = JSON.stringify(state);
    const stateChanged = answered ? written.state !== stateJson : !previousState.success || !jsonEqual(previousState.data, stateSchema.parse(state));
    const status = ext.status ?? {};
    const wantsStatus = requested || stateChanged || (status['lastError'] && !answered) || annotation === Operation.restore;
    if (wantsStatus) {
      const waiting = await this.waitForCombined(ext, type, state, stateChanged);
      if (waiting) return waiting;
      await client.patchStatus(extensionRef(ext), {
          lastOperation: lastOperation(type, 'Succeeded', 'ACL applied', this.deps.now()),
          lastError: null,
          observedGeneration: ext.metadata.generation ?? null,
          state,
      });
      this.written.set(key, { generation: ext.metadata.generation, state: stateJson, phase: 'Succeeded' });
    }
    if (annotation === Operation.restore) {
      await client.mergePatch(extensionRef(ext), { metadata: { annotations: { [OPERATION_ANNOTATION]: null } } });
    }
    if (stateChanged) {
      log.info({ gatewayNamespaces: state.gatewayNamespaces }, 'ACL applied');
      this.deps.combinedChanged();
    }
    const unverified = await this.triggerLegacyProxyFilters(ext.metadata.namespace, state.gatewayNamespaces, appliedFromState(ext.metadata.namespace, state));
    if (unverified.length > 0) {
      log.warn({ filters: unverified }, 'the webhook admitted legacy apiserver-proxy filters with another ACL (its cache lags); nudging them again');
      return { kind: 'retry', reason: `legacy apiserver-proxy filters not yet admitted with the recorded ACL: ${unverified.join(', ')}` };
    }
    return DONE;
  }

  /**
   * Succeeded means protected as stored: until the stored combined CONNECT filters hold the
   * recorded ACL on every gateway and port, the Extension says Processing (with the new state, which
   * is what the combined filters are built from), or Error when the syncer cannot get there.
   * Undefined when the shoot is protected as recorded.
   */
  private async waitForCombined(ext: Extension, type: OperationType, state: ReturnType<typeof stateFor>, stateChanged: boolean): Promise<ReconcileOutcome | undefined> {
    const applied = appliedFromState(ext.metadata.namespace, state);
    if (!applied) return undefined;
    const { uncovered, problem } = this.deps.combinedProtection(applied);
    if (uncovered.length === 0) return undefined;
    const key = `${ext.metadata.namespace}/${ext.metadata.name}`;
    const stateJson = JSON.stringify(state);
    const written = this.written.get(key);
    // The cache may not show our Processing write yet: it is not repeated for the same state.
    const processingWritten = written?.phase === 'Processing' && written.state === stateJson && written.generation === ext.metadata.generation;
    this.deps.awaitCombined(ext);
    this.deps.combinedChanged();
    const paths = boundedLines(uncovered, 4).join(', ');
    const operation = (ext.status?.['lastOperation'] as { state?: string } | undefined)?.state;
    const annotation = ext.metadata.annotations?.[OPERATION_ANNOTATION];
    if (annotation !== undefined || (!processingWritten && (stateChanged || (operation !== 'Processing' && operation !== 'Error')))) {
      await this.deps.client.patchStatus(extensionRef(ext), {
        lastOperation: lastOperation(type, 'Processing', `ACL recorded; waiting for the combined CONNECT filters on ${paths}`, this.deps.now()),
        observedGeneration: ext.metadata.generation ?? null,
        state,
      });
      this.written.set(key, { generation: ext.metadata.generation, state: stateJson, phase: 'Processing' });
      return { kind: 'retry', reason: 'waiting for the combined CONNECT filters' };
    }
    if (problem !== undefined) {
      await this.reportError(ext, type, `the combined CONNECT filters do not protect this shoot as recorded on ${paths}: ${problem}`, false);
    }
    return { kind: 'retry', reason: problem ?? 'waiting for the combined CONNECT filters' };
  }

  /**
   * A reconcile that failed with an error (API refusal, timeout, ...) says so in the Extension's
   * status, as Gardener's extension library does for every failure; the same error is not
   * written twice, and a failing status write changes nothing (the retry comes anyway).
   */
  async reportFailure(ext: Extension, description: string): Promise<void> {
    try {
      await this.reportError(ext, operationType(ext), description, false);
    } catch (error) {
      this.log(ext).debug({ err: error instanceof Error ? error.message : String(error) }, 'could not write the failure into the status');
    }
  }

  private async reportError(ext: Extension, type: OperationType, description: string, configuration: boolean): Promise<void> {
    const previous = (ext.status?.['lastError'] as { description?: string } | undefined)?.description;
    const operation = ext.status?.['lastOperation'] as { type?: string; state?: string } | undefined;
    // The same error already stored for this generation is not written again (each write is an
    // update event that would start the next attempt at once, bypassing the retry backoff);
    // a new request from gardenlet (operation annotation) gets a fresh lastUpdateTime.
    const alreadyStored =
      previous === description && operation?.state === 'Error' && operation.type === type && ext.status?.['observedGeneration'] === ext.metadata.generation;
    if (alreadyStored && ext.metadata.annotations?.[OPERATION_ANNOTATION] === undefined) return;
    const now = this.deps.now();
    await this.deps.client.patchStatus(extensionRef(ext), {
      lastOperation: lastOperation(type, 'Error', description, now),
      lastError: { description, ...(configuration ? { codes: [ERR_CONFIGURATION_PROBLEM] } : {}), lastUpdateTime: now.toISOString() },
      observedGeneration: ext.metadata.generation ?? null,
    });
    if (previous !== description) await this.deps.warn(ext, configuration ? 'InvalidACL' : 'ACLNotApplied', description);
  }

  /**
   * Converges the stored ManagedResource on the desired one: written when it is missing or differs
   * in anything we set (a foreign edit or delete comes back), its Secret created again when the
   * resource manager reports it could not apply it (a deleted Secret). Unchanged: no write.
   */
  private async writeManagedResource(namespace: string, filters: Parameters<typeof managedResourceObjects>[1]): Promise<void> {
    const { client } = this.deps;
    const desired = managedResourceObjects(namespace, filters);
    const check = checkStoredManagedResource(await client.get(MR_REF(namespace)), desired.managedResource);
    if (check.upToDate && !check.notApplied) return;
    // Add before remove: the new Secret exists before the ManagedResource names it.
    await client.createIfAbsent(desired.secret);
    if (!check.upToDate) await client.apply(desired.managedResource);
    for (const old of check.previousSecrets) {
      await client.delete({ apiVersion: 'v1', kind: 'Secret', name: old, namespace });
    }
  }

  /**
   * Gardener's legacy apiserver-proxy EnvoyFilters (< 1.123) get the shoot's RBAC filter from
   * the mutating webhook, which only runs when they are written: an empty merge patch makes
   * the API server admit them again with the ACL the Extension now records (or without it, when
   * the Extension is going away). Filters that do not exist (newer Gardener) are skipped
   * without a write.
   *
   * The webhook runs in another process with its own cache, which may still hold the previous ACL
   * (or none): the admitted object is read back and checked against `expected`. Returns the
   * filters that do not carry exactly the RBAC filter `expected` calls for.
   */
  async triggerLegacyProxyFilters(technicalID: string, gatewayNamespaces: readonly string[], expected: LegacyProxyAcl | undefined): Promise<string[]> {
    const unverified: string[] = [];
    for (const namespace of gatewayNamespaces) {
      for (const name of legacyProxyFilterNames(technicalID)) {
        const ref: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name, namespace };
        if (!(await this.deps.client.get(ref))) continue;
        try {
          await this.deps.client.mergePatch(ref, {});
        } catch (error) {
          if (isNotFound(error)) continue;
          throw error;
        }
        const admitted = await this.deps.client.get(ref);
        if (!admitted) continue;
        const stillToDo = legacyProxyPatch(admitted, (id) => (id === technicalID ? expected : undefined), this.deps.operator.legacyProxyPort);
        if (stillToDo.length > 0) unverified.push(`${namespace}/${name}`);
      }
    }
    return unverified;
  }

  /** Delete and migrate: the shoot's filters disappear here; migrate keeps status.state for restore. */
  private async remove(ext: Extension, type: 'Delete' | 'Migrate', force: boolean): Promise<ReconcileOutcome> {
    const { client } = this.deps;
    if (!hasFinalizer(ext) && type === 'Delete') return DONE;
    const namespace = ext.metadata.namespace;
    const last = ext.status?.['lastOperation'] as { type?: string; state?: string } | undefined;
    if (hasFinalizer(ext) && (last?.type !== type || last.state !== 'Processing')) {
      await client.patchStatus(extensionRef(ext), {
        lastOperation: lastOperation(type, 'Processing', type === 'Delete' ? 'Deleting the ACL filters' : 'Removing the ACL filters from this seed', this.deps.now()),
      });
    }
    const current = await client.get(MR_REF(namespace));
    if (current) {
      if (!(current['metadata'] as { deletionTimestamp?: string }).deletionTimestamp) {
        // Only now may the resource manager delete the filters with the ManagedResource.
        if ((current['spec'] as { keepObjects?: boolean } | undefined)?.keepObjects !== false) {
          await client.mergePatch(MR_REF(namespace), { spec: { keepObjects: false } });
        }
        await client.delete(MR_REF(namespace));
        for (const ref of ((current['spec'] as { secretRefs?: { name: string }[] } | undefined)?.secretRefs ?? [])) {
          await client.delete({ apiVersion: 'v1', kind: 'Secret', name: ref.name, namespace });
        }
      }
      // The resource manager deletes the applied filters, then its finalizer: until the
      // ManagedResource is gone the filters may still be stored, and the Extension stays (its
      // informer brings the Extension back here when the ManagedResource goes).
      if (!force) return { kind: 'retry', reason: `waiting for gardener-resource-manager to delete the filters of ManagedResource ${namespace}/${MANAGED_RESOURCE_NAME}` };
    }
    // The finalizer goes only once no stored combined filter holds the shoot. The rebuild itself
    // runs under the work queue's single combined key, never from here: two computations racing
    // could otherwise store the older one last.
    if (!force && this.deps.combinedHolds(namespace)) {
      this.deps.awaitCombined(ext);
      this.deps.combinedChanged();
      return { kind: 'retry', reason: 'waiting for the combined CONNECT filters to drop this shoot' };
    }
    const recorded = stateSchema.safeParse(ext.status?.['state'] ?? {});
    // A ManagedResource someone else deleted kept its filters (keepObjects): they go now.
    for (const gatewayNamespace of recorded.success ? recorded.data.gatewayNamespaces : []) {
      await client.delete({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: shootFilterName(namespace), namespace: gatewayNamespace });
    }
    // Taking the RBAC filter out is not a protection: a lagging webhook that keeps it only delays that.
    await this.triggerLegacyProxyFilters(namespace, recorded.success ? recorded.data.gatewayNamespaces : [], undefined);
    if (type === 'Migrate') {
      await client.patchStatus(extensionRef(ext), {
        lastOperation: lastOperation('Migrate', 'Succeeded', 'ACL filters removed from this seed', this.deps.now()),
        lastError: null,
      });
      await client.mergePatch(extensionRef(ext), { metadata: { annotations: { [OPERATION_ANNOTATION]: null } } });
    } else if (hasFinalizer(ext)) {
      if (force) this.deps.combinedChanged();
      await client.patchStatus(extensionRef(ext), {
        lastOperation: lastOperation('Delete', 'Succeeded', force ? 'ACL filters deleted (force-deletion)' : 'ACL filters deleted', this.deps.now()),
        lastError: null,
      });
    }
    if (hasFinalizer(ext)) await client.jsonPatch(extensionRef(ext), removeFinalizer(ext));
    this.written.delete(`${namespace}/${ext.metadata.name}`);
    this.log(ext).info({ operation: type }, 'ACL removed from this seed');
    return DONE;
  }
}
