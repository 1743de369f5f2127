// One API server's "slow down" for every request a process sends it (except watches, which the
// informer paces itself). A 429 or 503 with `Retry-After` pauses all requests until that time; then
// a single request probes, and the others follow only once the server answered it with anything
// but another pushback. Without this, each of the controller's workers retries on its own
// schedule and a throttled server sees N requests per Retry-After instead of one.
import { retryAfterMs } from './errors.js';

/** How long the others wait for one probe before another may go (a probe can hang up to its deadline). */
const PROBE_PATIENCE_MS = 2_000;

export class ServerPushback {
  /** Monotonic time (performance.now) before which nothing is sent. */
  private until = 0;
  private paused = false;
  private probe: { readonly ticket: PushbackTicket; readonly since: number; readonly done: Promise<void>; readonly end: () => void } | undefined;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Waits until a request may be sent. Resolves with a ticket to pass to settle() with the
   * request's outcome; rejects with the signal's reason when it aborts first.
   */
  async enter(signal?: AbortSignal): Promise<PushbackTicket> {
    for (;;) {
      signal?.throwIfAborted();
      const wait = this.until - this.now();
      if (wait > 0) {
        await abortableDelay(wait, signal);
        continue;
      }
      if (!this.paused) return { probe: false };
      if (this.probe) {
        const patience = this.probe.since + PROBE_PATIENCE_MS - this.now();
        if (patience > 0) {
          await abortableWait(Promise.race([this.probe.done, delay(patience)]), signal);
          continue;
        }
      }
      // No probe out, or it hangs: this request probes (the hanging one's answer still counts).
      const ticket: PushbackTicket = { probe: true };
      let end = () => {};
      const done = new Promise<void>((resolve) => (end = resolve));
      this.probe?.end();
      this.probe = { ticket, since: this.now(), done, end };
      return ticket;
    }
  }

  /**
   * Records the outcome of a request sent after enter(): the error, or undefined on success.
   * `aborted`: this side gave up on it (deadline, closed fence), so the server said nothing.
   */
  settle(ticket: PushbackTicket, error: unknown, aborted = isAbort(error)): void {
    const ms = pushbackMs(error);
    if (ms !== undefined) {
      this.until = Math.max(this.until, this.now() + ms);
      this.paused = true;
    } else if (ticket.probe && !aborted) {
      // The server answered: whatever it said, it no longer asks us to wait.
      this.paused = false;
    }
    if (this.probe?.ticket === ticket) {
      const { end } = this.probe;
      this.probe = undefined;
      end();
    }
  }

  /** Milliseconds until requests flow again (0 when not paused), for metrics and tests. */
  remainingMs(): number {
    return this.paused ? Math.max(0, this.until - this.now()) : 0;
  }

  /** Whether requests wait for a probe or a Retry-After right now. */
  isPaused(): boolean {
    return this.paused;
  }
}

export interface PushbackTicket {
  readonly probe: boolean;
}

function pushbackMs(error: unknown): number | undefined {
  return error === undefined ? undefined : retryAfterMs(error);
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}

function delay(ms: number): Promise<void> {
  return new Promise<void>((resolve) => setTimeout(resolve, ms));
}

function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  return abortableWait(elapsed, signal).finally(() => clearTimeout(timer));
}

function abortableWait(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void promise.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
