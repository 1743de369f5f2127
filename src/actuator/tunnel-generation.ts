// When a shoot's tunnel hops get a new generation (which closes its established VPN tunnels):
// when the CONNECT filters as stored now admit fewer clients than some ACL a tunnel may have been
// admitted under since the last raise. Two rules keep that from being too early or too late:
// - The hop takes the raise only once the stored CONNECT filters hold the tightened ACL. Raised
//   earlier, the closed tunnels could reconnect under the old filters and keep going. The raise is
//   recorded with the tightened ACL (`raiseFrom`: the generation the hop keeps meanwhile), and the
//   combined syncer moves the hop as soon as it sees the filters hold it (hopGeneration): one
//   reconcile records, the next finds the hop raised, none sits in between.
// - Loosenings are remembered (`admitted` widens) and do not raise; a later tightening is compared
//   with the widest ACL since the last raise, so loosen-then-tighten-back closes the tunnels opened
//   in between.
import { admitsFewer, type ConnectAdmission } from '../acl/admission-narrowing.js';
import { formatCidr } from '../acl/cidr.js';
import { cidrStringSchema } from '../acl/cidr-schema.js';
import { tunnelsSchema, type AppliedAcl, type RecordedTunnelState } from '../gardener/applied-state.js';
import type { Extension } from '../gardener/objects.js';
import { isRecord } from '../json/record.js';

export interface TunnelState {
  readonly generation: number;
  /** A raise not yet taken by the hop: it keeps this generation until the stored filters hold the ACL. */
  readonly raiseFrom?: number;
  /** The widest ACL the CONNECT filters may have admitted a tunnel under since `generation` was raised. */
  readonly admitted: ConnectAdmission;
}

/** Stands for "anyone may have been admitted": audit admits everyone. */
const EVERYONE: ConnectAdmission = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['0.0.0.0/0', '::/0'].map((c) => cidrStringSchema.parse(c)), mode: 'audit' }, alwaysAllowed: [] };

function admissionOf(acl: ConnectAdmission): ConnectAdmission {
  return { rule: acl.rule, alwaysAllowed: acl.alwaysAllowed };
}

/** An admission holding every client of both: one of them when it holds the other, else everyone. */
function widest(a: ConnectAdmission, b: ConnectAdmission): ConnectAdmission {
  if (!admitsFewer(b, a)) return a;
  if (!admitsFewer(a, b)) return admissionOf(b);
  return EVERYONE;
}

export interface TunnelInputs {
  /** status.state.tunnels before this reconcile, if any. */
  readonly previous: TunnelState | undefined;
  /** The ACL recorded before this reconcile (what the stored CONNECT filters were built from), if any. */
  readonly recordedBefore: AppliedAcl | undefined;
  /** The ACL computed now. */
  readonly now: AppliedAcl;
  /** Whether the stored CONNECT filters hold `now` on every path. */
  readonly stored: boolean;
}

export function nextTunnelState({ previous, recordedBefore, now, stored }: TunnelInputs): TunnelState {
  // Only the owner's rule decides: the always-allowed ranges follow the seed's and the shoot's
  // infrastructure, and a transient gap in them (egress CIDRs not yet reported) must not close
  // the shoot's own tunnels. Both sides are compared with today's always-allowed ranges.
  const asNow = (admission: ConnectAdmission): ConnectAdmission => ({ rule: admission.rule, alwaysAllowed: now.alwaysAllowed });
  if (previous === undefined) {
    // The hop is new, so no tunnel runs through it yet; until the filters hold `now`, one may be
    // admitted by what they held before (nothing, for a shoot's first ACL) or, partly written, by
    // `now`: those are closed by a raise the hop takes once the filters hold `now`.
    if (stored) return { generation: 1, admitted: admissionOf(now) };
    const admitted = widest(recordedBefore === undefined ? EVERYONE : asNow(recordedBefore), now);
    return admitsFewer(admitted, now) ? { generation: 2, raiseFrom: 1, admitted } : { generation: 1, admitted };
  }
  if (!stored) {
    // Partly written filters may admit by either ACL. A tightening is recorded now and taken by the
    // hop once `now` is stored everywhere; one raise pending covers any later tightening too.
    const admitted = widest(asNow(previous.admitted), now);
    if (previous.raiseFrom !== undefined) return { generation: previous.generation, raiseFrom: previous.raiseFrom, admitted };
    if (admitsFewer(asNow(previous.admitted), now)) return { generation: previous.generation + 1, raiseFrom: previous.generation, admitted };
    return { generation: previous.generation, admitted };
  }
  // Stored: a pending raise is due now (the hop may take it), else raise if `now` is tighter.
  if (previous.raiseFrom !== undefined) return { generation: previous.generation, admitted: admissionOf(now) };
  return { generation: previous.generation + (admitsFewer(asNow(previous.admitted), now) ? 1 : 0), admitted: admissionOf(now) };
}

/** What status.state records of a shoot's tunnels that the hop's chain depends on. */
export interface RecordedHopGeneration {
  readonly generation: number;
  readonly raiseFrom?: number;
}

/**
 * The generation the shoot's hop chain is written with: the recorded one, or, while a recorded
 * raise waits for the CONNECT filters (`filtersHold` false), the one it is raised from. A chain
 * stored at the raised generation already stays there: lowering it would close the tunnels again.
 */
export function hopGeneration(recorded: RecordedHopGeneration, storedChain: number | undefined, filtersHold: boolean): number {
  if (recorded.raiseFrom === undefined || filtersHold) return recorded.generation;
  return Math.min(recorded.generation, Math.max(recorded.raiseFrom, storedChain ?? recorded.raiseFrom));
}

/**
 * status.state.tunnels as recorded; undefined when absent. An unreadable entry counts as "anyone
 * may have been admitted" at the generation it names (else 1), so the next stored reconcile raises
 * it: the hops drain once rather than keep tunnels nobody can vouch for.
 */
export function tunnelStateFromRecord(recorded: unknown): TunnelState | undefined {
  if (recorded === undefined) return undefined;
  const parsed = tunnelsSchema.safeParse(recorded);
  if (parsed.success) return { generation: parsed.data.generation, ...(parsed.data.raiseFrom !== undefined ? { raiseFrom: parsed.data.raiseFrom } : {}), admitted: parsed.data.admitted };
  const generation = tunnelsSchema.pick({ generation: true }).safeParse(recorded);
  return { generation: generation.success ? generation.data.generation : 1, admitted: EVERYONE };
}

/** The tunnel generation an Extension's status.state records (with a raise not yet taken); undefined when it records none (tunnelRevocation none). */
export function recordedTunnelGeneration(ext: Pick<Extension, 'status'>): RecordedHopGeneration | undefined {
  const state = ext.status?.['state'];
  const tunnels = isRecord(state) ? tunnelStateFromRecord(state['tunnels']) : undefined;
  if (tunnels === undefined) return undefined;
  return tunnels.raiseFrom === undefined ? { generation: tunnels.generation } : { generation: tunnels.generation, raiseFrom: tunnels.raiseFrom };
}

/** The state as status.state records it. */
export function recordedTunnelState(state: TunnelState): RecordedTunnelState {
  const { rule, alwaysAllowed } = state.admitted;
  return {
    generation: state.generation,
    ...(state.raiseFrom !== undefined ? { raiseFrom: state.raiseFrom } : {}),
    admitted: { rule: { action: rule.action, type: rule.type, cidrs: rule.cidrs.map(formatCidr), mode: rule.mode }, alwaysAllowed: alwaysAllowed.map(formatCidr) },
  };
}
