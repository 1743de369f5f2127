// `gardener-acl webhook`: the admission webhook server; `gardener-acl webhook-config`: its
// registration objects (MutatingWebhookConfiguration for EnvoyFilters on the seed,
// ValidatingWebhookConfiguration for Shoots in the garden).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { stringify as stringifyYaml } from 'yaml';
import { z } from 'zod';
import type { StoredUidLookup } from '../webhook/envoy-filter-mutator.js';
import { storedEnvoyFilterUid } from '../webhook/stored-filter-uid.js';
import { InformerCacheSource } from '../webhook/informer-cache-source.js';
import { WebhookCertificateManager } from '../webhook/certificate-manager.js';
import { CERT_FILE, KEY_FILE, readKeyPair, selfSignedCertificates, serviceDnsNames, writeKeyPair, type KeyPair } from '../webhook/serving-certs.js';
import { servingNamesOf } from '../webhook/serving-names.js';
import { startWebhookApp, type CertificateSource } from '../webhook/webhook-app.js';
import { gardenWebhookConfiguration, mutatingWebhookConfiguration, validatingWebhookConfiguration, type ClientTarget } from '../webhook/webhook-configuration.js';
import { argsUsageError, parseCommandArgs } from './command-args.js';
import { startProbeServer } from './probe-server.js';
import { STUCK_CACHE_MS } from './probe-thresholds.js';
import type { CommandIO } from './command-io.js';
import { flagsSchema, parseOptions } from './flag-table.js';
import { WEBHOOK_CONFIG_FLAGS, WEBHOOK_FLAGS } from './webhook-flags.js';
import { loadKubeConfig } from './kubeconfig.js';
import { loadOperatorConfigFile } from './operator-config-file.js';
import { WEBHOOK_CONFIG_USAGE, WEBHOOK_USAGE } from './usage-texts.js';

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { WEBHOOK_USAGE };

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { WEBHOOK_CONFIG_USAGE };

const serveArgs = flagsSchema(WEBHOOK_FLAGS)
  .refine((a) => !a['ca-out'] || a['self-signed'], { error: '--ca-out needs --self-signed', path: ['ca-out'] })
  .refine((a) => !(a['self-signed'] && a['certificates-namespace']), { error: 'give --self-signed or --certificates-namespace, not both', path: ['certificates-namespace'] })
  .refine((a) => !a['certificates-namespace'] || (a.service === undefined) !== (a['register-url'] === undefined), {
    error: 'give exactly one of --service and --register-url with --certificates-namespace',
    path: ['certificates-namespace'],
  });

const configArgs = flagsSchema(WEBHOOK_CONFIG_FLAGS)
  .refine((a) => (a.url === undefined) !== (a.service === undefined), { error: 'give exactly one of --url and --service' })
  .refine((a) => a['controller-user'] === undefined || a['controller-username'] === undefined || a['controller-user'] === a['controller-username'], {
    error: '--controller-user and --controller-username name the same flag; give one',
  });

/**
 * Certificates this process keeps itself: the stored pair is written into --cert-dir after every
 * pass (so the server's watcher takes it), and the server starts once the first pair is there.
 */
async function managedCertificates(a: z.output<typeof serveArgs>, namespace: string, legacyProxyPort: number, logger: Logger): Promise<WebhookCertificateManager> {
  const clientTarget: ClientTarget = a['register-url'] ? { url: a['register-url'] } : { service: a.service! };
  // The runtime cluster's API server calls the Garden webhook through its own Service: the URL the
  // virtual garden calls may not resolve there.
  const gardenTarget: ClientTarget = a['garden-service'] ? { service: a['garden-service'] } : clientTarget;
  const configTarget = loadKubeConfig(a['webhook-config-kubeconfig'] ?? process.env.GARDEN_KUBECONFIG ?? a.kubeconfig);
  const owner = a['webhook-config-owner'];
  const gardenOwner = a['garden-webhook-config-owner'] ?? owner;
  const gardens = a.webhooks.includes('garden');
  let firstPair: () => void = () => undefined;
  const written = new Promise<void>((resolve) => (firstPair = resolve));
  const options = { timeoutSeconds: a['timeout-seconds'], controllerUsername: a['controller-username'], legacyProxyPort };
  const manager = new WebhookCertificateManager({
    target: loadKubeConfig(a.kubeconfig),
    namespace,
    caSecretName: `${a['certificates-name']}-ca`,
    servingSecretName: `${a['certificates-name']}-tls`,
    ...servingNamesOf([clientTarget, ...(gardens ? [gardenTarget] : [])]),
    caValidityMs: a['ca-validity'],
    servingValidityMs: a['cert-validity'],
    logger,
    onServing: async (pair) => {
      await writeKeyPair(a['cert-dir'], pair);
      firstPair();
    },
    configurations: [
      ...(a.webhooks.includes('envoyfilter') ? [{ build: mutatingWebhookConfiguration, target: configTarget, client: clientTarget, ownedBy: owner }] : []),
      ...(a.webhooks.includes('shoot') ? [{ build: validatingWebhookConfiguration, target: configTarget, client: clientTarget, ownedBy: owner }] : []),
      // Gardens live in the runtime cluster, the server's own.
      ...(gardens ? [{ build: gardenWebhookConfiguration, target: loadKubeConfig(a.kubeconfig), client: gardenTarget, ownedBy: gardenOwner }] : []),
    ].map(({ build, target, client, ownedBy }) => ({
      target,
      ...(ownedBy ? { owner: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: ownedBy } } : {}),
      build: (caBundlePem: string) => build({ ...options, target: client, caBundlePem }),
    })),
  });
  void manager.start();
  await written;
  return manager;
}

async function certificateSource(a: z.output<typeof serveArgs>): Promise<CertificateSource> {
  if (!a['self-signed']) return { dir: a['cert-dir'], pollIntervalMs: a['cert-poll-interval'] };
  const dnsNames = a.service ? serviceDnsNames(a.service.name, a.service.namespace) : ['localhost'];
  const { ca, serving } = await selfSignedCertificates(dnsNames, ['127.0.0.1']);
  if (a['ca-out']) {
    await mkdir(path.dirname(a['ca-out']), { recursive: true });
    await writeFile(a['ca-out'], ca.cert);
  }
  return { pair: serving satisfies KeyPair };
}

export async function webhookCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, WEBHOOK_USAGE, parseOptions(WEBHOOK_FLAGS));
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = serveArgs.safeParse(parsed.values);
  if (!args.success) return argsUsageError(io, WEBHOOK_USAGE, args.error.issues);
  const a = args.data;
  const loaded = await loadOperatorConfigFile(a.config);
  if ('error' in loaded) {
    io.stderr(`${loaded.error}\n`);
    return 2;
  }
  const operator = loaded.config;
  const logger = pino({ level: a['log-level'], base: { component: 'gardener-acl-webhook' } });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  // Certificates mounted into --cert-dir must be there at start: say so, with the other ways.
  if (!a['self-signed'] && !a['certificates-namespace']) {
    try {
      await readKeyPair(a['cert-dir']);
    } catch (error) {
      io.stderr(
        `--cert-dir ${a['cert-dir']}: no usable ${CERT_FILE} and ${KEY_FILE} (${(error as Error).message.split('\n')[0] ?? ''}); mount the serving Secret there, ` +
          `or give --certificates-namespace NS (the server keeps its own certificates) or --self-signed (development)\n`,
      );
      return 2;
    }
  }
  let cache: InformerCacheSource | undefined;
  let storedUid: StoredUidLookup | undefined;
  if (a.webhooks.includes('envoyfilter')) {
    const kubeConfig = loadKubeConfig(a.kubeconfig);
    cache = new InformerCacheSource(kubeConfig, logger);
    storedUid = storedEnvoyFilterUid(kubeConfig);
  }
  const certificates = a['certificates-namespace'] ? await managedCertificates(a, a['certificates-namespace'], operator.legacyProxyPort, logger) : undefined;
  let app: Awaited<ReturnType<typeof startWebhookApp>>;
  try {
    app = await startWebhookApp({
      operator,
      cache,
      validateShoots: a.webhooks.includes('shoot'),
      validateGardens: a.webhooks.includes('garden'),
      ...(a['controller-username'] ? { controllerUsername: a['controller-username'] } : {}),
      ...(storedUid ? { storedUid } : {}),
      certificates: await certificateSource(a),
      host: a.host,
      port: a.port,
      logger,
      registry,
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    io.stderr(`--port ${a.port}: another process listens on ${a.host}:${a.port}; stop it or choose another port with --port\n`);
    certificates?.stop();
    await cache?.stop();
    return 2;
  }
  // A rollout must reject no admission call (failurePolicy Fail): on SIGTERM readiness goes first
  // and the server keeps answering while the endpoint is taken out of the Service; then the
  // listener closes, letting requests in flight finish.
  let draining = false;
  const probes = await startProbeServer({
    port: a['probe-port'],
    registry,
    readyz: () => (draining ? ['shutting down'] : app.ready() ? [] : ['not listening or caches not synced']),
    // Readiness stays with a cache that only lags (the webhook keeps admitting from it); a cache
    // that has followed no watch for minutes is stuck, and a restart lists afresh.
    healthz: () => (cache?.stuck(STUCK_CACHE_MS) ?? []).map((name) => `cache ${name}: no open watch for over ${STUCK_CACHE_MS / 1000} s`),
  });
  logger.info({ port: app.port, webhooks: a.webhooks }, 'webhook server listening');
  async function shutdown(): Promise<void> {
    if (draining) return;
    draining = true;
    app.drain();
    logger.info({ delayMs: a['shutdown-delay'] }, 'shutting down: unready, still serving (closing each connection after its response) until the delay is over');
    await new Promise((resolve) => setTimeout(resolve, a['shutdown-delay']));
    certificates?.stop();
    await app.stop();
    probes.close();
    await cache?.stop();
    process.exit(0);
  }
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
  // Readiness follows the caches; requests for EnvoyFilters are refused until they are synced.
  await cache?.start();
  if (cache) logger.info('caches synced');
  return new Promise<number>(() => undefined);
}

export async function webhookConfigCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, WEBHOOK_CONFIG_USAGE, parseOptions(WEBHOOK_CONFIG_FLAGS));
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = configArgs.safeParse(parsed.values);
  if (!args.success) return argsUsageError(io, WEBHOOK_CONFIG_USAGE, args.error.issues);
  const a = args.data;
  let caBundlePem: string;
  try {
    caBundlePem = await readFile(a['ca-bundle-file'], 'utf8');
  } catch (error) {
    io.stderr(`--ca-bundle-file: ${(error as Error).message}\n`);
    return 2;
  }
  if (!caBundlePem.includes('-----BEGIN CERTIFICATE-----')) {
    io.stderr(`--ca-bundle-file: ${a['ca-bundle-file']} holds no PEM certificate\n`);
    return 2;
  }
  const target: ClientTarget = a.url ? { url: a.url } : { service: a.service! };
  const options = { target, caBundlePem, timeoutSeconds: a['timeout-seconds'], controllerUsername: a['controller-username'] ?? a['controller-user'], legacyProxyPort: a['legacy-proxy-port'] };
  const documents = [
    ...(a.webhooks.includes('envoyfilter') ? [mutatingWebhookConfiguration(options)] : []),
    ...(a.webhooks.includes('shoot') ? [validatingWebhookConfiguration(options)] : []),
    ...(a.webhooks.includes('garden') ? [gardenWebhookConfiguration(options)] : []),
  ];
  io.stdout(documents.map((d) => stringifyYaml(d)).join('---\n'));
  return 0;
}
