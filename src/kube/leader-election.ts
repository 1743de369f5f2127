// Leader election on a coordination.k8s.io/v1 Lease with client-go's rules and controller-runtime's
// default timings (leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s):
//
// - a candidate takes the Lease when it has no holder or when the holder has not renewed it for
//   leaseDuration. "Not renewed" is measured on the candidate's own clock, from when it last
//   saw the record change (client-go's observedTime), so clock skew between replicas is harmless;
// - writes are PUTs carrying the resourceVersion that was read, so of two racing candidates
//   exactly one wins (the other gets 409);
// - the leader renews every retryPeriod; when no renewal succeeded for renewDeadline (shorter than
//   leaseDuration, so it gives up before anyone else may take over), or when the Lease shows
//   another valid holder, leadership is lost: onStoppedLeading('lost'). controller-runtime exits
//   the process at that point; callers should do the same or at least stop all reconcilers;
// - stop() releases the Lease (empty holderIdentity) so a successor starts at once.
//
// Requests go through rest.ts so that each has a deadline: a hanging renew must not keep a
// leader believing in a lease that has already expired. Every expiry decision uses the monotonic
// clock (performance.now): a wall-clock jump neither extends nor shortens leadership; the wall
// clock only fills the Lease's renewTime/acquireTime for humans. An optional LeaseFence is
// admitted up to `sentAt + renewDeadline` after each renewal and revoked on loss or stop, so
// writes stop before another replica can win the Lease.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { z } from 'zod';

import { sleep } from './backoff.js';
import { describeError, isConflict, isNotFound } from './errors.js';
import type { LeaderElectionMetrics } from './metrics.js';
import type { LeaseFence } from './lease-fence.js';
import { restRequest } from './rest.js';

export type { LeaderElectionMetrics } from './metrics.js';

export type StoppedLeadingReason = 'lost' | 'stopped';

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Lease name. */
  name: string;
  /** Unique per replica, e.g. the pod name plus a random suffix. */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void;
  /** 'lost': renewals failed or another replica holds the Lease; 'stopped': stop() was called. */
  onStoppedLeading: (reason: StoppedLeadingReason) => void;
  logger: Logger;
  /** leader_election_master_status (see metrics.ts createLeaderElectionMetrics). */
  metrics?: LeaderElectionMetrics;
  /** Admitted while leading (see lease-fence.ts); the API client checks it before each write. */
  fence?: LeaseFence;
  /** Monotonic clock in ms (tests); default performance.now. */
  monotonicNow?: () => number;
  /**
   * false: run() ends when the lease is lost, as client-go's does, for a process that exits then
   * (it must not win the lease back, and start its workers, while it shuts down). Default true.
   */
  campaignAfterLoss?: boolean;
}

const leaseSpecSchema = z.looseObject({
  holderIdentity: z.string().nullish(),
  leaseDurationSeconds: z.number().nullish(),
  acquireTime: z.string().nullish(),
  renewTime: z.string().nullish(),
  leaseTransitions: z.number().nullish(),
});
type LeaseSpec = z.infer<typeof leaseSpecSchema>;

const leaseSchema = z.looseObject({
  metadata: z.looseObject({ resourceVersion: z.string() }),
  spec: leaseSpecSchema.nullish(),
});
type Lease = z.infer<typeof leaseSchema>;

/** Who holds the Lease after an attempt. */
type Attempt = 'ours' | 'other' | 'conflict';

/** metav1.MicroTime wants exactly six fractional digits; toISOString has three. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

/** client-go's acquire retries wait retryPeriod plus up to this fraction of it. */
const ACQUIRE_JITTER = 0.2;

export class LeaderElector {
  private readonly opts: LeaderElectorOptions;
  private readonly log: Logger;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly stopController = new AbortController();
  private running: Promise<void> | undefined;
  private leading = false;
  /** The holder record last seen and when (local clock) it was first seen. */
  private observedRecord = '';
  private observedTime = 0;
  private observedDurationMs = 0;
  private readonly now: () => number;

  constructor(options: LeaderElectorOptions) {
    this.opts = options;
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.now = options.monotonicNow ?? (() => performance.now());
    // client-go's validation: otherwise a leader could still act after others may take over.
    if (!(this.leaseDurationMs > this.renewDeadlineMs)) throw new Error('leaseDuration must be greater than renewDeadline');
    if (!(this.renewDeadlineMs > this.retryPeriodMs * (1 + ACQUIRE_JITTER))) {
      throw new Error(`renewDeadline must be greater than retryPeriod*${1 + ACQUIRE_JITTER}`);
    }
    this.log = options.logger.child({ lease: `${options.namespace}/${options.name}`, identity: options.identity });
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * Why this replica is unhealthy as a leader, or undefined: a leader whose last successful renewal
   * is older than the lease plus 20 s (controller-runtime's leader-election health check) is stuck,
   * since a renew loop that runs gives up at the renew deadline and exits.
   */
  leaderHealthProblem(): string | undefined {
    if (!this.leading) return undefined;
    const sinceRenewMs = this.now() - this.lastRenewSent;
    if (sinceRenewMs <= this.leaseDurationMs + 20_000) return undefined;
    return `leader without a successful lease renewal for ${Math.round(sinceRenewMs / 1000)} s`;
  }

  /** Campaigns, leads, and campaigns again after a loss (unless campaignAfterLoss is false), until stop(). */
  run(): Promise<void> {
    this.running ??= this.loop();
    return this.running;
  }

  /**
   * Ends run(). A leader calls onStoppedLeading('stopped') and then, unless `release: false`
   * (which simulates a crashed replica in tests), empties holderIdentity so a successor need not
   * wait for the lease to expire. Stop your controllers before calling this.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.stopController.abort(new Error('leader elector stopped'));
    await this.running;
    if (!this.leading) return;
    this.setLeading(false, 'stopped');
    if (options.release === false) return;
    try {
      await this.release();
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'could not release the lease; it expires on its own');
    }
  }

  private get stopping(): boolean {
    return this.stopController.signal.aborted;
  }

  private get leasePath(): string {
    const ns = encodeURIComponent(this.opts.namespace);
    return `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
  }

  private async loop(): Promise<void> {
    this.opts.metrics?.leaderStatus(this.opts.name, false);
    while (!this.stopping) {
      if (!(await this.acquire())) return;
      this.setLeading(true);
      if ((await this.renewUntilLost()) === 'stopped') return;
      this.setLeading(false, 'lost');
      if (this.opts.campaignAfterLoss === false) return;
    }
  }

  private setLeading(leading: boolean, reason: StoppedLeadingReason = 'lost'): void {
    this.leading = leading;
    if (!leading) this.opts.fence?.revoke(reason === 'lost' ? 'leadership lost' : 'leadership given up');
    this.opts.metrics?.leaderStatus(this.opts.name, leading);
    this.log.info(leading ? 'became leader' : `stopped leading (${reason})`);
    try {
      if (leading) this.opts.onStartedLeading();
      else this.opts.onStoppedLeading(reason);
    } catch (err) {
      this.log.error({ err: describeError(err) }, 'leader election callback failed');
    }
  }

  /** Resolves true once the Lease is ours, false when stopped first. */
  private async acquire(): Promise<boolean> {
    while (!this.stopping) {
      let attempt: Attempt | undefined;
      try {
        attempt = await this.tryAcquireOrRenew(this.renewDeadlineMs);
        if (attempt === 'ours') return true;
      } catch (err) {
        if (this.stopping) break;
        this.log.warn({ err: describeError(err) }, 'could not read or write the lease');
      }
      let delay = this.retryPeriodMs * (1 + Math.random() * ACQUIRE_JITTER);
      // Wake up right when the current holder's lease runs out instead of up to a period later.
      const untilExpiry = this.observedTime + this.observedDurationMs - this.now();
      if (attempt === 'other' && untilExpiry > 0) delay = Math.min(delay, untilExpiry + 10);
      await sleep(delay, this.stopController.signal);
    }
    return false;
  }

  private async renewUntilLost(): Promise<StoppedLeadingReason> {
    let lastRenew = this.lastRenewSent;
    while (!this.stopping) {
      await sleep(this.retryPeriodMs, this.stopController.signal);
      if (this.stopping) break;
      const started = this.now();
      const remaining = this.renewDeadlineMs - (started - lastRenew);
      if (remaining <= 0) break;
      try {
        const attempt = await this.tryAcquireOrRenew(remaining);
        if (attempt === 'ours') {
          lastRenew = started;
          continue;
        }
        if (attempt === 'other') {
          this.log.warn('the lease has another valid holder');
          return 'lost';
        }
      } catch (err) {
        if (this.stopping) break;
        this.log.warn({ err: describeError(err) }, 'failed to renew the lease');
      }
    }
    if (this.stopping) return 'stopped';
    this.log.warn({ renewDeadlineMs: this.renewDeadlineMs }, 'no successful renewal within the renew deadline');
    return 'lost';
  }

  /** Notes when the holder record last changed, on the local clock. */
  private observe(spec: LeaseSpec, now: number): void {
    const record = JSON.stringify([
      spec.holderIdentity ?? '',
      spec.renewTime ?? '',
      spec.acquireTime ?? '',
      spec.leaseTransitions ?? 0,
      spec.leaseDurationSeconds ?? 0,
    ]);
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedTime = now;
    }
    this.observedDurationMs = (spec.leaseDurationSeconds ?? this.leaseDurationMs / 1000) * 1000;
  }

  /** Monotonic time the last successful acquire/renew request was sent. */
  private lastRenewSent = 0;

  private async tryAcquireOrRenew(timeoutMs: number): Promise<Attempt> {
    const now = this.now();
    const wallNow = Date.now();
    // The lease is renewed on time whatever Retry-After other requests got (see rest.ts).
    const request = { timeoutMs, signal: this.stopController.signal, ignorePushback: true };
    let lease: Lease | undefined;
    try {
      lease = leaseSchema.parse(await restRequest(this.opts.kubeConfig, { ...request, path: `${this.leasePath}/${this.opts.name}` }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const current = lease?.spec ?? {};
    if (lease) this.observe(current, now);
    const holder = current.holderIdentity ?? '';
    const ours = holder === this.opts.identity;
    if (holder !== '' && !ours && this.observedTime + this.observedDurationMs > now) return 'other';

    const spec: LeaseSpec = {
      ...current,
      holderIdentity: this.opts.identity,
      leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
      acquireTime: ours && current.acquireTime ? current.acquireTime : microTime(wallNow),
      renewTime: microTime(wallNow),
      leaseTransitions: (current.leaseTransitions ?? 0) + (ours || !lease ? 0 : 1),
    };
    try {
      if (lease) {
        await restRequest(this.opts.kubeConfig, {
          ...request,
          method: 'PUT',
          path: `${this.leasePath}/${this.opts.name}`,
          body: { ...lease, spec },
        });
      } else {
        await restRequest(this.opts.kubeConfig, {
          ...request,
          method: 'POST',
          path: this.leasePath,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.opts.name, namespace: this.opts.namespace },
            spec,
          },
        });
      }
    } catch (err) {
      // Someone else wrote the Lease since we read it (409 on PUT, AlreadyExists on POST).
      if (isConflict(err)) return 'conflict';
      throw err;
    }
    this.observe(spec, now);
    this.lastRenewSent = now;
    // `now` was taken before the lease was even read: the stored renewal is later than that.
    this.opts.fence?.admit(now + this.renewDeadlineMs);
    return 'ours';
  }

  private async release(): Promise<void> {
    const path = `${this.leasePath}/${this.opts.name}`;
    const lease = leaseSchema.parse(await restRequest(this.opts.kubeConfig, { path, timeoutMs: this.renewDeadlineMs, ignorePushback: true }));
    if (lease.spec?.holderIdentity !== this.opts.identity) return;
    const now = microTime(Date.now());
    const spec: LeaseSpec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now };
    await restRequest(this.opts.kubeConfig, { method: 'PUT', path, body: { ...lease, spec }, timeoutMs: this.renewDeadlineMs, ignorePushback: true });
    this.log.info('released the lease');
  }
}
