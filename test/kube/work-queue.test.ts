/**
 * WorkQueue: client-go workqueue semantics (coalescing, one worker per key, re-queue after done,
 * delays, rate limiting, shutdown). Pure; timers and Date are faked where time matters.
 */
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { createWorkQueueMetrics } from '../../src/kube/metrics.js';
import { ControllerRateLimiter } from '../../src/kube/rate-limiter.js';
import { WorkQueue } from '../../src/kube/work-queue.js';

/** Whether a promise has settled after pending microtasks ran. */
async function settled<T>(p: Promise<T>): Promise<{ done: boolean; value?: T }> {
  const marker = Symbol('pending');
  const value = await Promise.race([p, new Promise<typeof marker>((r) => setImmediate(() => r(marker)))]);
  return value === marker ? { done: false } : { done: true, value: value as T };
}

describe('WorkQueue basics', () => {
  it('coalesces keys that are waiting', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    q.add('ns/b');
    q.add('ns/a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('ns/a');
    expect(await q.get()).toBe('ns/b');
    expect(q.len()).toBe(0);
  });

  it('never hands one key to two workers; a key added while processed comes back once after done', async () => {
    const q = new WorkQueue();
    q.add('k');
    expect(await q.get()).toBe('k');
    q.add('k');
    q.add('k');
    expect(q.len()).toBe(0); // dirty, but held back while processing
    const second = q.get();
    expect((await settled(second)).done).toBe(false);
    q.done('k');
    expect(await settled(second)).toEqual({ done: true, value: 'k' });
    q.done('k');
    expect(q.len()).toBe(0);
    expect((await settled(q.get())).done).toBe(false);
    q.shutDown();
  });

  it('an urgent key overtakes a full resync already queued; a queued key added as urgent moves ahead; urgency ends when it is handed out', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 5_000; i++) q.add(`shoot-${i}`);
    q.add('gardenlet-waits', true);
    q.add('shoot-4999', true);
    q.add('shoot-4999', true);
    expect(q.len()).toBe(5_001);
    expect(await q.get()).toBe('gardenlet-waits');
    expect(await q.get()).toBe('shoot-4999');
    expect(await q.get()).toBe('shoot-0');
    // Added while processed: back in the lane it was last added to, after done().
    q.add('shoot-0', true);
    q.done('shoot-0');
    expect(await q.get()).toBe('shoot-0');
    q.done('shoot-0');
    q.add('shoot-0');
    expect(await q.get()).toBe('shoot-1');
    expect(q.len()).toBe(4_998);
  });

  it('hands out each queued key in a turn of the event loop of its own, so timers and I/O run between keys', async () => {
    const q = new WorkQueue();
    for (const key of ['a', 'b', 'c']) q.add(key);
    const order: string[] = [];
    setImmediate(() => order.push('a turn of the event loop'));
    for (let i = 0; i < 3; i++) {
      const key = String(await q.get());
      order.push(key);
      q.done(key);
    }
    // Chained as microtasks, all three keys came before any timer or I/O callback could run.
    expect(order).toEqual(['a turn of the event loop', 'a', 'b', 'c']);
  });

  it('a key done without re-add is not queued again', async () => {
    const q = new WorkQueue();
    q.add('k');
    await q.get();
    q.done('k');
    expect(q.len()).toBe(0);
  });

  it('a waiting get() receives the next added key', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.add('x');
    expect(await waiting).toBe('x');
  });

  it('shutDown wakes every waiting get() and ignores later adds', async () => {
    const q = new WorkQueue();
    const a = q.get();
    const b = q.get();
    q.shutDown();
    expect(await a).toBeUndefined();
    expect(await b).toBeUndefined();
    q.add('late');
    expect(q.len()).toBe(0);
    expect(await q.get()).toBeUndefined();
    expect(q.isShuttingDown()).toBe(true);
  });

  it('after shutDown, get() still drains what was queued, then returns undefined', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    q.shutDown();
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(await q.get()).toBeUndefined();
  });

  it('shutDownWithDrain resolves once the keys in flight are done', async () => {
    const q = new WorkQueue();
    q.add('a');
    const key = await q.get();
    const drained = q.shutDownWithDrain();
    expect((await settled(drained)).done).toBe(false);
    q.done(key ?? '');
    expect((await settled(drained)).done).toBe(true);
  });
});

describe('WorkQueue delays (fake timers)', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('addAfter releases keys in order of their due time; the earlier of two times wins', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 300);
    q.addAfter('b', 100);
    q.addAfter('c', 200);
    q.addAfter('d', 500);
    q.addAfter('d', 50); // earlier: wins
    q.addAfter('b', 400); // later: ignored
    expect(q.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(60);
    expect(q.len()).toBe(1);
    await vi.advanceTimersByTimeAsync(300);
    expect(q.len()).toBe(4);
    const order = [await q.get(), await q.get(), await q.get(), await q.get()];
    expect(order).toEqual(['d', 'b', 'c', 'a']);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(q.len()).toBe(0); // no leftovers from the superseded times
  });

  it('addAfter with a non-positive delay adds at once; shutDown drops parked keys', async () => {
    const q = new WorkQueue();
    q.addAfter('now', 0);
    expect(q.len()).toBe(1);
    q.addAfter('later', 100);
    q.shutDown();
    await vi.advanceTimersByTimeAsync(200);
    expect(await q.get()).toBe('now');
    expect(await q.get()).toBeUndefined();
  });

  it('addRateLimited backs off per key exponentially; forget resets', async () => {
    const q = new WorkQueue({ rateLimiter: { baseDelayMs: 100, maxDelayMs: 1_000 } });
    q.addRateLimited('k');
    expect(q.numRequeues('k')).toBe(1);
    await vi.advanceTimersByTimeAsync(99);
    expect(q.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(q.len()).toBe(1);
    q.done((await q.get()) ?? '');

    q.addRateLimited('k'); // second failure: 200 ms
    await vi.advanceTimersByTimeAsync(199);
    expect(q.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(q.len()).toBe(1);
    q.done((await q.get()) ?? '');

    q.forget('k');
    expect(q.numRequeues('k')).toBe(0);
    q.addRateLimited('k'); // back to 100 ms
    await vi.advanceTimersByTimeAsync(100);
    expect(q.len()).toBe(1);
  });

  it('addBackedOff waits for the key’s own backoff only, not for the tokens failed keys used up', async () => {
    const q = new WorkQueue();
    const drain = async () => {
      const handed: string[] = [];
      while (q.len() > 0) {
        const key = (await q.get()) ?? '';
        handed.push(key);
        q.done(key);
      }
      return handed;
    };
    // 300 failures at once: the bucket (burst 100, 10 per second) owes 20 s.
    for (let i = 0; i < 300; i++) q.addRateLimited(`failed${i}`);
    q.addBackedOff('waiting');
    await vi.advanceTimersByTimeAsync(5);
    const first = await drain();
    expect(first).toContain('waiting');
    expect(first).toHaveLength(101); // the burst's 100, and the waiting key
    q.addBackedOff('waiting'); // its second look: 10 ms
    q.addRateLimited('late'); // behind the debt: about 20 s
    await vi.advanceTimersByTimeAsync(10);
    expect(await drain()).toEqual(['waiting']); // the failed keys' next is due only at 100 ms
    await vi.advanceTimersByTimeAsync(15_000);
    const later = await drain();
    expect(later).not.toContain('late');
  });
});

describe('ControllerRateLimiter', () => {
  it('per-item delays are base·2^n capped at max, independent per key', () => {
    const limiter = new ControllerRateLimiter({ baseDelayMs: 5, maxDelayMs: 1_000, qps: 1e9, burst: 1e9 }, () => 0);
    const delays = Array.from({ length: 10 }, () => limiter.when('a'));
    expect(delays).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1_000, 1_000]);
    expect(limiter.when('b')).toBe(5);
    expect(limiter.numRequeues('a')).toBe(10);
    limiter.forget('a');
    expect(limiter.when('a')).toBe(5);
  });

  it('defaults match controller-runtime: 5 ms … 1000 s per item, 10 qps / burst 100 overall', () => {
    let now = 0;
    const limiter = new ControllerRateLimiter({}, () => now);
    // 100 different keys use up the burst without delay beyond the 5 ms per-item base.
    for (let i = 0; i < 100; i++) expect(limiter.when(`k${i}`)).toBe(5);
    // The 101st must wait for a token: 1/10 s; the 102nd for two.
    expect(limiter.when('k100')).toBeCloseTo(100, 6);
    expect(limiter.when('k101')).toBeCloseTo(200, 6);
    now += 1_000; // ten new tokens pay back the two owed and leave some to spare
    expect(limiter.when('k102')).toBe(5);
    const one = new ControllerRateLimiter({}, () => 0);
    let last = 0;
    for (let i = 0; i < 40; i++) last = one.when('x');
    expect(last).toBe(1_000_000);
  });
});

describe('WorkQueue metrics', () => {
  it('reports controller-runtime workqueue metrics', async () => {
    const registry = new Registry();
    const metrics = createWorkQueueMetrics(registry);
    expect(createWorkQueueMetrics(registry)).toBe(metrics); // registered once per registry
    let clock = 1_000;
    const q = new WorkQueue({ name: 'extensions', metrics, now: () => clock });
    q.add('a');
    q.add('b');
    q.add('a');
    clock += 250;
    const key = (await q.get()) ?? '';
    clock += 500;
    q.done(key);
    q.addRateLimited('c');
    q.shutDown();

    const text = await registry.metrics();
    expect(text).toContain('workqueue_adds_total{name="extensions"} 2');
    expect(text).toContain('workqueue_depth{name="extensions"} 1');
    expect(text).toContain('workqueue_retries_total{name="extensions"} 1');
    expect(text).toContain('workqueue_queue_duration_seconds_sum{name="extensions"} 0.25');
    expect(text).toContain('workqueue_work_duration_seconds_sum{name="extensions"} 0.5');
  });
});
