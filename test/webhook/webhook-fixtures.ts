// Shared pieces of the webhook tests: Gardener-shaped legacy EnvoyFilters, Extensions with an
// applied ACL in status.state (what the controller records), a running webhook app and an
// HTTPS client that trusts its CA.
import https from 'node:https';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Registry } from 'prom-client';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import type { AdmissionCacheSource } from '../../src/webhook/acl-index.js';
import { CERT_FILE, KEY_FILE, selfSignedCertificates, type KeyPair } from '../../src/webhook/serving-certs.js';
import { startWebhookApp, type RunningWebhookApp, type WebhookAppOptions } from '../../src/webhook/webhook-app.js';
import { instantiate } from '../istio/fixture-templates.js';
import { testLogger } from '../kube/kube-test-helpers.js';

/** Gardener's per-shoot EnvoyFilter for the legacy apiserver-proxy port, as Gardener writes it. */
export function legacyFilter(technicalID: string, namespace: string, name = technicalID): Record<string, unknown> {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace },
    spec: {
      workloadSelector: { labels: { app: 'istio-ingressgateway', istio: 'ingressgateway' } },
      configPatches: instantiate('fragments/legacy-apiserver-proxy-chain.yaml', { cluster: `outbound|443||kube-apiserver.${technicalID}.svc.cluster.local`, apiserverIP: '240.0.0.10' }),
    },
  };
}

/** The AdmissionReview the API server sends for gardenlet's UPDATE of a shoot's legacy apiserver-proxy filter. */
export function legacyFilterUpdateReview(technicalID: string, namespace: string, uid: string): string {
  const object = legacyFilter(technicalID, namespace);
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: 'networking.istio.io', version: 'v1alpha3', kind: 'EnvoyFilter' },
      resource: { group: 'networking.istio.io', version: 'v1alpha3', resource: 'envoyfilters' },
      name: technicalID,
      namespace,
      operation: 'UPDATE',
      userInfo: { username: 'system:serviceaccount:garden:gardenlet' },
      object,
      oldObject: object,
      options: { kind: 'UpdateOptions', apiVersion: 'meta.k8s.io/v1' },
    },
  });
}

/** Extension.status.state as the controller writes it after applying an ALLOW rule. */
export function appliedState(cidrs: readonly string[], gatewayNamespaces: readonly string[] = ['istio-ingress']): Record<string, unknown> {
  return {
    gatewayNamespaces: [...gatewayNamespaces],
    applied: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [...cidrs] }, alwaysAllowed: ['10.250.0.0/16'], legacyProxyAllowed: ['100.96.0.0/11'] },
  };
}

export interface TestWebhook {
  readonly app: RunningWebhookApp;
  readonly ca: KeyPair;
  readonly certDir: string;
  readonly url: string;
  /** Writes a new serving pair into the watched directory (key first, like a Secret volume update would appear to a poller). */
  rotate(pair: KeyPair): Promise<void>;
  stop(): Promise<void>;
}

/** A webhook app on 127.0.0.1 serving a self-signed pair from a watched directory. */
export async function startTestWebhook(
  cache: AdmissionCacheSource | undefined,
  options: { readonly registry?: Registry; readonly watchFiles?: boolean; readonly extraRoutes?: WebhookAppOptions['extraRoutes']; readonly storedUid?: WebhookAppOptions['storedUid'] } = {},
): Promise<TestWebhook> {
  const certDir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-webhook-'));
  const { ca, serving } = await selfSignedCertificates([], ['127.0.0.1']);
  const write = async (pair: KeyPair) => {
    await writeFile(path.join(certDir, KEY_FILE), pair.key);
    await writeFile(path.join(certDir, CERT_FILE), pair.cert);
  };
  await write(serving);
  const app = await startWebhookApp({
    operator: defaultOperatorConfig(),
    cache,
    validateShoots: true,
    validateGardens: true,
    certificates: { dir: certDir, pollIntervalMs: 250, watch: options.watchFiles ?? true },
    host: '127.0.0.1',
    port: 0,
    logger: testLogger(),
    registry: options.registry ?? new Registry(),
    extraRoutes: options.extraRoutes,
    ...(options.storedUid ? { storedUid: options.storedUid } : {}),
  });
  return {
    app,
    ca,
    certDir,
    url: `https://127.0.0.1:${app.port}`,
    rotate: write,
    stop: async () => {
      await app.stop();
      await rm(certDir, { recursive: true, force: true });
    },
  };
}

export interface HttpsAnswer {
  readonly status: number;
  readonly body: string;
  readonly peerCertificateSerial: string;
}

/** POSTs a body over a fresh TLS connection (no keep-alive unless an agent is given). */
export function postHttps(url: string, ca: string, body: string | Buffer, options: { contentType?: string; agent?: https.Agent } = {}): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const request = https.request(
      url,
      { method: 'POST', ca, agent: options.agent ?? false, headers: { 'content-type': options.contentType ?? 'application/json', 'content-length': Buffer.byteLength(body) } },
      (response) => {
        const chunks: Buffer[] = [];
        const serial = (response.socket as import('node:tls').TLSSocket).getPeerCertificate().serialNumber ?? '';
        response.on('data', (c: Buffer) => chunks.push(c));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), peerCertificateSerial: serial }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}
