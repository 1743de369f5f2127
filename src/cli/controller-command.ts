import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { z } from 'zod';
import { AclController } from '../actuator/controller.js';
import { ExtensionHeartbeat } from '../actuator/heartbeat.js';
import { KubeClusterClient } from '../actuator/kube-cluster-client.js';
import { LeaseFence } from '../kube/lease-fence.js';
import { LeaderElector } from '../kube/leader-election.js';
import { createLeaderElectionMetrics } from '../kube/metrics.js';
import type { CommandIO } from './render-command.js';
import { loadKubeConfig } from './kubeconfig.js';
import { loadOperatorConfigFile } from './operator-config-file.js';
import { startProbeServer } from './probe-server.js';
import { LAGGING_CACHE_MS, STUCK_CACHE_MS } from './probe-thresholds.js';

export const CONTROLLER_USAGE = `usage: gardener-acl controller [options]

Runs the extension controller for Extensions of type acl on a seed.

  --kubeconfig PATH                 kubeconfig (default: $KUBECONFIG, else in-cluster)
  --config PATH                     OperatorConfiguration YAML (default: built-in defaults)
  --leader-elect true|false         Lease leader election (default true)
  --leader-election-namespace NS    default: $LEADER_ELECTION_NAMESPACE or garden; the leader also
                                    renews Gardener's extension heartbeat Lease
                                    (gardener-extension-heartbeat) there
  --leader-election-id NAME         default: gardener-acl-leader-election
  --lease-duration DURATION         leader election lease duration (default 15s)
  --renew-deadline DURATION         leader gives up after failing to renew this long (default 10s)
  --retry-period DURATION           leader election retry period (default 2s)
  --probe-port PORT                 /healthz, /readyz, /metrics (default 8080)
  --cache-unready-after DURATION    /readyz fails while a cache has had no open watch this long
                                    (default 60s)
  --cache-unhealthy-after DURATION  /healthz fails (the kubelet restarts the container) when a
                                    cache has had no open watch this long (default 5m)
  --workers N                       concurrent reconciles (default 5)
  --resync-period DURATION          full resync (default 10m)
  --combined-min-interval DURATION  least time between writes of the combined filters (default 60s)
  --graceful-shutdown-timeout DURATION  on SIGTERM, wait this long for reconciles in flight before
                                    the lease is released (default 30s)
  --log-level LEVEL                 trace|debug|info|warn|error (default info)`;

const durationSchema = z.string().transform((text, ctx) => {
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  if (!match) {
    ctx.addIssue({ code: 'custom', message: `"${text}" is not a duration; write e.g. 500ms, 30s, 10m or 1h` });
    return z.NEVER;
  }
  return Number(match[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h'];
});

const argsSchema = z.object({
  kubeconfig: z.string().optional(),
  config: z.string().optional(),
  'leader-elect': z.enum(['true', 'false'], { error: 'must be true or false' }).transform((v) => v === 'true'),
  'leader-election-namespace': z.string().min(1),
  'leader-election-id': z.string().min(1),
  'lease-duration': durationSchema,
  'renew-deadline': durationSchema,
  'retry-period': durationSchema,
  'probe-port': z.coerce.number({ error: 'must be a number' }).int({ error: 'must be a port number from 0 to 65535' }).min(0, { error: 'must be a port number from 0 to 65535' }).max(65535, { error: 'must be a port number from 0 to 65535' }),
  'cache-unready-after': durationSchema,
  'cache-unhealthy-after': durationSchema,
  workers: z.coerce.number({ error: 'must be a number' }).int({ error: 'must be a whole number from 1 to 100' }).min(1, { error: 'must be a whole number from 1 to 100' }).max(100, { error: 'must be a whole number from 1 to 100' }),
  'resync-period': durationSchema,
  'combined-min-interval': durationSchema,
  'graceful-shutdown-timeout': durationSchema,
  'log-level': z.enum(['trace', 'debug', 'info', 'warn', 'error'], { error: 'must be trace, debug, info, warn or error' }),
});

export async function controllerCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  let raw;
  try {
    raw = parseArgs({
      args: [...argv],
      options: {
        kubeconfig: { type: 'string' },
        config: { type: 'string' },
        'leader-elect': { type: 'string', default: 'true' },
        'leader-election-namespace': { type: 'string', default: process.env.LEADER_ELECTION_NAMESPACE ?? 'garden' },
        'leader-election-id': { type: 'string', default: 'gardener-acl-leader-election' },
        'lease-duration': { type: 'string', default: '15s' },
        'renew-deadline': { type: 'string', default: '10s' },
        'retry-period': { type: 'string', default: '2s' },
        'probe-port': { type: 'string', default: '8080' },
        'cache-unready-after': { type: 'string', default: `${LAGGING_CACHE_MS / 1000}s` },
        'cache-unhealthy-after': { type: 'string', default: `${STUCK_CACHE_MS / 60_000}m` },
        workers: { type: 'string', default: '5' },
        'resync-period': { type: 'string', default: '10m' },
        'combined-min-interval': { type: 'string', default: '60s' },
        'graceful-shutdown-timeout': { type: 'string', default: '30s' },
        'log-level': { type: 'string', default: 'info' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    io.stderr(`${(error as Error).message}\n${CONTROLLER_USAGE}\n`);
    return 2;
  }
  if (raw.values.help) {
    io.stdout(`${CONTROLLER_USAGE}\n`);
    return 0;
  }
  const args = argsSchema.safeParse(raw.values);
  if (!args.success) {
    io.stderr(`${args.error.issues.map((i) => (i.path.length ? `--${String(i.path[0])}: ${i.message}` : i.message)).join('\n')}\n${CONTROLLER_USAGE}\n`);
    return 2;
  }
  const a = args.data;
  // client-go's rule: the lease outlives the renew deadline, which outlasts retries with jitter.
  if (a['leader-elect'] && !(a['lease-duration'] > a['renew-deadline'] && a['renew-deadline'] > 1.2 * a['retry-period'])) {
    io.stderr('--lease-duration must exceed --renew-deadline, which must exceed 1.2 x --retry-period\n');
    return 2;
  }
  const operator = await loadOperatorConfigFile(a.config);
  if ('error' in operator) {
    io.stderr(`${operator.error}\n`);
    return 2;
  }

  const logger = pino({ level: a['log-level'], base: { component: 'gardener-acl-controller' } });
  const kubeConfig = loadKubeConfig(a.kubeconfig);

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // With leader election every write passes the lease fence: none is sent (and those in flight
  // are aborted) once this replica may have lost the lease.
  const fence = a['leader-elect'] ? new LeaseFence(`${a['leader-election-namespace']}/${a['leader-election-id']}`) : undefined;
  const client = new KubeClusterClient(kubeConfig, { registry, ...(fence ? { fence } : {}) });
  const controller = new AclController({
    kubeConfig,
    client,
    operator: operator.config,
    logger,
    registry,
    workers: a.workers,
    resyncPeriodMs: a['resync-period'],
    combinedMinIntervalMs: a['combined-min-interval'],
  });
  // The writer renews Gardener's extension heartbeat, which gardenlet reads next to the conditions we report.
  const heartbeat = new ExtensionHeartbeat(client, a['leader-election-namespace'], a['leader-election-id'], logger);
  const elector = a['leader-elect']
    ? new LeaderElector({
        kubeConfig,
        namespace: a['leader-election-namespace'],
        name: a['leader-election-id'],
        identity: `${hostname()}_${randomUUID()}`,
        leaseDurationMs: a['lease-duration'],
        renewDeadlineMs: a['renew-deadline'],
        retryPeriodMs: a['retry-period'],
        metrics: createLeaderElectionMetrics(registry),
        logger,
        ...(fence ? { fence } : {}),
        onStartedLeading: () => {
          logger.info('became leader; starting workers');
          controller.startWorkers();
          heartbeat.start();
        },
        // Like controller-runtime: a replica that lost the lease exits rather than risk two writers.
        onStoppedLeading: (reason) => {
          if (reason !== 'lost') return;
          logger.error('lost leadership; exiting');
          void shutdown(1);
        },
      })
    : undefined;
  const probes = await startProbeServer({
    port: a['probe-port'],
    registry,
    readyz: () => [
      ...(controller.cachesSynced() ? [] : ['caches not synced']),
      ...controller.cachesNotWatchingFor(a['cache-unready-after']).map((name) => `cache ${name}: no open watch for over ${a['cache-unready-after'] / 1000} s`),
    ],
    healthz: () => [
      ...[elector?.leaderHealthProblem()].filter((problem) => problem !== undefined),
      ...controller.cachesNotWatchingFor(a['cache-unhealthy-after']).map((name) => `cache ${name}: no open watch for over ${a['cache-unhealthy-after'] / 1000} s`),
    ],
  });

  // Order: stop taking work, let what is in flight finish (bounded), only then release the
  // lease, so that no write of ours lands after a successor's first write.
  async function shutdown(code: number): Promise<void> {
    logger.info('shutting down');
    heartbeat.stop();
    const finished = await controller.stopWorkers(a['graceful-shutdown-timeout']);
    if (!finished) logger.warn({ timeoutMs: a['graceful-shutdown-timeout'] }, 'reconciles still in flight at the graceful shutdown timeout; the lease is kept (not released) so it expires on its own');
    await elector?.stop({ release: finished });
    await controller.stop();
    probes.close();
    process.exit(code);
  }
  process.once('SIGTERM', () => void shutdown(0));
  process.once('SIGINT', () => void shutdown(0));

  await controller.startCaches();
  logger.info('caches synced');
  if (elector) await elector.run();
  else {
    controller.startWorkers();
    heartbeat.start();
  }
  // Runs until a signal or lost leadership ends the process.
  return new Promise<number>(() => undefined);
}
