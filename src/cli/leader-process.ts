// The life of a controller process, shared by `controller` and `garden-controller`: caches first,
// then (with leader election) workers only while leading, probes throughout, and an ordered stop:
// take no more work, let what is in flight finish (bounded), only then release the lease, so that
// no write of ours lands after a successor's first write.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { LeaseFence } from '../kube/lease-fence.js';
import { LeaderElector } from '../kube/leader-election.js';
import { createLeaderElectionMetrics } from '../kube/metrics.js';
import type { z } from 'zod';
import type { OperatorConfig } from '../config/operator-config.js';
import type { CommandIO } from './command-io.js';
import { argsUsageError, parseCommandArgs } from './command-args.js';
import { parseOptions, type FlagTable } from './flag-table.js';
import { loadOperatorConfigFile } from './operator-config-file.js';
import { startProbeServer } from './probe-server.js';

/** What the process runs: a controller's caches and workers. */
export interface ControllerWork {
  startCaches(): Promise<void>;
  cachesSynced(): boolean;
  cachesNotWatchingFor(thresholdMs: number): string[];
  startWorkers(): void;
  /** Resolves true when every worker has finished within `timeoutMs`. */
  stopWorkers(timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

export interface LeaderProcessSettings {
  readonly 'leader-elect': boolean;
  readonly 'leader-election-namespace': string;
  readonly 'leader-election-id': string;
  readonly 'lease-duration': number;
  readonly 'renew-deadline': number;
  readonly 'retry-period': number;
  readonly 'probe-port': number;
  readonly 'cache-unready-after': number;
  readonly 'cache-unhealthy-after': number;
  readonly 'graceful-shutdown-timeout': number;
}

/** client-go's rule: the lease outlives the renew deadline, which outlasts retries with jitter; undefined when it holds. */
export function leaseTimingProblem(a: LeaderProcessSettings): string | undefined {
  if (!a['leader-elect'] || (a['lease-duration'] > a['renew-deadline'] && a['renew-deadline'] > 1.2 * a['retry-period'])) return undefined;
  return '--lease-duration must exceed --renew-deadline, which must exceed 1.2 x --retry-period';
}

export interface LeaderProcessOptions {
  readonly settings: LeaderProcessSettings;
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  /** The fence every write passes (with leader election). */
  readonly fence: LeaseFence | undefined;
  readonly work: ControllerWork;
  /** Started with the workers (when leading, or at once without leader election). */
  readonly alongside?: { start(): void; stop(): void };
  /** Logged once the caches have listed. */
  readonly syncedFields?: Record<string, unknown>;
}

/** Runs until a signal or a lost lease ends the process (process.exit). */
export async function runLeaderProcess(o: LeaderProcessOptions): Promise<number> {
  const { settings: a, logger, work } = o;
  const begin = (): void => {
    work.startWorkers();
    o.alongside?.start();
  };
  const elector = a['leader-elect']
    ? new LeaderElector({
        kubeConfig: o.kubeConfig,
        namespace: a['leader-election-namespace'],
        name: a['leader-election-id'],
        identity: `${hostname()}_${randomUUID()}`,
        leaseDurationMs: a['lease-duration'],
        renewDeadlineMs: a['renew-deadline'],
        retryPeriodMs: a['retry-period'],
        metrics: createLeaderElectionMetrics(o.registry),
        logger,
        ...(o.fence ? { fence: o.fence } : {}),
        // The process exits after a loss: it must not win the lease back while it shuts down.
        campaignAfterLoss: false,
        onStartedLeading: () => {
          logger.info('became leader; starting workers');
          begin();
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
    registry: o.registry,
    readyz: () => [
      ...(work.cachesSynced() ? [] : ['caches not synced']),
      ...work.cachesNotWatchingFor(a['cache-unready-after']).map((name) => `cache ${name}: no open watch for over ${a['cache-unready-after'] / 1000} s`),
    ],
    healthz: () => [
      ...[elector?.leaderHealthProblem()].filter((problem) => problem !== undefined),
      ...work.cachesNotWatchingFor(a['cache-unhealthy-after']).map((name) => `cache ${name}: no open watch for over ${a['cache-unhealthy-after'] / 1000} s`),
    ],
  });

  let shuttingDown = false;
  async function shutdown(code: number): Promise<void> {
    shuttingDown = true;
    logger.info('shutting down');
    o.alongside?.stop();
    const finished = await work.stopWorkers(a['graceful-shutdown-timeout']);
    if (!finished) logger.warn({ timeoutMs: a['graceful-shutdown-timeout'] }, 'reconciles still in flight at the graceful shutdown timeout; the lease is kept (not released) so it expires on its own');
    await elector?.stop({ release: finished });
    await work.stop();
    probes.close();
    process.exit(code);
  }
  process.once('SIGTERM', () => void shutdown(0));
  process.once('SIGINT', () => void shutdown(0));

  try {
    await work.startCaches();
  } catch (error) {
    // A signal before the first lists completed stops the caches: shutdown() ends the process.
    if (shuttingDown) return new Promise<number>(() => undefined);
    throw error;
  }
  logger.info(o.syncedFields ?? {}, 'caches synced');
  if (elector) await elector.run();
  else begin();
  return new Promise<number>(() => undefined);
}

/**
 * A controller command's start: its flags parsed and checked (the lease timing too) and its
 * OperatorConfiguration loaded; or the exit code, the reason already written to stderr.
 */
export async function controllerCommandInput<A extends LeaderProcessSettings & { readonly config?: string | undefined }>(
  argv: readonly string[],
  io: CommandIO,
  usage: string,
  flags: FlagTable,
  schema: z.ZodType<A>,
): Promise<{ readonly a: A; readonly operator: OperatorConfig } | { readonly exitCode: number }> {
  const parsed = parseCommandArgs(argv, io, usage, parseOptions(flags));
  if ('exitCode' in parsed) return { exitCode: parsed.exitCode };
  const args = schema.safeParse(parsed.values);
  if (!args.success) return { exitCode: argsUsageError(io, usage, args.error.issues) };
  const a = args.data;
  const leaseProblem = leaseTimingProblem(a);
  if (leaseProblem) {
    io.stderr(`${leaseProblem}\n`);
    return { exitCode: 2 };
  }
  const operator = await loadOperatorConfigFile(a.config);
  if ('error' in operator) {
    io.stderr(`${operator.error}\n`);
    return { exitCode: 2 };
  }
  return { a, operator: operator.config };
}
