// When the seed-wide combined sync may run: the operator's least interval between writes, and a
// pace of twice the last sync's time (failed ones included), capped so a slow server cannot hold
// shoots back for minutes.
import { describe, expect, it } from 'vitest';
import { MAX_COMBINED_PACE_MS, combinedSyncDelay } from '../../src/actuator/combined-pace.js';

describe('combinedSyncDelay', () => {
  it('runs at once before the first sync and the first write', () => {
    expect(combinedSyncDelay(1_000, undefined, 60_000, undefined)).toBeLessThanOrEqual(0);
  });

  it('waits twice the last sync’s time after it ended', () => {
    expect(combinedSyncDelay(10_000, undefined, 0, { endedAt: 10_000, tookMs: 400 })).toBe(800);
    expect(combinedSyncDelay(10_500, undefined, 0, { endedAt: 10_000, tookMs: 400 })).toBe(300);
    expect(combinedSyncDelay(10_800, undefined, 0, { endedAt: 10_000, tookMs: 400 })).toBe(0);
  });

  it('caps the pace: a 70 s sync (a loaded API server) holds the next one for 30 s, not 140 s', () => {
    expect(combinedSyncDelay(100_000, undefined, 0, { endedAt: 100_000, tookMs: 70_000 })).toBe(MAX_COMBINED_PACE_MS);
    expect(MAX_COMBINED_PACE_MS).toBe(30_000);
  });

  it('honours the least interval between writes when it is the later of the two', () => {
    expect(combinedSyncDelay(5_000, 1_000, 60_000, { endedAt: 5_000, tookMs: 100 })).toBe(56_000);
    expect(combinedSyncDelay(70_000, 1_000, 60_000, { endedAt: 69_900, tookMs: 100 })).toBe(100);
  });
});
