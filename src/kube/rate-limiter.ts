// controller-runtime's default controller rate limiter (client-go workqueue
// DefaultTypedControllerRateLimiter): the larger of a per-item exponential backoff and an overall
// token bucket. The per-item part slows down one failing key; the bucket bounds the retry rate of
// the whole queue when many keys fail at once.
import { exponentialDelay } from './backoff.js';

export interface RateLimiterOptions {
  /** First per-item delay (default 5 ms); doubles on every failure of the same key. */
  baseDelayMs?: number;
  /** Per-item cap (default 1000 s). */
  maxDelayMs?: number;
  /** Token bucket refill rate (default 10 per second). */
  qps?: number;
  /** Token bucket size (default 100). */
  burst?: number;
}

/**
 * Token bucket with reservation semantics (golang.org/x/time/rate Reserve().Delay()): every call
 * takes a token, possibly one that only becomes available in the future, and returns how long
 * to wait for it.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly now: () => number,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  reserve(): number {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.qps) * 1000;
  }
}

export class ControllerRateLimiter {
  private readonly failures = new Map<string, number>();
  private readonly bucket: TokenBucket;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(options: RateLimiterOptions = {}, now: () => number = () => Date.now()) {
    this.baseDelayMs = options.baseDelayMs ?? 5;
    this.maxDelayMs = options.maxDelayMs ?? 1_000_000;
    this.bucket = new TokenBucket(options.qps ?? 10, options.burst ?? 100, now);
  }

  /** The delay before the key's next attempt; counts one more failure for the key. */
  when(key: string): number {
    return Math.max(this.itemDelay(key), this.bucket.reserve());
  }

  /** The per-item part of when() alone: counts one more attempt for the key and takes no token of the bucket. */
  itemDelay(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    return exponentialDelay(this.baseDelayMs, this.maxDelayMs, failures);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}
