// Prometheus metrics of the kube layer, with the names controller-runtime and client-go use so
// existing dashboards and alerts work: workqueue_*, leader_election_master_status. Each factory
// registers its metrics once per Registry and hands out the same object on later calls, because
// prom-client throws when a metric name is registered twice.
import { Counter, Gauge, Histogram, exponentialBuckets, type Registry } from 'prom-client';

import type { WriteHook } from './objects-client.js';

/** What a WorkQueue reports; `name` is the queue's name (one label value per queue). */
export interface WorkQueueMetrics {
  depth(name: string, n: number): void;
  adds(name: string): void;
  retries(name: string): void;
  /** Time a key waited in the queue before get() returned it. */
  latencySeconds(name: string, seconds: number): void;
  /** Time between get() and done() of a key. */
  workDurationSeconds(name: string, seconds: number): void;
}

export interface LeaderElectionMetrics {
  /** `name` is the Lease name. */
  leaderStatus(name: string, leading: boolean): void;
}

function memoized<T>(create: (registry: Registry) => T): (registry: Registry) => T {
  const byRegistry = new WeakMap<Registry, T>();
  return (registry) => {
    let value = byRegistry.get(registry);
    if (value === undefined) {
      value = create(registry);
      byRegistry.set(registry, value);
    }
    return value;
  };
}

// controller-runtime: prometheus.ExponentialBuckets(10e-9, 10, 12), i.e. 10 ns … 1000 s.
const DURATION_BUCKETS = exponentialBuckets(10e-9, 10, 12);

export const createWorkQueueMetrics = memoized((registry: Registry): WorkQueueMetrics => {
  const registers = [registry];
  const labelNames = ['name'] as const;
  const depth = new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames, registers });
  const adds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue', labelNames, registers });
  const retries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue', labelNames, registers });
  const latency = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    labelNames,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const work = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes',
    labelNames,
    buckets: DURATION_BUCKETS,
    registers,
  });
  return {
    depth: (name, n) => depth.set({ name }, n),
    adds: (name) => adds.inc({ name }),
    retries: (name) => retries.inc({ name }),
    latencySeconds: (name, s) => latency.observe({ name }, s),
    workDurationSeconds: (name, s) => work.observe({ name }, s),
  };
});

export const createLeaderElectionMetrics = memoized((registry: Registry): LeaderElectionMetrics => {
  const status = new Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  return { leaderStatus: (name, leading) => status.set({ name }, leading ? 1 : 0) };
});

/** A WriteHook counting gardener_acl_api_writes_total{verb,kind}; pass it as KubeClient.onWrite. */
export const createApiWriteCounter = memoized((registry: Registry): WriteHook => {
  const writes = new Counter({
    name: 'gardener_acl_api_writes_total',
    help: 'Write requests sent to the Kubernetes API by gardener-acl, by verb and kind',
    labelNames: ['verb', 'kind'] as const,
    registers: [registry],
  });
  return (verb, kind) => writes.inc({ verb, kind });
});
