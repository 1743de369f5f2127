import type { KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { z } from 'zod';
import { AclController } from '../actuator/controller.js';
import { ExtensionHeartbeat } from '../actuator/heartbeat.js';
import { KubeClusterClient } from '../actuator/kube-cluster-client.js';
import { LeaseFence } from '../kube/lease-fence.js';
import type { KubeTarget } from '../kube/objects-client.js';
import { WebhookCertificateManager, retireManagedWebhookConfiguration } from '../webhook/certificate-manager.js';
import { describeError } from '../kube/errors.js';
import { servingNames } from '../webhook/serving-names.js';
import { serviceHasReadyEndpoint, urlAnswers } from '../webhook/webhook-backend.js';
import { CONFIGURATION_NAME, mutatingWebhookConfiguration, type ClientTarget } from '../webhook/webhook-configuration.js';
import type { CommandIO } from './command-io.js';
import { CONTROLLER_FLAGS } from './controller-flags.js';
import { flagsSchema } from './flag-table.js';
import { KubeConfigProblem, loadKubeConfig } from './kubeconfig.js';
import { controllerCommandInput, runLeaderProcess } from './leader-process.js';
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
  const input = await controllerCommandInput(argv, io, CONTROLLER_USAGE, CONTROLLER_FLAGS, argsSchema);
  if ('exitCode' in input) return input.exitCode;
  const { a, operator } = input;

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
    operator: operator,
    logger,
    registry,
    workers: a.workers,
    resyncPeriodMs: a['resync-period'],
    combinedMinIntervalMs: a['combined-min-interval'],
    ...(a['served-check-interval'] > 0 ? { servedCheck: { intervalMs: a['served-check-interval'], maxReadBytes: a['served-check-max-read-mib'] * 2 ** 20 } } : {}),
  });
  const certificates = a['webhook-certificates-namespace']
    ? seedWebhookCertificates(a, a['webhook-certificates-namespace'], { kubeConfig, ...(fence ? { fence } : {}) }, operator.legacyProxyPort, logger, () => {
        // Legacy filters written while the registration was missing or wrong lack the RBAC filter: nudge them all now.
        logger.info('the webhook registration was repaired; reconciling every shoot so that Gardener’s legacy filters are admitted again');
        controller.resync();
      })
    : undefined;
  // The writer renews Gardener's extension heartbeat, which gardenlet reads next to the conditions we report.
  const heartbeat = new ExtensionHeartbeat(client, a['leader-election-namespace'], a['leader-election-id'], logger);
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
  return runLeaderProcess({
    settings: a,
    kubeConfig,
    logger,
    registry,
    fence,
    work: controller,
    alongside: {
      start: () => {
        heartbeat.start();
        void certificates?.start();
        if (a['no-seed-webhook']) void retireWebhookConfiguration();
      },
      stop: () => {
        heartbeat.stop();
        certificates?.stop();
      },
    },
    syncedFields: { combinedForm: operator.combinedForm, protectedPorts: operator.protectedPorts, protectedHeaders: operator.protectedHeaders },
  });
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
