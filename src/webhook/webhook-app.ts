// Assembles the webhook process: the routes of the enabled webhooks, the HTTPS server and its
// certificate source; shared by `gardener-acl webhook`, the tests and the benchmark.
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { OperatorConfig } from '../config/operator-config.js';
import { AclIndex, type AdmissionCacheSource } from './acl-index.js';
import { admitEnvoyFilter, type StoredUidLookup } from './envoy-filter-mutator.js';
import { CertWatcher, type KeyPair } from './serving-certs.js';
import { validateGarden } from './garden-validator.js';
import { validateShoot } from './shoot-validator.js';
import { GARDEN_WEBHOOK_PATH, MUTATING_WEBHOOK_PATH, VALIDATING_WEBHOOK_PATH } from './webhook-configuration.js';
import { createWebhookMetrics } from './webhook-metrics.js';
import { createWebhookServer, rotateServingCertificate, type WebhookRoute, type WebhookServer } from './webhook-server.js';

export type CertificateSource = { readonly dir: string; readonly pollIntervalMs?: number; readonly watch?: boolean } | { readonly pair: KeyPair };

export interface WebhookAppOptions {
  readonly operator: OperatorConfig;
  /** Seed caches; the EnvoyFilter webhook is served only when given. */
  readonly cache?: AdmissionCacheSource;
  /** Serve the Shoot validating webhook. */
  readonly validateShoots: boolean;
  /** Serve the Garden validating webhook (runtime cluster). */
  readonly validateGardens?: boolean;
  readonly certificates: CertificateSource;
  readonly host: string;
  readonly port: number;
  readonly logger: Logger;
  readonly registry: Registry;
  /** The controller's authenticated user: its writes of combined filters pass unchanged. */
  readonly controllerUsername?: string;
  /** Reads a stored EnvoyFilter's uid: only a review of a stored legacy filter gets the shoot's ACL (envoy-filter-mutator.ts). */
  readonly storedUid?: StoredUidLookup;
  /** Extra routes on the same server (the benchmark's echo baseline). */
  readonly extraRoutes?: (server: WebhookServer) => void;
}

export interface RunningWebhookApp {
  readonly server: WebhookServer;
  readonly port: number;
  /** Listening and, for the EnvoyFilter webhook, caches synced. */
  ready(): boolean;
  /**
   * Before a shutdown: every response from now on closes its connection, so the API server's
   * kept-alive connections leave this replica one by one while it still answers, and none is
   * left to be cut (a cut connection with a request on it is a failed call) when it closes.
   */
  drain(): void;
  stop(): Promise<void>;
}

export function admissionRoutes(
  operator: OperatorConfig,
  cache: AdmissionCacheSource | undefined,
  serve: { readonly shoots: boolean; readonly gardens?: boolean | undefined },
  controllerUsername?: string,
  storedUid?: StoredUidLookup,
): WebhookRoute[] {
  const routes: WebhookRoute[] = [];
  if (cache) {
    const index = new AclIndex(cache);
    routes.push({ name: 'envoyfilter', path: MUTATING_WEBHOOK_PATH, handle: (r) => admitEnvoyFilter(r, index, operator, controllerUsername, storedUid) });
  }
  if (serve.shoots) routes.push({ name: 'shoot', path: VALIDATING_WEBHOOK_PATH, handle: (r) => validateShoot(r, operator.maxCIDRs) });
  if (serve.gardens) routes.push({ name: 'garden', path: GARDEN_WEBHOOK_PATH, handle: (r) => validateGarden(r, operator.maxCIDRs) });
  return routes;
}

export async function startWebhookApp(options: WebhookAppOptions): Promise<RunningWebhookApp> {
  const { logger } = options;
  const metrics = createWebhookMetrics(options.registry);
  // The watcher starts before the server exists (the server needs its first pair).
  const serving: { server?: WebhookServer } = {};
  const source = options.certificates;
  const watcher =
    'dir' in source
      ? new CertWatcher({
          dir: source.dir,
          pollIntervalMs: source.pollIntervalMs,
          watch: source.watch,
          onRead: (ok) => metrics.certificateRead(ok),
          onChange: (pair) => {
            if (serving.server) rotateServingCertificate(serving.server, pair);
            logger.info({ dir: source.dir }, 'serving certificate reloaded');
          },
          // Usually a rotation caught between writing the certificate and the key; the next
          // event or poll picks up the complete pair, the old one is served meanwhile.
          onError: (error) => logger.warn({ err: error, dir: source.dir }, 'serving certificate not (re)loaded; keeping the current one'),
        })
      : undefined;
  const tls = watcher ? await watcher.start() : (source as { pair: KeyPair }).pair;
  const listening = createWebhookServer({ tls, routes: admissionRoutes(options.operator, options.cache, { shoots: options.validateShoots, gardens: options.validateGardens }, options.controllerUsername, options.storedUid), logger, metrics });
  serving.server = listening;
  let draining = false;
  listening.addHook('onSend', async (_request, reply) => {
    if (draining) void reply.header('connection', 'close');
  });
  options.extraRoutes?.(listening);
  try {
    await listening.listen({ host: options.host, port: options.port });
  } catch (error) {
    watcher?.stop();
    throw error;
  }
  return {
    server: listening,
    port: (listening.server.address() as AddressInfo).port,
    ready: () => listening.server.listening && (options.cache?.synced() ?? true),
    drain: () => {
      draining = true;
    },
    stop: async () => {
      watcher?.stop();
      await listening.close();
    },
  };
}
