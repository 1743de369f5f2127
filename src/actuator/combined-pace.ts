// When the seed-wide combined sync may run next. Its times come from one monotonic clock
// (performance.now()), so a step of the wall clock neither delays nor hurries it.

/**
 * The longest pause the pace imposes. A sync's time includes its writes, so a slow API server
 * stretches it; uncapped, one 70 s sync held the next (and the shoots waiting for it) for 140 s.
 */
export const MAX_COMBINED_PACE_MS = 30_000;

export interface CombinedPace {
  /** When the last sync ended, successful or not. */
  readonly endedAt: number;
  /** How long it took, writes included. */
  readonly tookMs: number;
}

/**
 * Milliseconds until the next combined sync may start (≤ 0: now). It honours the operator's least
 * interval between writes, and starts no sooner than twice the last sync's time after it: a sync
 * costs O(shoots), so the combined lane takes at most a third of the time however often shoots
 * change, and the shoots' own reconciles keep going; its writes (large objects) leave the API
 * server room in the same way. No pace (undefined) for a repair of a foreign delete or edit: the
 * pace spreads our own work, it must not stretch a gap in protection.
 */
export function combinedSyncDelay(now: number, lastWriteAt: number | undefined, minIntervalMs: number, pace: CombinedPace | undefined): number {
  const byInterval = lastWriteAt === undefined ? -Infinity : lastWriteAt + minIntervalMs;
  const byPace = pace === undefined ? -Infinity : pace.endedAt + Math.min(2 * pace.tookMs, MAX_COMBINED_PACE_MS);
  return Math.max(byInterval, byPace) - now;
}
