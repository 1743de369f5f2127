// What bench/controller.ts and bench/soak.ts share: a seed shaped like a real one on a test
// kube-apiserver, the compiled processes as the seed chart runs them (its NODE_OPTIONS and memory
// limits), and the arithmetic of their Prometheus metrics.
import { execFileSync, spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { createObject, mergePatch } from '../src/kube/objects-client.js';
import { MUTATING_WEBHOOK_PATH } from '../src/webhook/webhook-configuration.js';
import { DEFAULT_GW, ZONAL_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../test/actuator/seed-fixture.js';
import type { ControlPlane } from '../test/kube/control-plane.js';
import { legacyFilterUpdateReview, postHttps } from '../test/webhook/webhook-fixtures.js';
import { withApiRetry } from './api-retry.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
export const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

/** Shoot i's ACL: one IPv4 and one IPv6 range, and /24s up to `count` ranges in all. */
export const shootCidrs = (i: number, count: number): string[] => [
  `${10 + (i % 200)}.${i % 256}.0.0/16`,
  `2001:db8:${i.toString(16)}::/48`,
  ...Array.from({ length: count - 2 }, (_, j) => `${100 + (j % 100)}.${i % 256}.${Math.floor(i / 256) % 256}.0/24`),
];

/** N ACL shoots over 50 projects, alternately on the default and the zonal gateway. */
export function benchShoots(count: number, cidrs: number): ShootFixture[] {
  return Array.from({ length: count }, (_, i) => ({
    project: `p${i % 50}`,
    name: `s${i}`,
    providerConfig: allowRule(...shootCidrs(i, cidrs)),
    gateway: i % 2 ? ZONAL_GW : DEFAULT_GW,
    egressCIDRs: [`198.51.${i % 256}.1/32`],
  }));
}

/** The ranges every bench shoot admits whatever its rule: seed nodes and pods, shoot nodes (seed-fixture.ts), and its egress. */
export const alwaysAdmitted = (shoot: ShootFixture): string[] => ['10.250.0.0/16', '10.96.0.0/11', '10.180.0.0/16', ...(shoot.egressCIDRs ?? ['198.51.100.1/32'])];

export async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) await work(items[next++] as T);
  }));
}

export const OTHER_EXTENSION_TYPES = ['dns', 'os', 'networking', 'provider'] as const;

/**
 * Creates the gateways and the shoots, and what a real seed adds that the extension never reads:
 * a CloudProfile (machine images and types, ~40 KB) in each Cluster and four Extensions of other
 * types per shoot with their own providerConfig. Returns the seconds it took.
 */
export async function createRealisticSeed(kc: KubeConfig, shoots: readonly ShootFixture[]): Promise<number> {
  const started = Date.now();
  await withApiRetry('create gateways', () => createSeed(kc, [DEFAULT_GW, ZONAL_GW], []));
  await pool(shoots, 16, (s) => withApiRetry(`create ${technicalID(s)}`, () => createSeed(kc, [], [s])));
  const cloudProfile = { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'CloudProfile', metadata: { name: 'provider' }, spec: { machineImages: Array.from({ length: 40 }, (_, i) => ({ name: `image-${i}`, versions: Array.from({ length: 8 }, (_, j) => ({ version: `${i}.${j}.0`, architectures: ['amd64', 'arm64'], cri: [{ name: 'containerd' }] })) })), machineTypes: Array.from({ length: 60 }, (_, i) => ({ name: `m${i}.large`, cpu: `${i % 32}`, memory: `${i}Gi`, gpu: '0', usable: true, architecture: 'amd64' })) } };
  await pool(shoots, 16, async (s) => {
    const ns = technicalID(s);
    await withApiRetry(`cloudProfile ${ns}`, () => mergePatch(kc, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster', name: ns }, { spec: { cloudProfile } }));
    for (const type of OTHER_EXTENSION_TYPES) {
      await withApiRetry(`extension ${type} ${ns}`, () =>
        createObject(kc, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', metadata: { name: type, namespace: ns }, spec: { type, providerConfig: { apiVersion: `${type}.extensions.gardener.cloud/v1alpha1`, kind: 'Config', settings: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`setting${i}`, `value-${i}-${ns}`])) } } }),
      );
    }
  });
  return (Date.now() - started) / 1000;
}

/** Compiles the project into dist/ as the image does (tsc, no source maps). */
export function compileDist(): void {
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', path.join(ROOT, 'tsconfig.json'), '--outDir', path.join(ROOT, 'dist'), '--sourceMap', 'false'], { stdio: 'inherit' });
}

const memorySchema = z.string().regex(/^\d+(Mi|Gi)$/);
const heapSchema = z.object({ maxOldSpaceMiB: z.number().int(), maxSemiSpaceMiB: z.number().int() }).nullish();
const chartValuesSchema = z.looseObject({
  resources: z.looseObject({
    controller: z.looseObject({ limits: z.looseObject({ memory: memorySchema }).optional() }),
    webhook: z.looseObject({ limits: z.looseObject({ memory: memorySchema }).optional() }),
  }),
  controller: z.looseObject({ heap: heapSchema }),
  webhook: z.looseObject({ heap: heapSchema }),
});

export interface ProcessMemorySettings {
  readonly limitMiB: number | undefined;
  readonly nodeOptions: string | undefined;
}

/** The memory limit (MiB) and NODE_OPTIONS the seed chart gives the controller and the webhook by default. */
export async function chartMemorySettings(): Promise<{ controller: ProcessMemorySettings; webhook: ProcessMemorySettings }> {
  const values = chartValuesSchema.parse(parseYaml(await readFile(path.join(ROOT, 'charts/gardener-acl/values.yaml'), 'utf8')));
  const settings = (limit: string | undefined, heap: z.infer<typeof heapSchema>): ProcessMemorySettings => ({
    limitMiB: limit === undefined ? undefined : Number.parseInt(limit, 10) * (limit.endsWith('Gi') ? 1024 : 1),
    nodeOptions: heap ? `--max-old-space-size=${heap.maxOldSpaceMiB} --max-semi-space-size=${heap.maxSemiSpaceMiB}` : undefined,
  });
  return {
    controller: settings(values.resources.controller.limits?.memory, values.controller.heap),
    webhook: settings(values.resources.webhook.limits?.memory, values.webhook.heap),
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** The sum of every sample of `name` (a metric name, or a name and the start of its labels). */
export function metric(text: string, name: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(name) && !l.startsWith('#'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

/** gardener_acl_api_writes_total by "verb kind". */
export function writesByKind(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n').filter((l) => l.startsWith('gardener_acl_api_writes_total{'))) {
    const verb = /verb="([^"]+)"/.exec(line)?.[1];
    const kind = /kind="([^"]+)"/.exec(line)?.[1];
    out[`${verb} ${kind}`] = Number(line.split(' ').pop());
  }
  return out;
}

/** The sample at quantile q (0..1) of sorted samples, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

/** "p50 …, p99 …, max … (n)" of durations in ms. */
export function summary(samples: readonly number[], quantiles: readonly number[] = [0.5]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const parts = quantiles.map((q) => `p${Math.round(q * 100)} ${seconds(quantile(sorted, q))}`);
  return `${[...parts, `max ${seconds(sorted[sorted.length - 1] ?? Number.NaN)}`].join(', ')} (${sorted.length} tries)`;
}

/** Polls `probe` every 50 ms until it holds; the time it took, or undefined after `limitMs`. */
export async function timeUntil(probe: () => Promise<boolean>, limitMs = 60_000): Promise<number | undefined> {
  const start = performance.now();
  while (performance.now() - start < limitMs) {
    if (await probe().catch(() => false)) return performance.now() - start;
    await sleep(50);
  }
  return undefined;
}

/**
 * The EnvoyFilter webhook as the seed chart runs it (compiled, its NODE_OPTIONS), on the API server
 * directly (not through a fault proxy, whose request counts are the controller's). Its cache holds
 * every acl Extension with the state the controller records; its admission index is built by
 * the first AdmissionReviews after that, which report() sends before it reads the memory.
 */
export async function startWebhook(cp: ControlPlane, settings: ProcessMemorySettings) {
  const port = await freePort();
  const probePort = await freePort();
  const kubeconfig = `${cp.dir}/webhook.kubeconfig`;
  const caFile = `${cp.dir}/webhook-ca.pem`;
  await writeFile(kubeconfig, cp.kubeConfig.exportConfig(), { mode: 0o600 });
  const child = spawn(
    process.execPath,
    [path.join(ROOT, 'dist/src/cli/main.js'), 'webhook', '--webhooks', 'envoyfilter', '--kubeconfig', kubeconfig, '--self-signed', '--ca-out', caFile, '--host', '127.0.0.1', '--port', String(port), '--probe-port', String(probePort), '--log-level', 'warn'],
    { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, NODE_OPTIONS: settings.nodeOptions ?? '' } },
  );
  const metrics = async (): Promise<string> => (await fetch(`http://127.0.0.1:${probePort}/metrics`)).text();
  let peakRss = 0;
  const sample = async () => {
    const text = await metrics().catch(() => '');
    peakRss = Math.max(peakRss, metric(text, 'process_resident_memory_bytes'));
    return text;
  };
  const admit = async (shoot: string, n: number): Promise<void> => {
    const answer = await postHttps(`https://127.0.0.1:${port}${MUTATING_WEBHOOK_PATH}`, await readFile(caFile, 'utf8'), legacyFilterUpdateReview(shoot, DEFAULT_GW.namespace, `bench-${n}`));
    if (answer.status !== 200) throw new Error(`webhook answered HTTP ${answer.status}`);
  };
  const report = async (shoots: readonly ShootFixture[], count: number): Promise<void> => {
    const ready = await timeUntil(async () => (await fetch(`http://127.0.0.1:${probePort}/readyz`)).ok, 120_000);
    if (ready === undefined) throw new Error('the webhook did not become ready within 120 s');
    // The cache follows the controller's status writes: give it the last of them.
    await sleep(5000);
    for (let n = 0; n < 20; n++) await admit(technicalID(shoots[(n * 7919) % shoots.length] as ShootFixture), n);
    await sleep(2000);
    const text = await sample();
    const now = metric(text, 'process_resident_memory_bytes');
    console.log(
      `webhook: NODE_OPTIONS=${settings.nodeOptions ?? '(none)'}; ${count} acl Extensions cached, index built by 20 admissions: RSS peak ${mib(peakRss)}, now ${mib(now)}; V8 heap used ${mib(metric(text, 'nodejs_heap_size_used_bytes'))} of ${mib(metric(text, 'nodejs_heap_size_total_bytes'))}` +
        (settings.limitMiB !== undefined ? `; against the chart's memory limit of ${settings.limitMiB} MiB: peak ${(peakRss / 2 ** 20 / settings.limitMiB).toFixed(2)}, now ${(now / 2 ** 20 / settings.limitMiB).toFixed(2)}` : '; the chart sets no memory limit'),
    );
  };
  return { sample, admit, report, peakRss: () => peakRss, kill: () => child.kill('SIGTERM') };
}
