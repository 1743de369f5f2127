// Gardener's extension contract for an `Extension` resource (gardener-seed-networking.md 11.1):
// operation annotations, finalizer, lastOperation/lastError/observedGeneration.
import type { Extension } from './objects.js';

export const FINALIZER = 'extensions.gardener.cloud/acl';
export const OPERATION_ANNOTATION = 'gardener.cloud/operation';
export const Operation = { reconcile: 'reconcile', migrate: 'migrate', restore: 'restore', waitForState: 'wait-for-state' } as const;

export type OperationType = 'Create' | 'Reconcile' | 'Delete' | 'Migrate' | 'Restore';
export type OperationState = 'Processing' | 'Succeeded' | 'Error' | 'Failed';

export interface LastOperation {
  readonly type: OperationType;
  readonly state: OperationState;
  readonly progress: number;
  readonly description: string;
  readonly lastUpdateTime: string;
}

export interface LastError {
  readonly description: string;
  readonly codes?: readonly string[];
  readonly lastUpdateTime: string;
}

/** Gardener's error code for problems only the user can fix. */
export const ERR_CONFIGURATION_PROBLEM = 'ERR_CONFIGURATION_PROBLEM';

function annotation(ext: Extension): string | undefined {
  return ext.metadata.annotations?.[OPERATION_ANNOTATION];
}

interface StatusView {
  readonly lastOperation?: { readonly type?: string; readonly state?: string } | null;
  readonly observedGeneration?: number | null;
}

function statusOf(ext: Extension): StatusView {
  return (ext.status ?? {}) as StatusView;
}

/** Gardener's ComputeOperationType: which operation the next action of the controller is. */
export function operationType(ext: Extension): OperationType {
  const op = annotation(ext);
  if (op === Operation.migrate) return 'Migrate';
  if (ext.metadata.deletionTimestamp) return 'Delete';
  if (op === Operation.restore) return 'Restore';
  const last = statusOf(ext).lastOperation;
  if (!last?.type) return 'Create';
  // An unfinished Create/Migrate/Restore keeps its type until it succeeds.
  if (last.state !== 'Succeeded' && (last.type === 'Create' || last.type === 'Migrate' || last.type === 'Restore')) return last.type;
  return 'Reconcile';
}

export function isWaitingForState(ext: Extension): boolean {
  return annotation(ext) === Operation.waitForState;
}

/** Migrated away from this seed; nothing to do until gardenlet deletes it or asks for a restore. */
export function isMigrated(ext: Extension): boolean {
  const last = statusOf(ext).lastOperation;
  return last?.type === 'Migrate' && last.state === 'Succeeded' && annotation(ext) !== Operation.restore;
}

/**
 * Whether gardenlet is waiting for this controller to report: an operation annotation, a
 * generation not yet observed, or a last operation that did not succeed. Otherwise a reconcile
 * only writes what actually changed.
 */
export function isRequested(ext: Extension): boolean {
  const status = statusOf(ext);
  return (
    annotation(ext) !== undefined ||
    status.lastOperation?.state !== 'Succeeded' ||
    (status.observedGeneration ?? undefined) !== ext.metadata.generation
  );
}

/**
 * Whether gardenlet's Extension Wait is running for this object now: an operation it annotated, a
 * new generation it wrote, or a deletion. (isRequested also counts a last operation that did not
 * succeed, which a retry with backoff serves; that is not worth overtaking a resync.)
 */
export function gardenletWaits(ext: Extension): boolean {
  const status = statusOf(ext);
  return annotation(ext) !== undefined || Boolean(ext.metadata.deletionTimestamp) || (status.observedGeneration ?? undefined) !== ext.metadata.generation;
}

export function hasFinalizer(ext: Extension): boolean {
  return (ext.metadata as { finalizers?: string[] }).finalizers?.includes(FINALIZER) ?? false;
}

export function lastOperation(type: OperationType, state: OperationState, description: string, now: Date): LastOperation {
  return { type, state, progress: state === 'Succeeded' ? 100 : state === 'Processing' ? 50 : 0, description, lastUpdateTime: now.toISOString() };
}
