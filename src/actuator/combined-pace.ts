// When the seed-wide combined sync may run next, and whether it may change the CONNECT listeners.
// Its times come from one monotonic clock (performance.now()), so a step of the wall clock neither
// delays nor hurries it.

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
 * Milliseconds until the next combined sync may start (≤ 0: now): no sooner than twice the last
 * sync's time after it. A sync costs O(shoots), so the combined lane takes at most a third of the
 * time however often shoots change, and the shoots' own reconciles keep going; its writes (large
 * objects) leave the API server room in the same way. A repair of a foreign delete or edit is
 * never paced (`repair`): the pace spreads our own work, it must not stretch a gap in protection.
 */
export function combinedSyncDelay(now: number, pace: CombinedPace | undefined, repair: boolean): number {
  if (repair || pace === undefined) return -Infinity;
  return pace.endedAt + Math.min(2 * pace.tookMs, MAX_COMBINED_PACE_MS) - now;
}

/**
 * Milliseconds until a sync may write something that changes the CONNECT listeners (≤ 0: now).
 * Every such write makes Envoy drain every tunnel on them (docs/developers/envoy-listener-updates.md), so the
 * operator's least interval coalesces them; writes that change no listener (ECDS buckets) and
 * repairs never wait for it.
 */
export function listenerWriteDelay(now: number, lastListenerWriteAt: number | undefined, minIntervalMs: number, repair: boolean): number {
  if (repair || lastListenerWriteAt === undefined) return -Infinity;
  return lastListenerWriteAt + minIntervalMs - now;
}
