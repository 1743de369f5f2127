// Drives the mutating EnvoyFilter webhook with concurrent UPDATE AdmissionReviews (legacy
// apiserver-proxy filters of random shoots, 1,000 ACL shoots in the cache) and, on the same
// HTTPS server, a bare Fastify JSON echo route with the same bodies; prints throughput and
// p50/p99 of both and their ratio. Keep-alive connections, loopback only.
// usage: npx tsx bench/webhook.ts [seconds=5] [concurrency=32] [shoots=1000]
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { defaultOperatorConfig } from '../src/config/operator-config.js';
import { extensionSchema } from '../src/gardener/objects.js';
import { staticCacheSource } from '../src/webhook/acl-index.js';
import { selfSignedCertificates } from '../src/webhook/serving-certs.js';
import { startWebhookApp } from '../src/webhook/webhook-app.js';
import { MUTATING_WEBHOOK_PATH } from '../src/webhook/webhook-configuration.js';
import { legacyFilterUpdateReview } from '../test/webhook/webhook-fixtures.js';

const SECONDS = Number(process.argv[2] ?? 5);
const CONCURRENCY = Number(process.argv[3] ?? 32);
const SHOOTS = Number(process.argv[4] ?? 1000);
const ECHO_PATH = '/echo';

const id = (i: number) => `shoot--p${i % 50}--s${i}`;
const extensions = Array.from({ length: SHOOTS }, (_, i) =>
  extensionSchema.parse({
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: 'acl', namespace: id(i) },
    spec: { type: 'acl' },
    status: {
      state: {
        gatewayNamespaces: ['istio-ingress'],
        applied: {
          rule: { action: 'ALLOW', type: 'remote_ip', cidrs: Array.from({ length: 10 }, (_, j) => `10.${i % 250}.${j}.0/24`) },
          alwaysAllowed: ['10.250.0.0/16', '100.64.0.0/10'],
          legacyProxyAllowed: ['100.96.0.0/11'],
        },
      },
    },
  }),
);

/** 256 distinct UPDATE reviews, as the API server sends them for Gardener's legacy filters. */
const bodies = Array.from({ length: 256 }, (_, n) => legacyFilterUpdateReview(id((n * 7919) % SHOOTS), 'istio-ingress', `uid-${n}`));

interface Result {
  readonly requests: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
}

async function drive(url: string, ca: string): Promise<Result> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca });
  const latencies: number[] = [];
  const deadline = performance.now() + SECONDS * 1000;
  let next = 0;
  const post = (body: string) =>
    new Promise<void>((resolve, reject) => {
      const request = https.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (response) => {
        if (response.statusCode !== 200) reject(new Error(`HTTP ${response.statusCode}`));
        response.resume();
        response.on('end', resolve);
      });
      request.on('error', reject);
      request.end(body);
    });
  const worker = async () => {
    while (performance.now() < deadline) {
      const body = bodies[next++ % bodies.length] ?? '';
      const started = performance.now();
      await post(body);
      latencies.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { requests: latencies.length, perSecond: latencies.length / elapsed, p50: at(0.5), p99: at(0.99) };
}

const { ca, serving } = await selfSignedCertificates([], ['127.0.0.1']);
const app = await startWebhookApp({
  operator: defaultOperatorConfig(),
  cache: staticCacheSource(extensions),
  validateShoots: false,
  certificates: { pair: serving },
  host: '127.0.0.1',
  port: 0,
  logger: pino({ level: 'warn' }),
  registry: new Registry(),
  extraRoutes: (server) => server.post(ECHO_PATH, async (request) => request.body),
});
try {
  const base = `https://127.0.0.1:${app.port}`;
  await drive(`${base}${MUTATING_WEBHOOK_PATH}`, ca.cert); // warm-up (JIT, index build, TLS sessions)
  const webhook = await drive(`${base}${MUTATING_WEBHOOK_PATH}`, ca.cert);
  const echo = await drive(`${base}${ECHO_PATH}`, ca.cert);
  const bytes = Math.round(bodies.reduce((n, b) => n + b.length, 0) / bodies.length);
  const row = (name: string, r: Result) => `${name.padEnd(22)} ${r.perSecond.toFixed(0).padStart(8)} req/s   p50 ${r.p50.toFixed(2).padStart(7)} ms   p99 ${r.p99.toFixed(2).padStart(7)} ms   (${r.requests} requests)`;
  console.log(`${SHOOTS} ACL shoots cached, ${CONCURRENCY} concurrent keep-alive connections, ${SECONDS} s per run, ~${bytes} B per review`);
  console.log(row('mutate-envoyfilter', webhook));
  console.log(row('json echo (baseline)', echo));
  console.log(`ratio webhook/echo: throughput ${(webhook.perSecond / echo.perSecond).toFixed(2)}, p50 ${(webhook.p50 / echo.p50).toFixed(2)}x, p99 ${(webhook.p99 / echo.p99).toFixed(2)}x`);
} finally {
  await app.stop();
}
