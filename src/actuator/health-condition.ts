// The Extension's ControlPlaneHealthy condition: whether the shoot's ACL is in force as stored on
// every path. gardenlet's shoot care merges it into the Shoot's own ControlPlaneHealthy condition
// (pkg/gardenlet/controller/shoot/care/health.go, getAllExtensionConditions →
// HealthChecker.CheckExtensionCondition): False becomes "<kind>UnhealthyReport" with our message,
// Progressing stays Progressing. It is what an operator sees on the Shoot when the combined
// CONNECT filters (outside any ManagedResource) do not hold a shoot on some gateway.
import type { Extension } from '../gardener/objects.js';
import type { ActuatorResult } from './actuator.js';
import { describeAbsentTargets, describeServedFaults, type ServedFault } from '../served/served-checker.js';

export const CONTROL_PLANE_HEALTHY = 'ControlPlaneHealthy';

export interface Condition {
  readonly type: string;
  readonly status: 'True' | 'False' | 'Unknown' | 'Progressing';
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
  readonly lastUpdateTime: string;
}

type Verdict = Pick<Condition, 'status' | 'reason' | 'message'>;

/** What a reconcile result says about the shoot's protection. */
export function protectionVerdict(result: ActuatorResult): Verdict {
  if (result.kind === 'done') return { status: 'True', reason: 'ACLInForce', message: 'The ACL is stored as recorded on every path and gateway.' };
  if (result.problem !== undefined) return { status: 'False', reason: 'ACLNotInForce', message: result.problem };
  // One message for the whole convergence (not the paths still missing, which shrink with every
  // stored shard): each change of it would be another status write.
  return { status: 'Progressing', reason: 'ACLConverging', message: 'The ACL is recorded and being stored on every path and gateway.' };
}

/**
 * A done reconcile's verdict with what the served check knows: False (ProtectionNotServed) when
 * some gateway pod serves the shoot without its filter or refuses it whole; a note when some
 * gateway could not be checked (what is stored is then all that is known).
 */
export function servedVerdict(verdict: Verdict, faults: readonly ServedFault[], unchecked: string | undefined, absent: readonly ServedFault[] = []): Verdict {
  if (faults.length > 0) return { status: 'False', reason: 'ProtectionNotServed', message: describeServedFaults(faults) };
  const notes = [...(unchecked !== undefined ? [`Not checked where it is served: ${unchecked}.`] : []), ...(absent.length > 0 ? [describeAbsentTargets(absent)] : [])];
  return notes.length === 0 ? verdict : { ...verdict, message: [verdict.message, ...notes].join(' ') };
}

function storedConditions(ext: Extension): Condition[] {
  const raw = ext.status?.['conditions'];
  return Array.isArray(raw) ? (raw as Condition[]) : [];
}

/**
 * The whole conditions list with ControlPlaneHealthy set to `verdict`, or undefined when the
 * stored one already says the same (no write). Other conditions are kept as stored.
 */
export function conditionsWith(ext: Extension, verdict: Verdict, now: Date): Condition[] | undefined {
  const stored = storedConditions(ext);
  const current = stored.find((c) => c.type === CONTROL_PLANE_HEALTHY);
  if (current && current.status === verdict.status && current.reason === verdict.reason && current.message === verdict.message) return undefined;
  const time = now.toISOString().replace(/\.\d+Z$/, 'Z');
  const next: Condition = {
    type: CONTROL_PLANE_HEALTHY,
    ...verdict,
    lastTransitionTime: current && current.status === verdict.status ? current.lastTransitionTime : time,
    lastUpdateTime: time,
  };
  return [...stored.filter((c) => c.type !== CONTROL_PLANE_HEALTHY), next];
}
