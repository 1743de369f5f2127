import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { z } from 'zod';
import { AclController } from '../actuator/controller.js';
import { ExtensionHeartbeat } from '../actuator/heartbeat.js';
import { KubeClusterClient } from '../actuator/kube-cluster-client.js';
import { LeaseFence } from '../kube/lease-fence.js';
import { LeaderElector } from '../kube/leader-election.js';
import { createLeaderElectionMetrics } from '../kube/metrics.js';
import type { KubeTarget } from '../kube/objects-client.js';
import { WebhookCertificateManager, retireManagedWebhookConfiguration } from '../webhook/certificate-manager.js';
import { describeError } from '../kube/errors.js';
import { servingNames } from '../webhook/serving-names.js';
import { serviceHasReadyEndpoint, urlAnswers } from '../webhook/webhook-backend.js';
import { CONFIGURATION_NAME, mutatingWebhookConfiguration, type ClientTarget } from '../webhook/webhook-configuration.js';
import type { CommandIO } from './command-io.js';
import { argsUsageError, parseCommandArgs } from './command-args.js';
import { CONTROLLER_FLAGS } from './controller-flags.js';
import { flagsSchema, parseOptions } from './flag-table.js';
import { KubeConfigProblem, loadKubeConfig } from './kubeconfig.js';
import { loadOperatorConfigFile } from './operator-config-file.js';
import { startProbeServer } from './probe-server.js';
import { CONTROLLER_USAGE } from './usage-texts.js';

/** Secrets <prefix>-ca and <prefix>-tls; the chart mounts the latter into the webhook Pods. */
export const SEED_WEBHOOK_SECRET_PREFIX = 'gardener-acl-webhook';

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { CONTROLLER_USAGE };

const argsSchema = flagsSchema(CONTROLLER_FLAGS)
  .refine((a) => !(a['no-seed-webhook'] && a['webhook-certificates-namespace']), {
    error: '--no-seed-webhook and --webhook-certificates-namespace contradict each other: give one',
    path: ['no-seed-webhook'],
  })
  .refine((a) => !a['webhook-certificates-namespace'] || (a['webhook-service'] === undefined) !== (a['webhook-url'] === undefined), {
    error: 'give exactly one of --webhook-service and --webhook-url with --webhook-certificates-namespace',
    path: ['webhook-certificates-namespace'],
  });

export async function controllerCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, CONTROLLER_USAGE, parseOptions(CONTROLLER_FLAGS));
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse(parsed.values);
  if (!args.success) return argsUsageError(io, CONTROLLER_USAGE, args.error.issues);
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
  let kubeConfig: KubeConfig;
  try {
    kubeConfig = loadKubeConfig(a.kubeconfig);
  } catch (error) {
    if (!(error instanceof KubeConfigProblem)) throw error;
    io.stderr(`${error.message}\n`);
    return 2;
  }

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
    ...(a['served-check-interval'] > 0 ? { servedCheck: { intervalMs: a['served-check-interval'], maxReadBytes: a['served-check-max-read-mib'] * 2 ** 20 } } : {}),
  });
  const certificates = a['webhook-certificates-namespace']
    ? seedWebhookCertificates(a, a['webhook-certificates-namespace'], { kubeConfig, ...(fence ? { fence } : {}) }, operator.config.legacyProxyPort, logger, () => {
        // Legacy filters written while the registration was missing or wrong lack the RBAC filter: nudge them all now.
        logger.info('the webhook registration was repaired; reconciling every shoot so that Gardener’s legacy filters are admitted again');
        controller.resync();
      })
    : undefined;
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
        // The process exits after a loss: it must not win the lease back while it shuts down.
        campaignAfterLoss: false,
        onStartedLeading: () => {
          logger.info('became leader; starting workers');
          controller.startWorkers();
          heartbeat.start();
          void certificates?.start();
          if (a['no-seed-webhook']) void retireWebhookConfiguration();
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
  let shuttingDown = false;
  async function shutdown(code: number): Promise<void> {
    shuttingDown = true;
    logger.info('shutting down');
    heartbeat.stop();
    certificates?.stop();
    const finished = await controller.stopWorkers(a['graceful-shutdown-timeout']);
    if (!finished) logger.warn({ timeoutMs: a['graceful-shutdown-timeout'] }, 'reconciles still in flight at the graceful shutdown timeout; the lease is kept (not released) so it expires on its own');
    await elector?.stop({ release: finished });
    await controller.stop();
    probes.close();
    process.exit(code);
  }
  // Without the seed webhook (chart: webhook.enabled false) a registration an earlier install made
  // must not stay: it would refuse every legacy filter write, failing closed on a missing Service.
  async function retireWebhookConfiguration(): Promise<void> {
    const ref = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', name: CONFIGURATION_NAME };
    try {
      await retireManagedWebhookConfiguration({ kubeConfig, ...(fence ? { fence } : {}) }, ref, logger);
    } catch (error) {
      logger.warn({ err: describeError(error), configuration: `${ref.kind}/${ref.name}` }, 'could not check or delete the webhook configuration an earlier install made');
    }
  }

  process.once('SIGTERM', () => void shutdown(0));
  process.once('SIGINT', () => void shutdown(0));

  try {
    await controller.startCaches();
  } catch (error) {
    // A signal before the first lists completed stops the caches: shutdown() ends the process.
    if (shuttingDown) return new Promise<number>(() => undefined);
    throw error;
  }
  logger.info({ combinedForm: operator.config.combinedForm, protectedPorts: operator.config.protectedPorts, protectedHeaders: operator.config.protectedHeaders }, 'caches synced');
  if (elector) await elector.run();
  else {
    controller.startWorkers();
    heartbeat.start();
    void certificates?.start();
    if (a['no-seed-webhook']) void retireWebhookConfiguration();
  }
  // Runs until a signal or lost leadership ends the process.
  return new Promise<number>(() => undefined);
}

/** The seed webhook's certificates and its MutatingWebhookConfiguration, kept by the leader. */
function seedWebhookCertificates(
  a: z.output<typeof argsSchema>,
  namespace: string,
  target: KubeTarget & { readonly kubeConfig: KubeConfig },
  legacyProxyPort: number,
  logger: Logger,
  onConfigurationRewritten: () => void,
): WebhookCertificateManager {
  const clientTarget: ClientTarget = a['webhook-url'] ? { url: a['webhook-url'] } : { service: a['webhook-service']! };
  const owner = a['webhook-config-owner'];
  return new WebhookCertificateManager({
    target,
    namespace,
    caSecretName: `${SEED_WEBHOOK_SECRET_PREFIX}-ca`,
    servingSecretName: `${SEED_WEBHOOK_SECRET_PREFIX}-tls`,
    ...servingNames(clientTarget),
    caValidityMs: a['webhook-ca-validity'],
    servingValidityMs: a['webhook-cert-validity'],
    logger,
    onConfigurationRewritten,
    configurations: [
      {
        target,
        ...(owner ? { owner: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: owner } } : {}),
        build: (caBundlePem) =>
          mutatingWebhookConfiguration({ target: clientTarget, caBundlePem, timeoutSeconds: a['webhook-timeout-seconds'], controllerUsername: a['controller-username'], legacyProxyPort }),
        // Registered only once a webhook Pod is ready (or the URL answers): never a Fail webhook without a server.
        backendReady: 'url' in clientTarget ? () => urlAnswers(clientTarget.url) : () => serviceHasReadyEndpoint(target.kubeConfig, clientTarget.service.namespace, clientTarget.service.name),
      },
    ],
  });
}
