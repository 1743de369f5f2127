// When the seed-wide combined sync may run (a pace of twice the last sync's time, failed ones
// included, capped so a slow server cannot hold shoots back for minutes), and when it may change
// a stored CONNECT listener (the operator's least interval). A repair waits for neither.
import { describe, expect, it } from 'vitest';
import { MAX_COMBINED_PACE_MS, combinedSyncDelay, listenerWriteDelay } from '../../src/actuator/combined-pace.js';

describe('combinedSyncDelay', () => {
  it('runs at once before the first sync', () => {
    expect(combinedSyncDelay(1_000, undefined, false)).toBeLessThanOrEqual(0);
  });

  it('waits twice the last sync’s time after it ended', () => {
    expect(combinedSyncDelay(10_000, { endedAt: 10_000, tookMs: 400 }, false)).toBe(800);
    expect(combinedSyncDelay(10_500, { endedAt: 10_000, tookMs: 400 }, false)).toBe(300);
    expect(combinedSyncDelay(10_800, { endedAt: 10_000, tookMs: 400 }, false)).toBe(0);
  });

  it('caps the pace: a 70 s sync (a loaded API server) holds the next one for 30 s, not 140 s', () => {
    expect(combinedSyncDelay(100_000, { endedAt: 100_000, tookMs: 70_000 }, false)).toBe(MAX_COMBINED_PACE_MS);
    expect(MAX_COMBINED_PACE_MS).toBe(30_000);
  });

  it('a repair runs at once whatever the pace', () => {
    expect(combinedSyncDelay(100_000, { endedAt: 100_000, tookMs: 70_000 }, true)).toBeLessThanOrEqual(0);
  });
});

describe('listenerWriteDelay', () => {
  it('holds a listener change until the least interval after the last one', () => {
    expect(listenerWriteDelay(5_000, 1_000, 60_000, false)).toBe(56_000);
    expect(listenerWriteDelay(61_000, 1_000, 60_000, false)).toBe(0);
    expect(listenerWriteDelay(5_000, undefined, 60_000, false)).toBeLessThanOrEqual(0);
  });

  it('a repair never waits: a foreign delete 10 s after an ACL change is written at once (issue 29: it waited 50 s)', () => {
    expect(listenerWriteDelay(100_000, 90_000, 60_000, true)).toBeLessThanOrEqual(0);
  });
});
