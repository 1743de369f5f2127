// Backoff arithmetic and an abortable sleep, shared by the informer, the rate limiter and the
// leader elector.

/** base · 2^attempt, capped at max (attempt 0 → base). Safe for any attempt count. */
export function exponentialDelay(baseMs: number, maxMs: number, attempt: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 64));
}

/**
 * exponentialDelay with "equal jitter": a random point in [d/2, d]. Clients that failed at the same
 * moment (an API server restart) then do not all retry in the same instant.
 */
export function jitteredDelay(baseMs: number, maxMs: number, attempt: number, random: () => number = Math.random): number {
  const delay = exponentialDelay(baseMs, maxMs, attempt);
  return delay / 2 + (random() * delay) / 2;
}

/** Resolves after `ms`, or early (without error) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener('abort', done, { once: true });
  });
}
