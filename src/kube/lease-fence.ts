// One writer: a replica may write only while it certainly still holds the Lease. The leader
// elector admits writes up to `sentAt + renewDeadline` after each successful renewal, where
// sentAt is the monotonic time the renewal request was SENT (the server stored it later, and
// another replica waits a whole leaseDuration after it observes that renewal before it may take
// over; renewDeadline < leaseDuration). Past that instant, or once leadership is lost or given
// up, writes are refused before they are sent and the ones in flight are aborted.

/** A write refused because this replica may no longer hold the Lease. */
export class FenceRefusedError extends Error {
  override readonly name = 'FenceRefusedError';
}

/** What the API client asks before each write. */
export interface WriteFence {
  /** Throws FenceRefusedError when writing is not allowed now. */
  check(): void;
  /** Aborts when the fence closes; in-flight writes carry it. */
  signal(): AbortSignal;
}

export class LeaseFence implements WriteFence {
  private until = Number.NEGATIVE_INFINITY;
  private reason = 'the lease has not been acquired yet';
  private controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly leaseName: string,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Writes are allowed until the monotonic time `until` (ms, same clock as `now`). */
  admit(until: number): void {
    if (this.controller.signal.aborted) this.controller = new AbortController();
    this.until = until;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.close('no lease renewal succeeded within the renew deadline'), Math.max(0, until - this.now()));
    this.timer.unref();
  }

  /** Leadership lost or given up: refuse from now on and abort what is in flight. */
  revoke(reason: string): void {
    this.close(reason);
  }

  check(): void {
    if (this.now() < this.until) return;
    throw new FenceRefusedError(`write refused: this replica may no longer hold the lease ${this.leaseName} (${this.reason}); another replica may be leading`);
  }

  signal(): AbortSignal {
    return this.controller.signal;
  }

  private close(reason: string): void {
    clearTimeout(this.timer);
    this.until = Number.NEGATIVE_INFINITY;
    this.reason = reason;
    if (!this.controller.signal.aborted) {
      this.controller.abort(new FenceRefusedError(`write aborted: the lease ${this.leaseName} may have passed to another replica (${reason})`));
    }
  }
}
