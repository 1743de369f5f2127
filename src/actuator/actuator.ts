// The split Gardener's extension library makes (extensions/pkg/controller/extension): a generic
// reconciler owns the contract (operation type, finalizers, operation annotations, the
// Processing/Error/Succeeded status around every call) and an Actuator does the extension's own
// work. The Actuator never writes the Extension; it reports what it achieved.
import type { Extension } from '../gardener/objects.js';

/**
 * `done`: the operation's work is finished; `state` (when given) is recorded in status.state.
 * `pending`: the work is under way but not yet in force (for example the combined filters do not
 * hold the new ACL yet); the Extension stays Processing with `state` recorded, and the reconciler
 * retries. `problem`, when known, says why it cannot get there and is reported as an Error.
 */
export type ActuatorResult =
  /** `description`: the Succeeded lastOperation's, when it must say more than that the ACL is applied. */
  | { readonly kind: 'done'; readonly state?: Record<string, unknown>; readonly description?: string }
  | { readonly kind: 'pending'; readonly reason: string; readonly state?: Record<string, unknown>; readonly problem?: string };

/**
 * A failure the Actuator has described for the shoot owner or operator. `configuration`: only the
 * user can fix it (Gardener's ERR_CONFIGURATION_PROBLEM, not retried until the Extension changes).
 */
export class ReportedProblem extends Error {
  constructor(
    message: string,
    readonly configuration: boolean,
  ) {
    super(message);
    this.name = 'ReportedProblem';
  }
}

export interface Actuator {
  reconcile(ext: Extension): Promise<ActuatorResult>;
  /** After a migration: reconcile from what status.state recorded on the previous seed. */
  restore(ext: Extension): Promise<ActuatorResult>;
  delete(ext: Extension): Promise<ActuatorResult>;
  /** The shoot carries Gardener's force-deletion confirmation: clean up without waiting on broken dependencies. */
  forceDelete(ext: Extension): Promise<ActuatorResult>;
  /** Removes this seed's objects; status.state stays for the restore on the next seed. */
  migrate(ext: Extension): Promise<ActuatorResult>;
}
