// A rate-limited work queue with client-go workqueue semantics (k8s.io/client-go/util/workqueue):
//
// - `dirty` holds keys that need processing, `processing` the keys a worker holds. A key is in the
//   FIFO at most once (repeated adds coalesce) and never handed to two workers at once: a key
//   added while it is processed is queued again when done() is called for it.
// - addAfter() parks keys until their time; a key parked twice keeps the earlier time.
// - addRateLimited() = addAfter(key, max(per-key exponential backoff, token bucket)); forget()
//   resets the key's backoff after a success. addBackedOff() uses the per-key backoff alone.
// - shutDown() stops accepting keys; get() hands out what is still queued, then resolves with
//   undefined.
// - Unlike client-go's FIFO, a key added as urgent (someone is waiting for its result) is handed
//   out before every key that is not, even one already queued behind thousands of resyncs.
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { WorkQueueMetrics } from './metrics.js';
import { ControllerRateLimiter, type RateLimiterOptions } from './rate-limiter.js';

export type { WorkQueueMetrics } from './metrics.js';
export type { RateLimiterOptions } from './rate-limiter.js';

export interface WorkQueueOptions {
  /** Label value of the queue's metrics (default 'default'). */
  name?: string;
  rateLimiter?: RateLimiterOptions;
  metrics?: WorkQueueMetrics;
  /** Clock in ms, for tests (default Date.now). */
  now?: () => number;
}

export class WorkQueue {
  private readonly name: string;
  private readonly now: () => number;
  private readonly metrics: WorkQueueMetrics | undefined;
  private readonly limiter: ControllerRateLimiter;

  private readonly queue: string[] = [];
  /** Handed out before `queue`; see add(). */
  private readonly urgentQueue: string[] = [];
  /** Dirty keys that go to the urgent lane when (re)queued. */
  private readonly urgent = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  /** get() calls waiting for a key; only non-empty while the queue is empty. */
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  /** When each dirty key was added, for the queue latency metric. */
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  /** Keys parked by addAfter(), with the time they become due. */
  private readonly parked = new Map<string, number>();
  private parkTimer: NodeJS.Timeout | undefined;
  private parkTimerDue = Infinity;
  private shuttingDown = false;
  private readonly drainWaiters: (() => void)[] = [];

  constructor(options: WorkQueueOptions = {}) {
    this.name = options.name ?? 'default';
    this.now = options.now ?? (() => Date.now());
    this.metrics = options.metrics;
    this.limiter = new ControllerRateLimiter(options.rateLimiter, this.now);
  }

  /**
   * `urgent`: a caller waits for this key (an operation it requested); it overtakes every key
   * queued without it. A key already queued without it moves ahead.
   */
  add(key: string, urgent = false): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) {
      if (!urgent || this.urgent.has(key)) return;
      this.urgent.add(key);
      const at = this.queue.indexOf(key);
      if (at >= 0) {
        this.queue.splice(at, 1);
        this.urgentQueue.push(key);
      }
      return;
    }
    this.metrics?.adds(this.name);
    this.dirty.add(key);
    if (urgent) this.urgent.add(key);
    this.addedAt.set(key, this.now());
    // A key being processed is queued again by done().
    if (!this.processing.has(key)) this.enqueue(key);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const due = this.now() + delayMs;
    const current = this.parked.get(key);
    if (current !== undefined && current <= due) return;
    this.parked.set(key, due);
    this.armParkTimer();
  }

  /** Retries the key after its backoff, and never sooner than `minDelayMs` (a server's Retry-After). */
  addRateLimited(key: string, minDelayMs = 0): void {
    if (this.shuttingDown) return;
    this.metrics?.retries(this.name);
    this.addAfter(key, Math.max(minDelayMs, this.limiter.when(key)));
  }

  /**
   * Looks at the key again after its own backoff, without a token of the queue-wide bucket: for a
   * key that waits for something else (an event brings it back sooner). Thousands of shoots
   * waiting at once (a cold start) must not run up a debt that delays the retries of keys that failed.
   */
  addBackedOff(key: string): void {
    if (this.shuttingDown) return;
    this.addAfter(key, this.limiter.itemDelay(key));
  }

  forget(key: string): void {
    this.limiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.limiter.numRequeues(key);
  }

  /** The next key; undefined once shut down and nothing is left in the queue. */
  get(): Promise<string | undefined> {
    const key = this.urgentQueue.shift() ?? this.queue.shift();
    // Handed out in a turn of the event loop of its own: a reconcile that finds everything in
    // place awaits only settled promises, so a queue of them would otherwise run as one chain of
    // microtasks, and the lease renewal, probes and watch events would wait for all of them
    // (bench/soak.ts: 100 such shoots held the event loop for 10.9 s and the leader lost its lease).
    if (key !== undefined) return yieldToEventLoop(this.startProcessing(key));
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    if (!this.processing.delete(key)) return;
    const started = this.startedAt.get(key);
    this.startedAt.delete(key);
    if (started !== undefined) this.metrics?.workDurationSeconds(this.name, (this.now() - started) / 1000);
    if (this.dirty.has(key)) this.enqueue(key);
    this.notifyIfDrained();
  }

  /** Keys waiting in the FIFO (not those parked by addAfter, nor those being processed). */
  len(): number {
    return this.queue.length + this.urgentQueue.length;
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    this.parked.clear();
    this.disarmParkTimer();
    // Waiters only exist while the queue is empty, so they can all be released.
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
    this.notifyIfDrained();
  }

  /** shutDown() and wait until every queued key was handed out and marked done. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.isDrained()) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private enqueue(key: string): void {
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter(this.startProcessing(key));
      return;
    }
    (this.urgent.has(key) ? this.urgentQueue : this.queue).push(key);
    this.metrics?.depth(this.name, this.len());
  }

  private startProcessing(key: string): string {
    const now = this.now();
    this.processing.add(key);
    this.dirty.delete(key);
    this.urgent.delete(key);
    const added = this.addedAt.get(key);
    this.addedAt.delete(key);
    this.startedAt.set(key, now);
    this.metrics?.depth(this.name, this.len());
    if (added !== undefined) this.metrics?.latencySeconds(this.name, (now - added) / 1000);
    return key;
  }

  private isDrained(): boolean {
    return this.len() === 0 && this.processing.size === 0;
  }

  private notifyIfDrained(): void {
    if (this.shuttingDown && this.isDrained()) for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  // One timer for the earliest parked key. A linear scan is fine for the few thousand keys a
  // seed has; a heap would only pay off far beyond that.
  private armParkTimer(): void {
    let due = Infinity;
    for (const t of this.parked.values()) due = Math.min(due, t);
    if (due === this.parkTimerDue) return;
    this.disarmParkTimer();
    if (due === Infinity) return;
    this.parkTimerDue = due;
    this.parkTimer = setTimeout(() => this.releaseDue(), Math.max(0, due - this.now()));
  }

  private disarmParkTimer(): void {
    if (this.parkTimer !== undefined) clearTimeout(this.parkTimer);
    this.parkTimer = undefined;
    this.parkTimerDue = Infinity;
  }

  private releaseDue(): void {
    this.parkTimer = undefined;
    this.parkTimerDue = Infinity;
    const now = this.now();
    const due = [...this.parked].filter(([, t]) => t <= now).sort((a, b) => a[1] - b[1]);
    for (const [key] of due) {
      this.parked.delete(key);
      this.add(key);
    }
    this.armParkTimer();
  }
}
