// Starts a real kube-apiserver, creates N ACL shoots (default 1,000) on a seed with two gateways,
// then starts `gardener-acl controller` as its own process from a cold cache and prints the time
// until every Extension is reconciled and the combined filters hold every shoot, the API writes
// per shoot (from the controller's own metrics), its RSS, and the writes of an unchanged resync.
// usage: KUBE_ASSETS=$(bash scripts/setup-kube.sh | tail -1) npx tsx bench/controller.ts [shoots]
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listAll } from '../src/kube/list-watch.js';
import { withApiRetry } from './api-retry.js';
import { startWithCRDs } from '../test/kube/kube-test-helpers.js';
import { DEFAULT_GW, ZONAL_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../test/actuator/seed-fixture.js';

const SHOOTS = Number(process.argv[2] ?? 1000);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) await work(items[next++] as T);
  }));
}

function metric(text: string, name: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(name) && !l.startsWith('#'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

function writesByKind(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n').filter((l) => l.startsWith('gardener_acl_api_writes_total{'))) {
    const verb = /verb="([^"]+)"/.exec(line)?.[1];
    const kind = /kind="([^"]+)"/.exec(line)?.[1];
    out[`${verb} ${kind}`] = Number(line.split(' ').pop());
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const cp = await startWithCRDs([]);
  const controllerProcess: { kill?: () => void } = {};
  try {
    const shoots: ShootFixture[] = Array.from({ length: SHOOTS }, (_, i) => ({
      project: `p${i % 50}`,
      name: `s${i}`,
      providerConfig: allowRule(`${10 + (i % 200)}.${i % 256}.0.0/16`, `2001:db8:${i.toString(16)}::/48`),
      gateway: i % 2 ? ZONAL_GW : DEFAULT_GW,
      egressCIDRs: [`198.51.${i % 256}.1/32`],
    }));
    const seedStart = Date.now();
    await withApiRetry('create gateways', () => createSeed(cp.kubeConfig, [DEFAULT_GW, ZONAL_GW], []));
    await pool(shoots, 16, (s) => withApiRetry(`create ${technicalID(s)}`, () => createSeed(cp.kubeConfig, [], [s])));
    console.log(`seed: ${SHOOTS} shoots with 2 CIDRs each, 2 gateways; objects created in ${((Date.now() - seedStart) / 1000).toFixed(1)} s`);

    const port = await freePort();
    const start = Date.now();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller', '--kubeconfig', cp.kubeconfigPath, '--leader-elect', 'false', '--probe-port', String(port), '--combined-min-interval', '0s', '--resync-period', '20s', '--log-level', 'warn'],
      { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    controllerProcess.kill = () => child.kill('SIGTERM');
    const metrics = async (): Promise<string> => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();

    let peakRss = 0;
    const done = new Set<string>();
    for (;;) {
      await sleep(1000);
      const text = await metrics().catch(() => '');
      peakRss = Math.max(peakRss, metric(text, 'process_resident_memory_bytes'));
      const { items } = await withApiRetry('list Extensions', () => listAll(cp.kubeConfig, '/apis/extensions.gardener.cloud/v1alpha1/extensions'));
      for (const e of items as { metadata: { namespace: string }; status?: { lastOperation?: { state?: string } } }[]) {
        if (e.status?.lastOperation?.state === 'Succeeded') done.add(e.metadata.namespace);
      }
      const combined = (await withApiRetry('list combined filters', () => listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' }))).items;
      const inCombined = new Set(combined.flatMap((f) => JSON.stringify(f).match(/shoot--p\d+--s\d+(?=":)/g) ?? []));
      if (done.size === SHOOTS && shoots.every((s) => inCombined.has(technicalID(s)))) break;
      if (Date.now() - start > 15 * 60_000) throw new Error(`not converged after 15 min: ${done.size}/${SHOOTS}`);
    }
    const converged = (Date.now() - start) / 1000;
    await sleep(3000);
    const afterConverge = await metrics();
    const writes = writesByKind(afterConverge);
    const totalWrites = Object.values(writes).reduce((a, b) => a + b, 0);
    console.log(`cold start to converged: ${converged.toFixed(1)} s (${(SHOOTS / converged).toFixed(1)} shoots/s)`);
    console.log(`API writes: ${totalWrites} in total, ${(totalWrites / SHOOTS).toFixed(2)} per shoot`);
    for (const [k, v] of Object.entries(writes).sort()) console.log(`  ${k.padEnd(34)} ${v}`);
    console.log(`controller RSS: peak ${(peakRss / 2 ** 20).toFixed(0)} MiB, now ${(metric(afterConverge, 'process_resident_memory_bytes') / 2 ** 20).toFixed(0)} MiB`);
    console.log(`reconciles: ${metric(afterConverge, 'controller_runtime_reconcile_total')}, errors: ${metric(afterConverge, 'controller_runtime_reconcile_errors_total')}`);
    // The controller resyncs every 20 s here: one full pass over unchanged inputs.
    await sleep(25_000);
    const afterResync = writesByKind(await metrics());
    const resyncWrites = Object.entries(afterResync).reduce((sum, [k, v]) => sum + v - (writes[k] ?? 0), 0);
    console.log(`writes during an unchanged full resync: ${resyncWrites}`);
  } finally {
    controllerProcess.kill?.();
    await cp.stop();
  }
}

await main();
