// The bench's own API calls retried the way the controller's informers retry: a freshly started
// API server answers `429 storage is (re)initializing` for a while, and the bench must measure
// the controller, not die on its own first list.
import { apiStatusCode, describeError, retryAfterMs } from '../src/kube/errors.js';
import { jitteredDelay, sleep } from '../src/kube/backoff.js';

/** 429, 5xx and connection-level failures (no HTTP status) are worth another try. */
function transient(error: unknown): boolean {
  const code = apiStatusCode(error);
  return code === undefined || code === 429 || code >= 500;
}

/** Runs `call` until it succeeds, for at most `budgetMs`, backing off and honouring Retry-After. */
export async function withApiRetry<T>(what: string, call: () => Promise<T>, budgetMs = 120_000): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!transient(error) || Date.now() > deadline) throw error;
      const wait = Math.max(jitteredDelay(200, 5_000, attempt), retryAfterMs(error) ?? 0);
      console.error(`${what}: ${describeError(error)}; retrying in ${Math.round(wait)} ms`);
      await sleep(wait);
    }
  }
}
