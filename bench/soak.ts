// A soak with faults (issue 31 point 6): the compiled controller as the seed chart runs it (two
// replicas with leader election, the chart's defaults, its NODE_OPTIONS) and the EnvoyFilter
// webhook, on a real kube-apiserver with the real gardener-resource-manager, N ACL shoots
// (default 2,000) on the realistic seed of bench/controller.ts, for M minutes (default 30) under a
// mix of churn:
//   - owner ACL edits, 5 a second, each as gardenlet writes it (new providerConfig, reconcile
//     annotation), waited for as gardenlet's Wait does (annotation gone, generation observed,
//     Succeeded), from the bench's watch of the Extensions;
//   - gardenlet reconcile requests driven by gardenlet's own deployer (Deploy + Wait from the
//     gardener module, tools/gardener/contract), one every 3 s, on shoots the edits leave alone;
//   - a rollout of a gateway Deployment every 2 minutes, and its status (what an HPA scaling and
//     pods becoming ready write) every 5 s;
//   - a foreign delete of a combined filter every 3 minutes;
//   - an API server restart at 40 % of the time and a leader change (SIGTERM of the leader, a new
//     replica started in its place) at 70 %.
// The protection-continuity checker (in its own process, bench/soak-checker.ts) judges every
// stored state; a shoot's expectation accepts its previous and its current ACL (the change in
// flight). Prints: the Wait latency of each kind of request p50/p99/max, repair time p50/max,
// writes per minute, RSS over time, and the checker's unprotected moments (goal 0).
// The resource manager re-applies every hour (not every minute as in a seed): its own periodic
// work on 2,000 ManagedResources would take this 2-core machine's CPU from what is measured.
// usage: KUBE_ASSETS=$(bash scripts/setup-kube.sh | tail -1) GARDENER_BIN=$(bash scripts/setup-gardener.sh | tail -1) npx tsx bench/soak.ts [shoots] [minutes]
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pino } from 'pino';
import { z } from 'zod';
import { defaultOperatorConfig } from '../src/config/operator-config.js';
import { OPERATION_ANNOTATION } from '../src/gardener/extension-contract.js';
import { ResilientInformer } from '../src/kube/informer.js';
import { listAll } from '../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, mergePatch, patchStatus, type ObjectRef } from '../src/kube/objects-client.js';
import { DEFAULT_GW, ZONAL_GW, allowRule, technicalID, type ShootFixture } from '../test/actuator/seed-fixture.js';
import { startWithCRDs } from '../test/kube/kube-test-helpers.js';
import { gardenletExtension } from '../test/support/gardener-contract.js';
import { startResourceManager, type ResourceManager } from '../test/support/gardener-resource-manager.js';
import {
  ROOT, alwaysAdmitted, benchShoots, chartMemorySettings, compileDist, createRealisticSeed, freePort, metric, mib, quantile, seconds, shootCidrs, sleep, startWebhook, summary,
} from './seed-bench.js';
import type { CheckerRequest, WireShoot } from './soak-checker.js';

const Args = z.object({ shoots: z.coerce.number().int().min(20).max(10_000), minutes: z.coerce.number().min(1).max(240) });
const ARGS = Args.parse({ shoots: process.argv[2] ?? 2000, minutes: process.argv[3] ?? 30 });
const SOAK_MS = ARGS.minutes * 60_000;
const EDITS_PER_S = 5;
const GARDENLET_EVERY_MS = 3_000;
const ROLLOUT_EVERY_MS = 120_000;
const SCALE_EVERY_MS = 5_000;
const FOREIGN_DELETE_EVERY_MS = 180_000;
/** gardenlet's Extension Wait gives up after 3 minutes. */
const WAIT_LIMIT_MS = 180_000;
const operator = defaultOperatorConfig();
const topology = { gateways: [DEFAULT_GW.namespace, ZONAL_GW.namespace], connectPorts: [...operator.protectedPorts], sniPort: operator.sniPort };
const EXT = 'extensions.gardener.cloud/v1alpha1';
const extRef = (ns: string): ObjectRef => ({ apiVersion: EXT, kind: 'Extension', name: 'acl', namespace: ns });

/** Variant v of shoot i's ACL: its two ranges moved (v = 0 is the seed's own ACL). */
const aclVariant = (i: number, v: number): string[] =>
  v === 0 ? shootCidrs(i, 2) : [`${10 + (i % 200)}.${(i + v) % 256}.0.0/16`, `2001:db8:${i.toString(16)}:${(v % 65_536).toString(16)}::/64`];

interface Replica {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  metrics(): Promise<string>;
}

/** What the bench's watch knows of each acl Extension: enough for gardenlet's Wait condition. */
interface ExtensionView {
  metadata: { name: string; namespace: string; generation: number; annotated: boolean };
  observedGeneration: number | undefined;
  state: string | undefined;
}

interface PendingWait {
  readonly generation: number;
  readonly since: number;
  readonly kind: string;
}

async function main(): Promise<void> {
  const cp = await startWithCRDs([]);
  const cleanups: (() => Promise<unknown> | void)[] = [];
  let grm: ResourceManager | undefined;
  try {
    const shoots = benchShoots(ARGS.shoots, 2);
    const seeded = await createRealisticSeed(cp.kubeConfig, shoots);
    await createObject(cp.kubeConfig, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }, { ignoreAlreadyExists: true });
    console.log(`seed: ${ARGS.shoots} ACL shoots (2 CIDRs each) on 2 gateways, shaped as in bench/controller.ts; created in ${seeded.toFixed(1)} s`);
    grm = await startResourceManager(cp, { logLevel: 'info', syncPeriod: '1h' });
    compileDist();
    const kubeconfig = path.join(cp.dir, 'soak.kubeconfig');
    await writeFile(kubeconfig, cp.kubeConfig.exportConfig(), { mode: 0o600 });
    const charted = await chartMemorySettings();
    const logDir = process.env['SOAK_LOG_DIR'] ?? cp.dir;
    // CONTROLLER_NODE_FLAGS: node flags for the replicas (e.g. --cpu-prof --cpu-prof-dir=DIR to look inside).
    const nodeFlags = (process.env['CONTROLLER_NODE_FLAGS'] ?? '').split(' ').filter((f) => f !== '');
    await mkdir(logDir, { recursive: true });
    console.log(`controller logs: ${logDir}/replica-<n>.log`);

    // Shoots every 20th: gardenlet's own deployer reconciles them; the others get the owner edits.
    const gardenletShoots = shoots.filter((_, i) => i % 20 === 0);
    const editedShoots = shoots.filter((_, i) => i % 20 !== 0);
    const indexOf = new Map(shoots.map((s, i) => [technicalID(s), i]));
    const acls = new Map(shoots.map((s, i) => [technicalID(s), { previous: 0, current: 0, i }]));
    const wire = (s: ShootFixture): WireShoot => {
      const acl = acls.get(technicalID(s)) ?? { previous: 0, current: 0, i: 0 };
      const variants = [...new Set([acl.previous, acl.current])];
      return { technicalID: technicalID(s), acls: variants.map((v) => aclVariant(acl.i, v)), alwaysAllowed: alwaysAdmitted(s), sniGateways: [(s.gateway ?? DEFAULT_GW).namespace] };
    };

    // The checker judges a sample of about 100 shoots (every k-th, k prime to the 20 of the
    // gardenlet shoots, so both kinds are in it) and the combined filters' changes at most once a
    // second: judging 2,000 shoots after each write of a sync takes this machine longer than the
    // writes (1.5 s for 100 shoots). Every change of a sampled shoot's own objects is judged.
    let everyK = Math.max(1, Math.ceil(shoots.length / 100));
    while (everyK > 1 && (everyK % 2 === 0 || everyK % 5 === 0)) everyK++;
    const judged = new Set(shoots.filter((_, i) => i % everyK === 0).map(technicalID));
    console.log(`continuity checker: judges ${judged.size} of ${shoots.length} shoots (every ${everyK}th) on every change of their own objects, and the combined filters at most once a second`);
    const checker = await startChecker(kubeconfig, shoots.filter((s) => judged.has(technicalID(s))).map(wire));
    cleanups.push(() => {
      checker.stop();
    });

    // Replicas as a Deployment's pods: one that exits (a leader that lost its lease exits on
    // purpose) is replaced after 10 s, kubelet's first restart back-off.
    const replicas: Replica[] = [];
    const exits: string[] = [];
    let stopping = false;
    let replicaCount = 0;
    const startReplica = async (): Promise<Replica> => {
      const name = `replica-${replicaCount++}`;
      const port = await freePort();
      const child = spawn(
        process.execPath,
        [...nodeFlags, path.join(ROOT, 'dist/src/cli/main.js'), 'controller', '--kubeconfig', kubeconfig, '--leader-election-namespace', 'kube-system', '--probe-port', String(port), '--log-level', 'info'],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: charted.controller.nodeOptions ?? '' } },
      );
      // Each replica's log (at info, as the chart's default) in a file of its own.
      const log = createWriteStream(path.join(logDir, `${name}.log`));
      child.stdout?.pipe(log);
      child.stderr?.pipe(log);
      const exited = new Promise<void>((resolve) =>
        child.once('exit', (code, signal) => {
          const index = replicas.indexOf(replica);
          if (index >= 0) replicas.splice(index, 1);
          if (!stopping) {
            exits.push(`${name} exited at ${new Date().toISOString().slice(11, 19)} (${signal ?? `code ${code}`})`);
            setTimeout(() => void startReplica(), 10_000);
          }
          resolve();
        }),
      );
      const replica: Replica = { name, child, exited, metrics: async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text() };
      replicas.push(replica);
      return replica;
    };
    cleanups.push(() => {
      stopping = true;
      for (const r of replicas) r.child.kill('SIGTERM');
    });
    const webhook = await startWebhook(cp, charted.webhook);
    cleanups.push(() => {
      webhook.kill();
    });

    // gardenlet's Wait, from a watch: annotation gone, generation observed, Succeeded.
    const waits = new Map<string, PendingWait>();
    const latencies = new Map<string, number[]>();
    const timedOut = new Map<string, number>();
    const record = (kind: string, ms: number) => latencies.set(kind, [...(latencies.get(kind) ?? []), ms]);
    const extensions = new ResilientInformer<ExtensionView>({
      kubeConfig: cp.kubeConfig,
      path: `/apis/${EXT}/extensions`,
      fieldSelector: 'metadata.name=acl',
      parse: (raw) => {
        const e = raw as { metadata: { name: string; namespace: string; generation?: number; annotations?: Record<string, string> }; status?: { observedGeneration?: number; lastOperation?: { state?: string } } };
        return {
          metadata: { name: e.metadata.name, namespace: e.metadata.namespace, generation: e.metadata.generation ?? 0, annotated: e.metadata.annotations?.[OPERATION_ANNOTATION] !== undefined },
          observedGeneration: e.status?.observedGeneration,
          state: e.status?.lastOperation?.state,
        };
      },
      onChange: (_event, e) => {
        const wait = waits.get(e.metadata.namespace);
        if (!wait || e.metadata.annotated || (e.observedGeneration ?? 0) < wait.generation || e.state !== 'Succeeded') return;
        waits.delete(e.metadata.namespace);
        record(wait.kind, performance.now() - wait.since);
      },
      logger: pino({ level: 'warn' }),
    });
    await extensions.start();
    cleanups.push(() => extensions.stop());

    // Cold start: both replicas from empty caches, one of them wins the lease.
    const coldStart = performance.now();
    await startReplica();
    await startReplica();
    for (;;) {
      await sleep(2000);
      const succeeded = extensions.list().filter((e) => e.state === 'Succeeded' && !e.metadata.annotated).length;
      if (succeeded === shoots.length) break;
      if (Math.round((performance.now() - coldStart) / 2000) % 5 === 0) {
        const lags = await Promise.all(replicas.map(async (r) => `${r.name} ${metric(await r.metrics().catch(() => ''), 'nodejs_eventloop_lag_max_seconds').toFixed(2)} s`));
        console.log(`  cold start ${seconds(performance.now() - coldStart)}: ${succeeded}/${shoots.length} Succeeded; event loop lag max ${lags.join(', ')}`);
      }
      if (performance.now() - coldStart > 20 * 60_000) throw new Error(`cold start: ${succeeded}/${shoots.length} Succeeded after 20 min`);
    }
    console.log(`cold start of two replicas to every shoot Succeeded: ${seconds(performance.now() - coldStart)}`);

    // Writes are counted from here: the cold start's are not the soak's.
    const writesSeen = new Map<string, number>();
    for (const r of replicas) writesSeen.set(r.name, metric(await r.metrics().catch(() => ''), 'gardener_acl_api_writes_total'));
    const soakStart = performance.now();
    const until = soakStart + SOAK_MS;
    const at = () => `${((performance.now() - soakStart) / 60_000).toFixed(1)} min`;
    const errors = new Map<string, number>();
    const failed = (what: string): void => {
      errors.set(what, (errors.get(what) ?? 0) + 1);
    };
    const loops: Promise<void>[] = [];
    const every = (ms: number, work: (n: number) => Promise<void>) =>
      loops.push(
        (async () => {
          for (let n = 0; performance.now() < until; n++) {
            const next = soakStart + (n + 1) * ms;
            void work(n).catch((error: unknown) => failed(`churn step failed: ${String(error).slice(0, 120)}`));
            await sleep(Math.max(0, next - performance.now()));
          }
        })(),
      );

    // Owner edits as gardenlet writes them.
    every(1000 / EDITS_PER_S, async (n) => {
      const shoot = editedShoots[(n * 7919) % editedShoots.length] as ShootFixture;
      const id = technicalID(shoot);
      const acl = acls.get(id);
      if (!acl || waits.has(id)) return failed('edit skipped: the previous one still waited for');
      const before = { ...acl };
      acl.previous = acl.current;
      acl.current = acl.current + 1;
      // The checker holds the new expectation before the edit is stored: it is told over a channel of
      // its own, and a watch event of the edit's result could otherwise be judged first (an edit
      // applied would read as the old ACL cut off).
      if (judged.has(id)) await checker.expect(wire(shoot));
      const since = performance.now();
      try {
        const written = await mergePatch(cp.kubeConfig, extRef(id), { metadata: { annotations: { [OPERATION_ANNOTATION]: 'reconcile' } }, spec: { providerConfig: allowRule(...aclVariant(acl.i, acl.current)) } });
        const generation = (written as { metadata?: { generation?: number } } | undefined)?.metadata?.generation ?? 0;
        waits.set(id, { generation, since, kind: 'owner ACL edit' });
      } catch {
        // Not stored: the shoot keeps the ACL it had.
        Object.assign(acl, before);
        if (judged.has(id)) await checker.expect(wire(shoot));
        failed('owner edit refused (API server down?)');
      }
    });

    // gardenlet's own deployer: Deploy (reconcile annotation, same providerConfig) and Wait.
    every(GARDENLET_EVERY_MS, async (n) => {
      const shoot = gardenletShoots[n % gardenletShoots.length] as ShootFixture;
      const i = indexOf.get(technicalID(shoot)) ?? 0;
      // gardenlet polls every 5 s; 250 ms here measures the controller's latency, not the poll's.
      const run = await gardenletExtension({ kubeconfig, namespace: technicalID(shoot), steps: ['deploy', 'wait'], providerConfig: allowRule(...aclVariant(i, 0)), interval: '250ms' }).catch(() => undefined);
      if (run?.ok) record("gardenlet's Deploy + Wait (deployer of the gardener module)", run.steps.reduce((sum, s) => sum + s.ms, 0));
      else {
        const step = run?.steps.find((s) => !s.ok);
        failed(`gardenlet ${step?.step ?? 'run'} failed${step?.error ? `: ${step.error.slice(0, 400)}` : ''}`);
      }
    });

    // Gateway rollouts and HPA-style status updates.
    const deployment = (ns: string): ObjectRef => ({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'istio-ingressgateway', namespace: ns });
    every(ROLLOUT_EVERY_MS, async (n) => {
      const gw = n % 2 ? ZONAL_GW : DEFAULT_GW;
      await mergePatch(cp.kubeConfig, deployment(gw.namespace), { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } } } }).catch(() => failed('rollout refused'));
    });
    every(SCALE_EVERY_MS, async (n) => {
      const replicasNow = 2 + (n % 3);
      for (const gw of [DEFAULT_GW, ZONAL_GW]) {
        await patchStatus(cp.kubeConfig, deployment(gw.namespace), { replicas: replicasNow, readyReplicas: replicasNow - 1, availableReplicas: replicasNow - 1, updatedReplicas: replicasNow, observedGeneration: n }).catch(() => failed('status update refused'));
      }
    });

    // Foreign deletes of a combined filter: stored again (new uid) after how long.
    const repairs: number[] = [];
    every(FOREIGN_DELETE_EVERY_MS, async (n) => {
      await sleep(FOREIGN_DELETE_EVERY_MS / 2);
      const combined = (await listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' }).catch(() => ({ items: [] }))).items;
      const target = combined[(n * 5) % Math.max(1, combined.length)] as { metadata: { name: string; namespace: string; uid: string } } | undefined;
      if (!target) return failed('no combined filter to delete');
      const ref: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: target.metadata.name, namespace: target.metadata.namespace };
      checker.send({ type: 'fault', key: `EnvoyFilter ${ref.namespace}/${ref.name}` });
      await deleteObject(cp.kubeConfig, ref, true);
      const deleted = performance.now();
      while (performance.now() - deleted < 120_000) {
        const now = (await getObject(cp.kubeConfig, ref).catch(() => undefined)) as { metadata: { uid: string } } | undefined;
        if (now && now.metadata.uid !== target.metadata.uid) {
          repairs.push(performance.now() - deleted);
          return;
        }
        await sleep(100);
      }
      failed('combined filter not stored again within 120 s');
    });

    // The API server restart and the leader change.
    const events: string[] = [];
    loops.push(
      (async () => {
        await sleep(SOAK_MS * 0.4);
        const down = performance.now();
        await cp.stopApiServer();
        await sleep(5000);
        await cp.startApiServer();
        events.push(`${at()}: API server stopped for ${seconds(performance.now() - down)} and started again`);
        await sleep(Math.max(0, soakStart + SOAK_MS * 0.7 - performance.now()));
        const leader = await leaderOf(replicas);
        if (!leader) {
          events.push(`${at()}: no replica reported leading; no leader change`);
          return;
        }
        const stopped = performance.now();
        leader.child.kill('SIGTERM');
        await leader.exited;
        let next: Replica | undefined;
        while (!next && performance.now() - stopped < 120_000) {
          await sleep(250);
          next = await leaderOf(replicas);
        }
        events.push(`${at()}: leader ${leader.name} stopped (SIGTERM, replaced 10 s later); ${next ? `${next.name} leads ${seconds(performance.now() - stopped)} later` : 'no replica leads within 120 s'}`);
      })(),
    );

    // Once a minute: writes, RSS, the waits in flight.
    const timeline: string[] = [];
    loops.push(
      (async () => {
        while (performance.now() < until) {
          await sleep(60_000);
          let writes = 0;
          const rss: string[] = [];
          for (const r of replicas) {
            const text = await r.metrics().catch(() => '');
            const total = metric(text, 'gardener_acl_api_writes_total');
            writes += Math.max(0, total - (writesSeen.get(r.name) ?? 0));
            writesSeen.set(r.name, total);
            rss.push(`${r.name}${metric(text, 'leader_election_master_status') > 0 ? ' (leader)' : ''} ${mib(metric(text, 'process_resident_memory_bytes'))} (event loop lag max ${metric(text, 'nodejs_eventloop_lag_max_seconds').toFixed(2)} s)`);
          }
          const webhookText = await webhook.sample();
          for (const [id, wait] of waits) {
            if (performance.now() - wait.since < WAIT_LIMIT_MS) continue;
            waits.delete(id);
            timedOut.set(wait.kind, (timedOut.get(wait.kind) ?? 0) + 1);
          }
          const line = `${at()}: ${writes} writes in the last minute; RSS ${rss.join(', ')}, webhook ${mib(metric(webhookText, 'process_resident_memory_bytes'))}; ${waits.size} waits in flight`;
          timeline.push(line);
          console.log(`  ${line}`);
        }
      })(),
    );

    await Promise.all(loops);
    // What is still in flight gets gardenlet's full Wait.
    const settle = performance.now();
    while (waits.size > 0 && performance.now() - settle < WAIT_LIMIT_MS) await sleep(500);
    for (const wait of waits.values()) timedOut.set(wait.kind, (timedOut.get(wait.kind) ?? 0) + 1);
    await sleep(10_000);
    const report = await checker.report();

    console.log(`\nsoak: ${ARGS.shoots} ACL shoots, ${ARGS.minutes} min, chart defaults, 2 replicas`);
    for (const e of events) console.log(`  ${e}`);
    console.log(`replicas that exited and were replaced: ${exits.length ? exits.join('; ') : 'none'}`);
    for (const [kind, samples] of latencies) {
      console.log(`gardenlet Wait latency, ${kind}: ${summary(samples, [0.5, 0.99])}${timedOut.get(kind) ? `; ${timedOut.get(kind)} not Succeeded within 3 min` : ''}`);
    }
    for (const [kind, count] of timedOut) if (!latencies.has(kind)) console.log(`gardenlet Wait, ${kind}: none Succeeded, ${count} gave up`);
    console.log(`repair after a foreign delete of a combined filter (stored again): ${repairs.length ? summary(repairs) : 'none measured'}`);
    const faultOpen = report.faultGaps.map((g) => g.openMs).filter((ms): ms is number => ms !== undefined);
    console.log(`gaps caused by the foreign deletes: ${report.faultGaps.length} (closed: ${faultOpen.length ? summary(faultOpen) : 'none'}; still open ${report.faultGaps.length - faultOpen.length})`);
    const perMinute = timeline.map((l) => Number(/: (\d+) writes/.exec(l)?.[1] ?? 0));
    console.log(`writes per minute: p50 ${quantile([...perMinute].sort((a, b) => a - b), 0.5)}, max ${Math.max(...perMinute)}`);
    console.log(`unprotected moments (gaps the checker charges to the controller): ${report.controllerGaps.length}; open at the end: ${report.open.length}`);
    // The first gap of each shoot and gateway, with the wall-clock time it appeared.
    const firstOfPair = new Map<string, (typeof report.controllerGaps)[number]>();
    for (const g of report.controllerGaps) {
      const [id = '', , where = ''] = g.gap.split(' ');
      const pair = `${id} ${where.split(':')[0] ?? ''}`;
      if (!firstOfPair.has(pair)) firstOfPair.set(pair, g);
    }
    console.log(`  ${firstOfPair.size} shoot-and-gateway pairs; the first gap of each (up to 20):`);
    for (const g of [...firstOfPair.values()].slice(0, 20)) console.log(`  ${new Date(report.timeOrigin + g.at).toISOString().slice(11, 23)} ${g.gap} (after ${g.after})`);
    console.log(`checker: ${report.states} stored states judged, ${seconds(report.judging.totalMs)} judging in all, longest ${seconds(report.judging.maxMs)}`);
    if (errors.size) for (const [what, n] of errors) console.log(`  ${n} × ${what}`);
  } finally {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
    await grm?.stop();
    await cp.stop();
  }
}

async function leaderOf(replicas: readonly Replica[]): Promise<Replica | undefined> {
  for (const r of replicas) {
    const text = await r.metrics().catch(() => '');
    if (metric(text, 'leader_election_master_status') > 0) return r;
  }
  return undefined;
}

const CheckerReply = z.discriminatedUnion('type', [
  z.object({ type: z.literal('started') }),
  z.object({ type: z.literal('expected') }),
  z.object({ type: z.literal('error'), error: z.string() }),
  z.object({
    type: z.literal('report'),
    timeOrigin: z.number(),
    report: z.object({
      states: z.number(),
      controllerGaps: z.array(z.object({ gap: z.string(), after: z.string(), at: z.number() })),
      faultGaps: z.array(z.object({ gap: z.string(), after: z.string(), at: z.number(), openMs: z.number().optional() })),
      open: z.array(z.string()),
      judging: z.object({ totalMs: z.number(), maxMs: z.number() }),
    }),
  }),
]);
type CheckerReport = Extract<z.infer<typeof CheckerReply>, { type: 'report' }>['report'] & { readonly timeOrigin: number };

async function startChecker(kubeconfig: string, shoots: WireShoot[]) {
  const child = fork(path.join(ROOT, 'bench/soak-checker.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const replies: ((reply: z.infer<typeof CheckerReply>) => void)[] = [];
  child.on('message', (raw: unknown) => {
    const reply = CheckerReply.parse(raw);
    if (reply.type === 'error') console.error(reply.error);
    else replies.shift()?.(reply);
  });
  const next = () => new Promise<z.infer<typeof CheckerReply>>((resolve) => replies.push(resolve));
  const send = (request: CheckerRequest) => child.send(request);
  const started = next();
  send({ type: 'start', kubeconfig, topology, shoots, coalesceCombinedMs: 1000 });
  await started;
  return {
    send,
    /** Resolves once the checker judges by this expectation. */
    async expect(shoot: WireShoot): Promise<void> {
      const reply = next();
      send({ type: 'expect', shoot });
      const got = await reply;
      if (got.type !== 'expected') throw new Error(`soak checker answered ${got.type}`);
    },
    async report(): Promise<CheckerReport> {
      const reply = next();
      send({ type: 'report' });
      const got = await reply;
      if (got.type !== 'report') throw new Error(`soak checker answered ${got.type}`);
      return { ...got.report, timeOrigin: got.timeOrigin };
    },
    stop: (): void => {
      child.kill('SIGTERM');
    },
  };
}

await main();
