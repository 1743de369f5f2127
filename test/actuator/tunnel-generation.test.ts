// When a shoot's tunnel hop takes a new generation (closing its VPN tunnels): replayed over
// sequences of reconciles, each saying whether the stored CONNECT filters already hold the ACL
// computed then. The raise is recorded at once; the hop's chain (hopGeneration, as the combined
// syncer writes it) takes it only once the filters hold the ACL.
import { describe, expect, it } from 'vitest';
import { appliedFromState, stateSchema, type AppliedAcl } from '../../src/gardener/applied-state.js';
import { hopGeneration, nextTunnelState, recordedTunnelState, tunnelStateFromRecord, type TunnelState } from '../../src/actuator/tunnel-generation.js';

const ID = 'shoot--p--a';
function acl(action: 'ALLOW' | 'DENY', cidrs: string[], mode: 'enforce' | 'audit' = 'enforce', alwaysAllowed = ['10.250.0.0/16', '198.18.7.0/24']): AppliedAcl {
  const parsed = appliedFromState(ID, { applied: { rule: { action, type: 'remote_ip', cidrs, mode }, alwaysAllowed } });
  if (!parsed) throw new Error('unparsable');
  return parsed;
}

const WIDE = acl('ALLOW', ['203.0.113.0/24', '198.51.100.0/24']);
const NARROW = acl('ALLOW', ['203.0.113.0/24']);
const OTHER = acl('ALLOW', ['192.0.2.0/24']);

/** Replays reconciles: each step is the ACL computed and whether the filters hold it; returns what status.state records after each. */
function replayRecorded(first: AppliedAcl | undefined, steps: readonly (readonly [AppliedAcl, boolean])[]): TunnelState[] {
  let state: TunnelState | undefined;
  let recorded = first;
  const states: TunnelState[] = [];
  for (const [now, stored] of steps) {
    state = nextTunnelState({ previous: state, recordedBefore: recorded, now, stored });
    // What status.state keeps between reconciles: written and read back through the schema.
    state = tunnelStateFromRecord(stateSchema.parse({ tunnels: recordedTunnelState(state) }).tunnels);
    if (state === undefined) throw new Error('unreadable');
    recorded = now;
    states.push(state);
  }
  return states;
}

/** The generation of the hop's chain after each step: the combined syncer's reading of the record, with the filters holding the step's ACL or not. */
function replay(first: AppliedAcl | undefined, steps: readonly (readonly [AppliedAcl, boolean])[]): number[] {
  let chain: number | undefined;
  return replayRecorded(first, steps).map((state, i) => (chain = hopGeneration(state, chain, steps[i]?.[1] ?? false)));
}

describe('the tunnel generation', () => {
  it('starts at 1 and stays there while nothing is tightened', () => {
    expect(replay(undefined, [[WIDE, true], [WIDE, true], [WIDE, true]])).toEqual([1, 1, 1]);
  });

  it('rises on a tightening only once the stored filters hold it (raised earlier, a closed tunnel could reconnect under the old filters)', () => {
    expect(replay(undefined, [[WIDE, true], [NARROW, false], [NARROW, false], [NARROW, true], [NARROW, true]])).toEqual([1, 1, 1, 2, 2]);
  });

  it('records a tightening at once, with the generation the hop keeps until the filters hold it; the record drops it once they do', () => {
    const recorded = replayRecorded(undefined, [[WIDE, true], [NARROW, false], [NARROW, false], [NARROW, true]]).map((t) => [t.generation, t.raiseFrom]);
    expect(recorded).toEqual([[1, undefined], [2, 1], [2, 1], [2, undefined]]);
    // A second tightening while one raise waits: the one raise covers it.
    expect(replayRecorded(undefined, [[WIDE, true], [NARROW, false], [OTHER, false], [OTHER, true]]).map((t) => [t.generation, t.raiseFrom])).toEqual([[1, undefined], [2, 1], [2, 1], [2, undefined]]);
    // A shoot's first ACL not yet stored: the raise that closes the tunnels admitted meanwhile is recorded with it.
    expect(replayRecorded(undefined, [[NARROW, false]]).map((t) => [t.generation, t.raiseFrom])).toEqual([[2, 1]]);
  });

  it('the chain never goes back to the generation a raise starts from once it has taken the raise', () => {
    expect(hopGeneration({ generation: 3, raiseFrom: 2 }, 3, false)).toBe(3);
    expect(hopGeneration({ generation: 3, raiseFrom: 2 }, 2, false)).toBe(2);
    expect(hopGeneration({ generation: 3, raiseFrom: 2 }, undefined, false)).toBe(2);
    expect(hopGeneration({ generation: 3, raiseFrom: 2 }, 2, true)).toBe(3);
    expect(hopGeneration({ generation: 3 }, 2, false)).toBe(3);
  });

  it('does not rise on a loosening, stored or not', () => {
    expect(replay(undefined, [[NARROW, true], [WIDE, false], [WIDE, true]])).toEqual([1, 1, 1]);
  });

  it('loosened, then tightened back: rises (tunnels opened under the looser ACL are closed)', () => {
    expect(replay(undefined, [[NARROW, true], [WIDE, true], [NARROW, true]])).toEqual([1, 1, 2]);
  });

  it('loosened and tightened back before the filters held the looser ACL: still rises (partly written filters may have admitted by it)', () => {
    expect(replay(undefined, [[NARROW, true], [WIDE, false], [NARROW, true]])).toEqual([1, 1, 2]);
  });

  it('an unrelated range swapped in: rises', () => {
    expect(replay(undefined, [[NARROW, true], [OTHER, true]])).toEqual([1, 2]);
  });

  it('a shoot whose first ACL is not yet stored: the tunnels opened meanwhile (admitted by no ACL) are closed once it is', () => {
    expect(replay(undefined, [[NARROW, false], [NARROW, true]])).toEqual([1, 2]);
  });

  it('a shoot that had an ACL before the hop existed: compared with what the filters held', () => {
    expect(replay(WIDE, [[WIDE, false], [WIDE, true]])).toEqual([1, 1]);
    expect(replay(WIDE, [[NARROW, false], [NARROW, true]])).toEqual([1, 2]);
  });

  it('always-allowed ranges that shrink (egress CIDRs not yet reported) or grow do not raise: only the owner\'s rule does', () => {
    const withoutEgress = acl('ALLOW', ['203.0.113.0/24'], 'enforce', ['10.250.0.0/16']);
    expect(replay(undefined, [[NARROW, true], [withoutEgress, true], [NARROW, true], [withoutEgress, false], [withoutEgress, true]])).toEqual([1, 1, 1, 1, 1]);
    expect(replay(undefined, [[NARROW, true], [acl('ALLOW', ['203.0.113.0/25'], 'enforce', ['10.250.0.0/16']), true]])).toEqual([1, 2]);
  });

  it('an unreadable status.state.tunnels leaves the recorded ACL readable, and the next stored reconcile raises its generation (nobody vouches for the open tunnels)', () => {
    for (const [tunnels, expected] of [[{ generation: 0 }, 2], [{ generation: 4, admitted: 'garbage' }, 5], ['garbage', 2]] as const) {
      const state = { applied: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] }, alwaysAllowed: [] }, tunnels };
      expect(appliedFromState(ID, state)?.rule.cidrs).toHaveLength(1);
      const previous = tunnelStateFromRecord(stateSchema.parse(state).tunnels);
      expect(nextTunnelState({ previous, recordedBefore: NARROW, now: NARROW, stored: true }).generation, JSON.stringify(tunnels)).toBe(expected);
    }
    expect(tunnelStateFromRecord(undefined)).toBeUndefined();
  });

  it('audit to enforce rises; enforce to audit does not', () => {
    expect(replay(undefined, [[acl('ALLOW', ['203.0.113.0/24'], 'audit'), true], [NARROW, true], [acl('ALLOW', ['203.0.113.0/24'], 'audit'), true]])).toEqual([1, 2, 2]);
  });
});
