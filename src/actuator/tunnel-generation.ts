// When a shoot's tunnel hops get a new generation (which closes its established VPN tunnels):
// when the CONNECT filters as stored now admit fewer clients than some ACL a tunnel may have been
// admitted under since the last raise. Two rules keep that from being too early or too late:
// - The raise waits until the stored CONNECT filters hold the tightened ACL. Raised earlier, the
//   closed tunnels could reconnect under the old filters and keep going.
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
    // admitted by what they held before (nothing, for a shoot's first ACL) or, partly written, by `now`.
    return { generation: 1, admitted: stored ? admissionOf(now) : widest(recordedBefore === undefined ? EVERYONE : asNow(recordedBefore), now) };
  }
  // Partly written filters may admit by either ACL; the raise waits until `now` is stored everywhere.
  if (!stored) return { generation: previous.generation, admitted: widest(asNow(previous.admitted), now) };
  return { generation: previous.generation + (admitsFewer(asNow(previous.admitted), now) ? 1 : 0), admitted: admissionOf(now) };
}

/**
 * status.state.tunnels as recorded; undefined when absent. An unreadable entry counts as "anyone
 * may have been admitted" at the generation it names (else 1), so the next stored reconcile raises
 * it: the hops drain once rather than keep tunnels nobody can vouch for.
 */
export function tunnelStateFromRecord(recorded: unknown): TunnelState | undefined {
  if (recorded === undefined) return undefined;
  const parsed = tunnelsSchema.safeParse(recorded);
  if (parsed.success) return { generation: parsed.data.generation, admitted: parsed.data.admitted };
  const generation = tunnelsSchema.pick({ generation: true }).safeParse(recorded);
  return { generation: generation.success ? generation.data.generation : 1, admitted: EVERYONE };
}

/** The tunnel generation an Extension's status.state records; undefined when it records none (tunnelRevocation none). */
export function recordedTunnelGeneration(ext: Pick<Extension, 'status'>): number | undefined {
  const state = ext.status?.['state'];
  return isRecord(state) ? tunnelStateFromRecord(state['tunnels'])?.generation : undefined;
}

/** The state as status.state records it. */
export function recordedTunnelState(state: TunnelState): RecordedTunnelState {
  const { rule, alwaysAllowed } = state.admitted;
  return {
    generation: state.generation,
    admitted: { rule: { action: rule.action, type: rule.type, cidrs: rule.cidrs.map(formatCidr), mode: rule.mode }, alwaysAllowed: alwaysAllowed.map(formatCidr) },
  };
}
