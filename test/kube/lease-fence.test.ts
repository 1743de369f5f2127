// The lease fence on an injected monotonic clock: admitted until a deadline, refused after it
// (and after a revoke), with the in-flight signal aborted at that moment.
import { describe, expect, it } from 'vitest';

import { FenceRefusedError, LeaseFence } from '../../src/kube/lease-fence.js';

describe('LeaseFence', () => {
  it('refuses before the first admission, admits until the deadline, refuses at it', () => {
    let now = 1_000;
    const fence = new LeaseFence('ns/lease', () => now);
    expect(() => fence.check()).toThrow(FenceRefusedError);
    fence.admit(now + 10_000);
    expect(() => fence.check()).not.toThrow();
    now += 9_999;
    expect(() => fence.check()).not.toThrow();
    now += 1;
    expect(() => fence.check()).toThrow('write refused: this replica may no longer hold the lease ns/lease');
  });

  it('a revoke refuses at once and aborts the writes in flight; a new admission opens a fresh signal', () => {
    const now = 0;
    const fence = new LeaseFence('ns/lease', () => now);
    fence.admit(10_000);
    const inFlight = fence.signal();
    fence.revoke('leadership lost');
    expect(inFlight.aborted).toBe(true);
    expect(inFlight.reason).toBeInstanceOf(FenceRefusedError);
    expect(() => fence.check()).toThrow('(leadership lost)');
    fence.admit(10_000);
    expect(fence.signal().aborted).toBe(false);
    expect(() => fence.check()).not.toThrow();
  });

  it('a wall-clock jump changes nothing: only the monotonic clock it was given counts', () => {
    const fence = new LeaseFence('ns/lease', () => 0);
    fence.admit(5_000);
    const realNow = Date.now;
    Date.now = () => realNow() + 3_600_000;
    try {
      expect(() => fence.check()).not.toThrow();
    } finally {
      Date.now = realNow;
    }
  });

  it('closes by itself at the deadline (timer), aborting what is in flight', async () => {
    const fence = new LeaseFence('ns/lease');
    fence.admit(performance.now() + 100);
    const inFlight = fence.signal();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(inFlight.aborted).toBe(true);
    expect(() => fence.check()).toThrow('no lease renewal succeeded within the renew deadline');
  });
});
