// Starts a real kube-apiserver, creates N ACL shoots (default 1,000) on a seed with two gateways,
// then starts `gardener-acl controller` as its own process from a cold cache and prints the time
// until every Extension is reconciled and the combined filters hold every shoot, the API writes
// per shoot (from the controller's own metrics), its RSS, and the writes of an unchanged resync;
// then the repair time after foreign deletes of a combined filter and of a ManagedResource (p50 and
// max over 20 tries), the time from a new ACL shoot to protected on all paths, and the request
// rate the controller sends during a 60 s storm of `429 Retry-After: 5` (its API traffic goes
// through test/support/api-fault-proxy.ts).
// The real gardener-resource-manager applies the ManagedResources (a shoot is Succeeded only once
// its per-shoot filters are applied): its log at info and its periodic re-apply once an hour, so
// that what the bench measures is the controller's work and the resource manager's first apply,
// not thousands of ManagedResources applied again every 15 s on this 2-core machine.
// The seed is shaped like a real one where memory is concerned: each shoot's Cluster embeds a
// CloudProfile (machine images and types, ~40 KB) and each shoot has four Extensions of other types
// with their own providerConfig and status. The controller runs compiled (tsc, no source maps) on
// node, as in the image, with the V8 heap limits the seed chart gives it (NODE_OPTIONS from
// charts/gardener-acl/values.yaml, controller.heap; BENCH_CHART_HEAP=0 runs it without), and its RSS
// is printed against the chart's memory limit. `rss` as second argument stops after the convergence
// and memory figures; a third argument gives each shoot's CIDR count (default 2; the default
// maxCIDRs is 50), for sizing the heap on seeds of large ACLs. The EnvoyFilter webhook runs next to
// it, compiled and with the chart's NODE_OPTIONS, and its RSS is printed against the chart's limit
// once its cache holds every recorded ACL and its index is built.
// usage: KUBE_ASSETS=$(bash scripts/setup-kube.sh | tail -1) GARDENER_BIN=$(bash scripts/setup-gardener.sh | tail -1) npx tsx bench/controller.ts [shoots] [rss|all] [cidrs]
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { ResilientInformer } from '../src/kube/informer.js';
import { listAll } from '../src/kube/list-watch.js';
import { withApiRetry } from './api-retry.js';
import { createObject, deleteObject, getObject, mergePatch, type ObjectRef } from '../src/kube/objects-client.js';
import { MANAGED_RESOURCE_NAME } from '../src/actuator/managed-resource.js';
import { startWithCRDs } from '../test/kube/kube-test-helpers.js';
import { startApiFaultProxy } from '../test/support/api-fault-proxy.js';
import { startResourceManager, type ResourceManager } from '../test/support/gardener-resource-manager.js';
import { ZONAL_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../test/actuator/seed-fixture.js';
import {
  OTHER_EXTENSION_TYPES, ROOT, benchShoots, chartMemorySettings, compileDist, createRealisticSeed, freePort, metric, seconds, shootCidrs, sleep, startWebhook, summary, timeUntil, writesByKind,
} from './seed-bench.js';

const SHOOTS = Number(process.argv[2] ?? 1000);
const RSS_ONLY = process.argv[3] === 'rss';
const CIDRS = Number(process.argv[4] ?? 2);
if (!Number.isInteger(CIDRS) || CIDRS < 2 || CIDRS > 1000) throw new Error(`cidrs ${process.argv[4]}: give a whole number from 2 to 1000`);
const RSS_GOAL_MIB = 300;
// The controller runs the chart's defaults (combined form, least interval between listener
// changes, workers) but for the resync period: the chart's 10 m would not come round within the
// bench, which measures an unchanged resync. A full resync reconciles every shoot (a few GETs
// each): 20 s up to 1,000 shoots, longer beyond so that resyncs do not crowd out the cold start on
// this 2-core machine.
const RESYNC_S = Math.max(20, Math.ceil(SHOOTS / 50));
const TRIES = 20;

async function main(): Promise<void> {
  const cp = await startWithCRDs([]);
  const controllerProcess: { kill?: () => void } = {};
  const webhookProcess: { kill?: () => void } = {};
  const stopWatches: (() => Promise<void>)[] = [];
  const proxy = await startApiFaultProxy(cp);
  let grm: ResourceManager | undefined;
  try {
    const proxyKubeconfig = `${cp.dir}/via-fault-proxy.kubeconfig`;
    await writeFile(proxyKubeconfig, proxy.kubeConfigVia(cp.kubeConfig).exportConfig(), { mode: 0o600 });
    const shoots = benchShoots(SHOOTS, CIDRS);
    const seeded = await createRealisticSeed(cp.kubeConfig, shoots);
    console.log(`seed: ${SHOOTS} shoots with ${CIDRS} CIDRs each, 2 gateways, a CloudProfile in each Cluster and ${OTHER_EXTENSION_TYPES.length} other Extensions per shoot; objects created in ${seeded.toFixed(1)} s`);
    grm = await startResourceManager(cp, { logLevel: 'info', syncPeriod: '1h' });
    compileDist();

    const port = await freePort();
    const start = Date.now();
    // CONTROLLER_NODE_FLAGS: node flags for the controller process (e.g. --heapsnapshot-signal=SIGUSR2 to look inside).
    const nodeFlags = (process.env['CONTROLLER_NODE_FLAGS'] ?? '').split(' ').filter((f) => f !== '');
    const charted = await chartMemorySettings();
    const chart = charted.controller;
    const nodeOptions = process.env['BENCH_CHART_HEAP'] === '0' ? undefined : chart.nodeOptions;
    console.log(`controller: NODE_OPTIONS=${nodeOptions ?? '(none)'}${nodeFlags.length ? `, node flags ${nodeFlags.join(' ')}` : ''}; the chart's memory limit: ${chart.limitMiB === undefined ? 'none' : `${chart.limitMiB} MiB`}`);
    const child = spawn(
      process.execPath,
      [...nodeFlags, path.join(ROOT, 'dist/src/cli/main.js'), 'controller', '--kubeconfig', proxyKubeconfig, '--leader-elect', 'false', '--probe-port', String(port), '--resync-period', `${RESYNC_S}s`, '--log-level', 'warn'],
      { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, NODE_OPTIONS: nodeOptions ?? '' } },
    );
    controllerProcess.kill = () => child.kill('SIGTERM');
    const metrics = async (): Promise<string> => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const webhook = await startWebhook(cp, charted.webhook);
    webhookProcess.kill = webhook.kill;

    // Which shoots are Succeeded, from a watch of the acl Extensions (named acl): listing 5,000 of
    // them every second cost the API server more than the controller's own work did.
    const succeeded = new ResilientInformer<{ metadata: { name: string; namespace: string }; succeeded: boolean }>({
      kubeConfig: cp.kubeConfig,
      path: '/apis/extensions.gardener.cloud/v1alpha1/extensions',
      fieldSelector: 'metadata.name=acl',
      parse: (raw) => {
        const e = raw as { metadata: { name: string; namespace: string }; status?: { lastOperation?: { state?: string } } };
        return { metadata: { name: e.metadata.name, namespace: e.metadata.namespace }, succeeded: e.status?.lastOperation?.state === 'Succeeded' };
      },
      logger: pino({ level: 'warn' }),
    });
    await succeeded.start();
    stopWatches.push(() => succeeded.stop());
    let peakRss = 0;
    let peakHeap = 0;
    let lastProgress = Date.now();
    const done = new Set<string>();
    for (;;) {
      await sleep(1000);
      const text = await metrics().catch(() => '');
      peakRss = Math.max(peakRss, metric(text, 'process_resident_memory_bytes'));
      peakHeap = Math.max(peakHeap, metric(text, 'nodejs_heap_size_total_bytes'));
      await webhook.sample();
      if (Date.now() - lastProgress >= 30_000) {
        lastProgress = Date.now();
        console.log(`  ${((Date.now() - start) / 1000).toFixed(0)} s: ${done.size}/${SHOOTS} Succeeded, RSS ${(metric(text, 'process_resident_memory_bytes') / 2 ** 20).toFixed(0)} MiB, heap used ${(metric(text, 'nodejs_heap_size_used_bytes') / 2 ** 20).toFixed(0)} MiB, reconciles ${metric(text, 'controller_runtime_reconcile_total')}, queue ${metric(text, 'workqueue_depth')}`);
      }
      for (const e of succeeded.list()) if (e.succeeded) done.add(e.metadata.namespace);
      if (done.size < SHOOTS) {
        if (Date.now() - start > 15 * 60_000) throw new Error(`not converged after 15 min: ${done.size}/${SHOOTS}`);
        continue;
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
    const mib = (name: string) => `${(metric(afterConverge, name) / 2 ** 20).toFixed(0)} MiB`;
    console.log(`controller V8 heap: used ${mib('nodejs_heap_size_used_bytes')} of ${mib('nodejs_heap_size_total_bytes')}; external ${mib('nodejs_external_memory_bytes')}; peak heap total ${(peakHeap / 2 ** 20).toFixed(0)} MiB`);
    const against = (mib: number) => `peak ${(peakRss / 2 ** 20 / mib).toFixed(2)}, now ${(metric(afterConverge, 'process_resident_memory_bytes') / 2 ** 20 / mib).toFixed(2)}`;
    console.log(`controller RSS against the goal of ${RSS_GOAL_MIB} MiB: ${against(RSS_GOAL_MIB)}`);
    if (chart.limitMiB !== undefined) console.log(`controller RSS against the chart's memory limit of ${chart.limitMiB} MiB: ${against(chart.limitMiB)}`);
    console.log(`reconciles: ${metric(afterConverge, 'controller_runtime_reconcile_total{controller="acl"')} of Extensions, ${metric(afterConverge, 'controller_runtime_reconcile_total{controller="acl-combined"')} combined syncs, errors: ${metric(afterConverge, 'controller_runtime_reconcile_errors_total')}`);
    await webhook.report(shoots, SHOOTS);
    const snapshotDir = process.env['CONTROLLER_HEAP_SNAPSHOT_DIR'];
    if (snapshotDir !== undefined && nodeFlags.some((f) => f.startsWith('--heapsnapshot-signal=SIGUSR2'))) {
      // With CONTROLLER_NODE_FLAGS='--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=DIR': the converged controller's heap, for a look inside.
      child.kill('SIGUSR2');
      await sleep(30_000);
      console.log(`heap snapshot requested into ${snapshotDir}`);
    }
    await gardenletWaitDuringResync(cp.kubeConfig, metrics, shoots);
    if (RSS_ONLY) return;
    // Counted from here: the new generation above made its own writes.
    await sleep(3000);
    const beforeResync = writesByKind(await metrics());
    // The controller resyncs every RESYNC_S here: one full pass over unchanged inputs.
    await sleep((RESYNC_S + 5) * 1000);
    const afterResync = writesByKind(await metrics());
    const resyncByKind = Object.entries(afterResync).map(([k, v]) => [k, v - (beforeResync[k] ?? 0)] as const).filter(([, n]) => n > 0);
    const resyncWrites = resyncByKind.reduce((sum, [, n]) => sum + n, 0);
    // The heartbeat Lease is renewed every 30 s whatever happens (here its namespace does not exist, so each renewal is a create).
    console.log(`writes during an unchanged full resync: ${resyncWrites}${resyncByKind.length ? ` (${resyncByKind.map(([k, n]) => `${k} ${n}`).join(', ')})` : ''}`);

    // Repair of foreign deletes, judged on what the API server stores.
    const kc = cp.kubeConfig;
    const combinedRefs = (await withApiRetry('list combined filters', () => listAll(kc, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' }))).items.map(
      (f) => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: String((f.metadata as { name: string }).name), namespace: String((f.metadata as { namespace: string }).namespace) }) satisfies ObjectRef,
    );
    const repair = async (what: string, refs: readonly ObjectRef[]): Promise<void> => {
      const samples: number[] = [];
      let lost = 0;
      for (let i = 0; i < TRIES; i++) {
        const ref = refs[(i * 7) % refs.length];
        if (!ref) break;
        const before = await getObject(kc, ref);
        await deleteObject(kc, ref, true);
        const took = await timeUntil(async () => {
          const now = await getObject(kc, ref);
          return now !== undefined && (now['metadata'] as { uid?: string }).uid !== (before?.['metadata'] as { uid?: string } | undefined)?.uid;
        }, 30_000);
        if (took === undefined) lost++;
        else samples.push(took);
      }
      console.log(`repair after a foreign delete of ${what}: ${samples.length ? summary(samples) : 'never'}${lost ? `; ${lost} not repaired within 30 s` : ''}`);
    };
    await repair('a combined CONNECT filter', combinedRefs);
    await repair(
      'a ManagedResource',
      shoots.map((sh) => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace: technicalID(sh) })),
    );

    // A new ACL shoot: time until its ManagedResource exists and its policy is in every combined filter set.
    const fresh: ShootFixture = { project: 'bench', name: 'fresh', providerConfig: allowRule('192.0.2.0/24'), gateway: ZONAL_GW };
    const created = performance.now();
    await withApiRetry('create fresh shoot', () => createSeed(kc, [], [fresh]));
    const protectedAfter = await timeUntil(async () => {
      const mr = await getObject(kc, { apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace: technicalID(fresh) });
      const combined = (await listAll(kc, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' })).items;
      const holding = combined.filter((f) => JSON.stringify(f).includes(`"${technicalID(fresh)}"`)).map((f) => `${(f.metadata as { namespace: string }).namespace}/${String((f.metadata as { name: string }).name).split('-')[2]}`);
      return mr !== undefined && new Set(holding).size === 4; // 2 gateways x 2 ports
    });
    console.log(`new ACL shoot to protected on all paths (ManagedResource + combined filters on 2 gateways x 2 ports): ${protectedAfter === undefined ? 'not within 60 s' : seconds(performance.now() - created)}`);

    // A 60 s storm of 429s: the controller's request rate must fall to about one per Retry-After per informer.
    proxy.setMode({ kind: 'throttle', retryAfterSeconds: 5 });
    const stormStart = performance.now();
    await sleep(60_000);
    proxy.setMode({ kind: 'forward' });
    const inStorm = proxy.requests.filter((r) => r.at >= stormStart && r.at < stormStart + 60_000);
    const rate = (from: number, to: number) => inStorm.filter((r) => r.at >= stormStart + from * 1000 && r.at < stormStart + to * 1000).length / (to - from);
    console.log(
      `requests/s during a 60 s storm of 429 Retry-After 5 s: first 10 s ${rate(0, 10).toFixed(1)}, last 30 s ${rate(30, 60).toFixed(1)} ` +
        `(9 informers and the shared gate of all other requests, each at one request per Retry-After, would be ${(10 / 5).toFixed(1)}); ${inStorm.length} requests in all`,
    );
  } finally {
    controllerProcess.kill?.();
    webhookProcess.kill?.();
    await Promise.allSettled(stopWatches.map((stop) => stop()));
    await grm?.stop();
    await proxy.close();
    await cp.stop();
  }
}

/**
 * Gardenlet first (issue 31 point 3): a change of kube-system/shoot-info (a managed seed's egress
 * ranges, which every ACL shoot reads) queues a full pass over every shoot, and right behind it
 * gardenlet writes a new generation of one shoot. Prints the time until that Extension is
 * Succeeded for the new generation (gardenlet's Wait gives up after 3 minutes) and how long the
 * full pass took to drain, so the two can be compared.
 */
async function gardenletWaitDuringResync(kc: KubeConfig, metrics: () => Promise<string>, shoots: readonly ShootFixture[]): Promise<void> {
  const target = shoots[Math.floor(shoots.length / 2)];
  if (!target) return;
  const ns = technicalID(target);
  const extRef: ObjectRef = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: ns };
  const reconcilesBefore = metric(await metrics(), 'controller_runtime_reconcile_total{controller="acl"');
  await withApiRetry('kube-system', () => createObject(kc, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }, { ignoreAlreadyExists: true }));
  const infoRef: ObjectRef = { apiVersion: 'v1', kind: 'ConfigMap', name: 'shoot-info', namespace: 'kube-system' };
  const data = { bench: String(Date.now()) };
  if (await getObject(kc, infoRef)) await mergePatch(kc, infoRef, { data });
  else await createObject(kc, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'shoot-info', namespace: 'kube-system' }, data });
  await sleep(200);
  const written = await mergePatch(kc, extRef, { spec: { providerConfig: allowRule(...shootCidrs(shoots.indexOf(target), CIDRS), '192.0.2.0/24') } });
  const generation = (written as { metadata?: { generation?: number } } | undefined)?.metadata?.generation;
  const succeeded = await timeUntil(async () => {
    const ext = (await getObject(kc, extRef)) as { status?: { observedGeneration?: number; lastOperation?: { state?: string } } } | undefined;
    return ext?.status?.observedGeneration === generation && ext?.status?.lastOperation?.state === 'Succeeded';
  }, 180_000);
  const drained = await timeUntil(async () => {
    const text = await metrics();
    return metric(text, 'workqueue_depth{name="acl"') === 0 && metric(text, 'controller_runtime_reconcile_total{controller="acl"') - reconcilesBefore >= shoots.length;
  }, 600_000);
  console.log(
    `gardenlet's new generation during a full pass over ${shoots.length} shoots: Succeeded after ${succeeded === undefined ? 'more than 180 s (gardenlet gives up)' : seconds(succeeded)}; ` +
      `the full pass drained after ${drained === undefined ? 'more than 600 s' : seconds(drained + (succeeded ?? 0))}`,
  );
}

await main();
