/**
 * LeaderElector against a real kube-apiserver: two (or three) electors share one Lease, with short
 * timings (leaseDuration 2 s, renewDeadline 1.5 s, retryPeriod 0.3 s). Checks that exactly one
 * leads, take-over after a release and after a crash, that a partitioned leader steps down before
 * anyone else may take over, and the leader_election_master_status metric.
 */
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { KubeClusterClient } from '../../src/actuator/kube-cluster-client.js';
import { FenceRefusedError, LeaseFence } from '../../src/kube/lease-fence.js';
import { LeaderElector, type StoppedLeadingReason } from '../../src/kube/leader-election.js';
import { createLeaderElectionMetrics } from '../../src/kube/metrics.js';
import { getObject } from '../../src/kube/objects-client.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ControlPlane } from './control-plane.js';
import { eventually, sleep, startWithCRDs, testLogger } from './kube-test-helpers.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const NS = 'gardener-acl-system';
const TIMINGS = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 300 };

interface Candidate {
  identity: string;
  elector: LeaderElector;
  registry: Registry;
  startedAt: number[];
  stopped: { at: number; reason: StoppedLeadingReason }[];
  running: Promise<void>;
}

const leaseSpecSchema = z.looseObject({
  spec: z.looseObject({
    holderIdentity: z.string().nullish(),
    leaseDurationSeconds: z.number(),
    renewTime: z.string(),
    leaseTransitions: z.number(),
  }),
});

describe('LeaderElector against a real kube-apiserver', () => {
  let cp: ControlPlane;
  let candidates: Candidate[] = [];
  let bothLeading = 0;
  let sampler: NodeJS.Timeout | undefined;

  beforeAll(async () => {
    cp = await startWithCRDs([NS]);
  }, 120_000);

  afterEach(async () => {
    clearInterval(sampler);
    await Promise.all(candidates.map((c) => c.elector.stop()));
    candidates = [];
  });

  afterAll(async () => {
    await cp?.stop();
  });

  function candidate(identity: string, lease: string, kubeConfig: KubeConfig = cp.kubeConfig, fence?: LeaseFence): Candidate {
    const registry = new Registry();
    const c: Candidate = { identity, registry, startedAt: [], stopped: [], running: Promise.resolve(), elector: undefined as never };
    c.elector = new LeaderElector({
      kubeConfig,
      namespace: NS,
      name: lease,
      identity,
      ...TIMINGS,
      onStartedLeading: () => c.startedAt.push(Date.now()),
      onStoppedLeading: (reason) => c.stopped.push({ at: Date.now(), reason }),
      logger: testLogger(),
      metrics: createLeaderElectionMetrics(registry),
      ...(fence ? { fence } : {}),
    });
    c.running = c.elector.run();
    candidates.push(c);
    return c;
  }

  /** Samples isLeader() of every candidate; counts instants with two leaders. */
  function watchForSplitBrain(): void {
    bothLeading = 0;
    sampler = setInterval(() => {
      if (candidates.filter((c) => c.elector.isLeader()).length > 1) bothLeading++;
    }, 10);
  }

  const leaders = () => candidates.filter((c) => c.elector.isLeader());

  /** Starts the split-brain sampler, lets 'a' win, then adds follower 'b' and lets it settle. */
  async function leaderAndFollower(lease: string, aKubeConfig = cp.kubeConfig, aFence?: LeaseFence): Promise<{ a: Candidate; b: Candidate }> {
    watchForSplitBrain();
    const a = candidate('a', lease, aKubeConfig, aFence);
    await eventually('a leads', () => a.elector.isLeader());
    const b = candidate('b', lease);
    await sleep(500); // b has observed a's renewals
    expect(b.elector.isLeader()).toBe(false);
    return { a, b };
  }

  async function masterStatus(c: Candidate, lease: string): Promise<number | undefined> {
    const metric = await c.registry.getSingleMetric('leader_election_master_status')?.get();
    return metric?.values.find((v) => v.labels.name === lease)?.value;
  }

  async function leaseSpec(lease: string) {
    const obj = await getObject(cp.kubeConfig, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: lease, namespace: NS });
    return leaseSpecSchema.parse(obj).spec;
  }

  it('exactly one of two candidates leads; the metric and the Lease say which', async () => {
    const lease = 'one-leader';
    watchForSplitBrain();
    const a = candidate('a', lease);
    const b = candidate('b', lease);
    const leader = await eventually('a leader', () => leaders()[0]);
    await sleep(1_000); // several renew periods: leadership stays put
    expect(leaders()).toEqual([leader]);
    expect(bothLeading).toBe(0);
    const follower = leader === a ? b : a;
    expect(await masterStatus(leader, lease)).toBe(1);
    expect(await masterStatus(follower, lease)).toBe(0);
    expect(leader.startedAt).toHaveLength(1);
    expect(follower.startedAt).toHaveLength(0);

    const spec = await leaseSpec(lease);
    expect(spec.holderIdentity).toBe(leader.identity);
    expect(spec.leaseDurationSeconds).toBe(2);
    expect(spec.renewTime).toMatch(/\.\d{6}Z$/); // metav1.MicroTime
    expect(spec.leaseTransitions).toBe(0);
  });

  it('after a graceful stop (lease released) the other takes over well before the lease would expire', async () => {
    const lease = 'release';
    const { a, b } = await leaderAndFollower(lease);

    const stoppedAt = Date.now();
    await a.elector.stop();
    expect(a.stopped).toEqual([{ at: expect.any(Number), reason: 'stopped' }]);
    expect(a.elector.isLeader()).toBe(false);
    expect(await masterStatus(a, lease)).toBe(0);
    await eventually('b leads', () => b.elector.isLeader(), 3_000);
    const takeOverMs = Date.now() - stoppedAt;
    expect(takeOverMs).toBeLessThan(TIMINGS.leaseDurationMs);
    expect(await masterStatus(b, lease)).toBe(1);
    expect((await leaseSpec(lease)).leaseTransitions).toBe(1);
    expect(bothLeading).toBe(0);
    console.info(`leader election: take-over after release ${takeOverMs} ms`);
  });

  it('after a crash (no release) the other takes over within leaseDuration + retryPeriod', async () => {
    const lease = 'crash';
    const { a, b } = await leaderAndFollower(lease);

    const killedAt = Date.now();
    await a.elector.stop({ release: false });
    await eventually('b leads', () => b.elector.isLeader(), 5_000);
    const takeOverMs = Date.now() - killedAt;
    // The last renewal was at most one retryPeriod before the crash; b waits a full leaseDuration
    // from when it saw that renewal, measured on its own clock.
    expect(takeOverMs).toBeGreaterThanOrEqual(TIMINGS.leaseDurationMs - TIMINGS.retryPeriodMs);
    expect(takeOverMs).toBeLessThanOrEqual(TIMINGS.leaseDurationMs + TIMINGS.retryPeriodMs);
    expect(bothLeading).toBe(0);
    console.info(`leader election: take-over after crash ${takeOverMs} ms`);
  });

  describe('with the leader behind a network it loses', () => {
    let proxy: TcpProxy;
    beforeAll(async () => {
      proxy = await startTcpProxy(Number(new URL(cp.server).port));
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it('a leader that cannot renew steps down after renewDeadline, before anyone else takes over', async () => {
      const lease = 'partition';
      const { a, b } = await leaderAndFollower(lease, proxy.kubeConfigVia(cp.kubeConfig));

      const cutAt = Date.now();
      proxy.setMode('refuse');
      await eventually('a steps down', () => a.stopped.length > 0, 5_000);
      await eventually('b leads', () => b.elector.isLeader(), 5_000);
      const lost = a.stopped[0];
      const bLeads = b.startedAt[0] ?? 0;
      expect(lost?.reason).toBe('lost');
      expect((lost?.at ?? Infinity) - cutAt).toBeLessThanOrEqual(TIMINGS.renewDeadlineMs + TIMINGS.retryPeriodMs);
      expect(lost?.at ?? Infinity).toBeLessThan(bLeads);
      expect(await masterStatus(a, lease)).toBe(0);
      expect(bothLeading).toBe(0);

      // Back on the network, a campaigns again but follows.
      proxy.setMode('forward');
      await sleep(1_000);
      expect(leaders()).toEqual([b]);
      console.info(`leader election: a stepped down ${(lost?.at ?? 0) - cutAt} ms after the cut, b led ${bLeads - cutAt} ms after`);
    });

    it('one writer: a leader whose renewals fail stops writing before the other can win the Lease (its writes still reach the server)', async () => {
      const lease = 'fenced';
      const fence = new LeaseFence(`${NS}/${lease}`);
      // The elector renews through the proxy that is cut; writes go straight to the API server,
      // so only the fence can stop them.
      const { a, b } = await leaderAndFollower(lease, proxy.kubeConfigVia(cp.kubeConfig), fence);
      const sent: string[] = [];
      const client = new KubeClusterClient(cp.kubeConfig, { fence, onWrite: (verb, kind) => sent.push(`${verb} ${kind}`) });
      const cm = (n: number) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fenced-writes', namespace: NS }, data: { n: String(n) } });
      await client.apply(cm(0));
      const accepted: number[] = [];
      let refused = 0;
      // A write in flight when the fence closes is aborted: it was sent, and says why it failed.
      let abortedInFlight = 0;
      proxy.setMode('refuse');
      const until = Date.now() + TIMINGS.leaseDurationMs + 2_000;
      for (let n = 1; Date.now() < until; n++) {
        try {
          await client.apply(cm(n));
          accepted.push(Date.now());
        } catch (error) {
          expect(error).toBeInstanceOf(FenceRefusedError);
          if ((error as Error).message.startsWith('write aborted: the lease')) abortedInFlight++;
          else refused++;
        }
        await sleep(50);
      }
      await eventually('b leads', () => b.elector.isLeader(), 5_000);
      const bLeads = b.startedAt[0] ?? 0;
      expect(accepted.length).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
      expect(Math.max(...accepted)).toBeLessThan(bLeads);
      // Refused writes were never sent.
      expect(sent.length).toBe(1 + accepted.length + abortedInFlight);
      expect(abortedInFlight).toBeLessThanOrEqual(1);
      expect(a.stopped[0]?.reason).toBe('lost');
      proxy.setMode('forward');
    });
  });

  it('rejects timings where a leader could outlive its lease', () => {
    const base = { kubeConfig: cp.kubeConfig, namespace: NS, name: 'x', identity: 'x', onStartedLeading: () => {}, onStoppedLeading: () => {}, logger: testLogger() };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 1_000, renewDeadlineMs: 1_000 })).toThrow(/leaseDuration/);
    expect(() => new LeaderElector({ ...base, renewDeadlineMs: 2_000, retryPeriodMs: 2_000 })).toThrow(/renewDeadline/);
  });
});
