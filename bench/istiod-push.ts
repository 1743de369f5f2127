// What the combined CONNECT forms cost istiod (issue 29 point 8): Istio's own discovery server
// (tools/istio-render `serve`: pilot's xDS server, push context, debounce, delta xDS, ECDS
// generator) serves the default gateway of a Gardener 1.145 seed of N ACL shoots to a real Envoy
// over delta ADS, once per form (`combinedForm` ecds, matcher, rules), side by side in one run.
//
// Per row (one fresh serve process and one fresh Envoy each):
// - full push: serve is started with the seed's objects (its phases: reading the files; building
//   Istio's discovery server with them, in which Istio parses the config, syncs its registries and
//   builds the first push context), then Envoy is started and timed until it holds everything
//   (LIVE, no listener warming, and in the ecds form every bucket's ECDS resource loaded);
//   pilot's own figures for that push (generate, send per xDS type, bytes), and istiod's memory
//   after it, read through serve's {"stats":true} line: Go runtime.MemStats (HeapInuse as is, and
//   HeapAlloc right after a forced GC = the live heap) and VmRSS/VmHWM of /proc/self/status;
// - CHANGES times in a row (once above MANY_SHOOTS shoots: each push takes minutes there), one
//   ACL change: shoot 0's rule gets one more CIDR; the seed's EnvoyFilters as our generator now
//   renders them replace the store's (serve's stdin protocol: it parses and compares the whole
//   set, then writes the objects that differ back to back, as the controller's writes would
//   change them). Timed from the first write until Envoy applied it (ecds: the changed bucket's
//   ECDS resource reloaded, extension_config_discovery.*.config_reload; rules/matcher: a listener
//   update accepted and warmed); pilot's figures for the push (push context init, generate and
//   send per type, bytes) and istiod's memory after it.
// serve rewrites listeners and clusters for a stock Envoy on loopback (JSON round trips); its
// time is inside pilot's push time and the end-to-end times, and is reported separately;
// "istiod's work" is push context init plus the time in Istio's generators (serve times them).
//
// Prints measurements only, asserts nothing about them. Every wait is bounded; a row that fails
// or times out is printed as failed and the next row runs.
//
// usage: npx tsx bench/istiod-push.ts [sizes=0,1000,5000] [forms=ecds,matcher,rules]
// (a form may name its tunnelRevocation, e.g. ecds:none; otherwise the default, hop: the shared tunnel hop)
// needs: scripts/setup-istio-render.sh and scripts/setup-envoy.sh (or ISTIO_RENDER_BIN / ENVOY_BIN).
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { COMBINED_FORMS, TUNNEL_REVOCATIONS, defaultOperatorConfig, type CombinedFormName } from '../src/config/operator-config.js';
import { ecdsBucketOf, ecdsResourceName } from '../src/rbac/connect-matcher-ecds.js';
import { ENVOY_VERSION } from '../test/envoy/envoy-binary.js';
import { pollUntil, startEnvoy, type EnvoyInstance } from '../test/envoy/envoy-process.js';
import type { JsonObject } from '../test/envoy/json.js';
import { planStaticGateway } from '../test/istio/istio-bootstrap.js';
import { findIstioRenderBinary, istioInputDocuments, proxyArguments, renderGatewayWithIstio } from '../test/istio/istio-render.js';
import { ERAS } from '../test/istio/eras.js';
import { generateForSeed, istioInputObjects, withOperatorSettings, withRule } from '../test/istio/istio-rendered-seed.js';
import { ServeProcess, parseAddress, readySchema, xdsBootstrap } from '../test/istio/live-ads-gateway.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway } from '../test/istio/seed-fixture.js';
import { staticSecrets } from '../test/istio/throwaway-certs.js';
import { gatewaySeedShoots } from './gateway-seed-shoots.js';

const SIZES = (process.argv[2] ?? '0,1000,5000').split(',').map(Number);
const FORMS = (process.argv[3] ?? 'ecds,matcher,rules').split(',').map((spec) => {
  const [form, revocation] = spec.split(':');
  return { form: z.enum(COMBINED_FORMS).parse(form), revocation: z.enum(TUNNEL_REVOCATIONS).default(defaultOperatorConfig().tunnelRevocation).parse(revocation) };
});
type Variant = (typeof FORMS)[number];
const label = (v: Variant): string => (v.revocation === defaultOperatorConfig().tunnelRevocation ? v.form : `${v.form}, tunnelRevocation ${v.revocation}`);
const era = ERAS['v1.145'];
const gateway = ingressGateway('default');
const proxy = { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) };
const BUCKETS = defaultOperatorConfig().ecdsBuckets;
/** Successive ACL changes per row (each one more CIDR on the same shoot): shows the spread of one change. */
const CHANGES = 3;
/** Above this many shoots a row makes one change only: there each push takes minutes (measured: Istio's LDS generation at 5,000 shoots). */
const MANY_SHOOTS = 1000;

// Bounds: a stuck server must not hang the bench. Generous, because 5,000 shoots on 2 busy cores take minutes.
const READY_TIMEOUT_MS = 20 * 60_000;
const ENVOY_COMPLETE_TIMEOUT_MS = 20 * 60_000;
const REPLY_TIMEOUT_MS = 10 * 60_000;
const APPLIED_TIMEOUT_MS = 20 * 60_000;
const STATS_TIMEOUT_MS = 5 * 60_000;
/** After a change: the push counts as over when pilot recorded no further push for this long (outside every timing). */
const SETTLE_QUIET_MS = 1_000;
const SETTLE_TIMEOUT_MS = 60_000;

const MiB = 1024 * 1024;


// ---------------------------------------------------------------------------------------------
// The serve tool's stats line (tools/istio-render/serve.go header)

const observationsSchema = z.object({ count: z.number(), sum: z.number(), last: z.number(), max: z.number() });
const statsReplySchema = z.object({
  stats: z.object({
    uptime_ms: z.number(),
    gc_forced: z.boolean(),
    memory: z.object({
      heap_alloc: z.number(),
      heap_inuse: z.number(),
      heap_sys: z.number(),
      heap_objects: z.number(),
      sys: z.number(),
      total_alloc: z.number(),
      num_gc: z.number(),
      gc_pause_total_ns: z.number(),
      rss: z.number().optional(),
      rss_peak: z.number().optional(),
    }),
    pilot: z.record(z.string(), z.record(z.string(), observationsSchema)),
    generated: z.record(z.string(), z.object({ responses: z.number(), resources: z.number(), generate_ms: z.number(), transform_ms: z.number() })),
    phases: z.record(z.string(), z.number()),
  }),
});
type ServeStats = z.infer<typeof statsReplySchema>['stats'];
const applyReplySchema = z.object({ applied: z.number().optional(), error: z.string().optional() });

async function serveStats(serve: ServeProcess, gc: boolean): Promise<ServeStats> {
  serve.child.stdin.write(`${JSON.stringify({ stats: true, gc })}\n`);
  return statsReplySchema.parse(JSON.parse(await serve.nextLine('stats reply', STATS_TIMEOUT_MS))).stats;
}

/** Count and sum of a pilot metric's series (label values joined; '' when unlabelled) between two stats. */
function pilotDelta(before: ServeStats | undefined, after: ServeStats, metric: string, series = ''): { count: number; sum: number; last: number } {
  const a = after.pilot[metric]?.[series];
  const b = before?.pilot[metric]?.[series];
  return { count: (a?.count ?? 0) - (b?.count ?? 0), sum: (a?.sum ?? 0) - (b?.sum ?? 0), last: a?.last ?? 0 };
}

function pilotSeries(stats: ServeStats, metric: string): string[] {
  return Object.keys(stats.pilot[metric] ?? {}).sort();
}

const XDS_TYPES = ['cds', 'lds', 'rds', 'ecds'] as const;

/** Per xDS type: responses, resources (serve's generator counts) and bytes (pilot_xds_config_size_bytes) between two stats. */
function pushed(before: ServeStats | undefined, after: ServeStats): string {
  const parts: string[] = [];
  for (const type of XDS_TYPES) {
    const a = after.generated[type];
    const b = before?.generated[type];
    const responses = (a?.responses ?? 0) - (b?.responses ?? 0);
    const resources = (a?.resources ?? 0) - (b?.resources ?? 0);
    const bytes = pilotDelta(before, after, 'pilot_xds_config_size_bytes', type).sum;
    if (responses > 0 || bytes > 0) parts.push(`${type.toUpperCase()} ${resources} in ${responses} resp, ${kib(bytes)} KiB`);
  }
  return parts.join('; ') || 'nothing';
}

/** ms serve spent rewriting the type's resources for loopback (inside pilot_xds_push_time, not istiod's work). */
function transformMs(before: ServeStats | undefined, after: ServeStats, type: string): number {
  return (after.generated[type]?.transform_ms ?? 0) - (before?.generated[type]?.transform_ms ?? 0);
}

function allTransformMs(before: ServeStats | undefined, after: ServeStats): number {
  return XDS_TYPES.reduce((sum, type) => sum + transformMs(before, after, type), 0);
}

/** ms in Istio's generators for the type (serve times them; pilot_xds_push_time also holds the rewrite and the send). */
function generateMs(before: ServeStats | undefined, after: ServeStats, type: string): number {
  return (after.generated[type]?.generate_ms ?? 0) - (before?.generated[type]?.generate_ms ?? 0);
}

function allGenerateMs(before: ServeStats | undefined, after: ServeStats): number {
  return XDS_TYPES.reduce((sum, type) => sum + generateMs(before, after, type), 0);
}

/**
 * Per xDS type: Istio's generate time, serve's rewrite, and the rest of pilot_xds_push_time
 * (sending: marshalling and waiting for the gRPC stream while Envoy is busy with what came before).
 */
function pushTimes(before: ServeStats | undefined, after: ServeStats): string {
  const parts = pilotSeries(after, 'pilot_xds_push_time').flatMap((series) => {
    const d = pilotDelta(before, after, 'pilot_xds_push_time', series);
    if (d.count === 0) return [];
    const generate = generateMs(before, after, series);
    const rewrite = transformMs(before, after, series);
    return [
      `${series.toUpperCase()}${d.count > 1 ? ` (${d.count} responses)` : ''} generate ${generate.toFixed(0)}${rewrite > 0 ? ` + serve's rewrite ${rewrite.toFixed(0)}` : ''} + send ${(d.sum * 1000 - generate - rewrite).toFixed(0)} ms`,
    ];
  });
  return parts.join(', ') || 'none';
}

/** pilot_xds_config_size_bytes summed over types. */
function pushedBytes(before: ServeStats | undefined, after: ServeStats): number {
  return pilotSeries(after, 'pilot_xds_config_size_bytes').reduce((sum, series) => sum + pilotDelta(before, after, 'pilot_xds_config_size_bytes', series).sum, 0);
}

function mib(bytes: number | undefined): string {
  return bytes === undefined ? '?' : (bytes / MiB).toFixed(0);
}

function kib(bytes: number): string {
  return (bytes / 1024).toFixed(0);
}

function memory(stats: ServeStats): string {
  const m = stats.memory;
  return `heap in use ${mib(m.heap_inuse)} MiB, RSS ${mib(m.rss)} MiB, peak RSS ${mib(m.rss_peak)} MiB`;
}

// ---------------------------------------------------------------------------------------------
// Envoy side

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}


const ADMIN_TIMEOUT_MS = 2_000;

/** An admin API read, or undefined when Envoy's main thread is too busy to answer in time (the next poll tries again). */
async function patiently<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return undefined;
    throw error;
  }
}

/**
 * Envoy keeps only the stats the bench reads, as Istio's proxy bootstrap keeps only a few
 * (stats_matcher inclusion list): with thousands of clusters, every /stats poll would otherwise
 * walk millions of stats on the main thread that applies the pushes being timed.
 */
const STATS_CONFIG: JsonObject = {
  stats_matcher: {
    inclusion_list: {
      patterns: ['cluster_manager.', 'listener_manager.', 'server.', 'cluster.xds-grpc.', 'extension_config_discovery.'].map((prefix) => ({ prefix })),
    },
  },
};

/**
 * What Istio's own proxy bootstrap sets and the harness's does not: few stats (STATS_CONFIG), and
 * LDS and CDS waiting for their first response however long istiod takes (initial_fetch_timeout
 * 0s; Envoy's default 15 s would let it go LIVE without listeners while Istio still generates them).
 */
function withIstioBootstrapSettings(bootstrap: JsonObject): JsonObject {
  const dynamic = dynamicResourcesSchema.parse(bootstrap['dynamic_resources']);
  const waiting = { initial_fetch_timeout: '0s' };
  return {
    ...bootstrap,
    stats_config: STATS_CONFIG,
    dynamic_resources: { ...dynamic, lds_config: { ...dynamic.lds_config, ...waiting }, cds_config: { ...dynamic.cds_config, ...waiting } },
  };
}

const dynamicResourcesSchema = z.looseObject({ lds_config: z.record(z.string(), z.json()), cds_config: z.record(z.string(), z.json()) });

const ECDS_PREFIX = 'extension_config_discovery.';
const ECDS_RELOAD = '.config_reload';

/** config_reload per ECDS resource name (Envoy's stat is extension_config_discovery[.<scope>].<name>.config_reload). */
async function ecdsReloadsByName(envoy: EnvoyInstance): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [stat, value] of await envoy.stats('^extension_config_discovery\\..*\\.config_reload$')) {
    const inner = stat.slice(ECDS_PREFIX.length, -ECDS_RELOAD.length);
    const name = inner.slice(inner.lastIndexOf('.') + 1);
    out.set(name, (out.get(name) ?? 0) + value);
  }
  return out;
}

const ENVOY_COUNTERS = [
  'listener_manager.lds.update_success',
  'listener_manager.lds.update_rejected',
  'listener_manager.listener_modified',
  'listener_manager.total_listeners_warming',
  'listener_manager.total_listeners_active',
  'cluster_manager.cds.update_success',
  'cluster_manager.cds.update_rejected',
  'cluster_manager.active_clusters',
  'server.memory_allocated',
] as const;
type EnvoyCounters = Record<(typeof ENVOY_COUNTERS)[number], number>;

async function envoyCounters(envoy: EnvoyInstance): Promise<EnvoyCounters> {
  const stats = await envoy.stats(`^(${ENVOY_COUNTERS.map((n) => n.replace(/\./g, '\\.')).join('|')})$`);
  return Object.fromEntries(ENVOY_COUNTERS.map((name) => [name, stats.get(name) ?? 0])) as EnvoyCounters;
}

/** Envoy's log lines about rejected configuration (bounded). */
function envoyProblems(envoy: EnvoyInstance): string {
  const lines = envoy.output().split('\n').filter((line) => /rejected|error|warning/i.test(line));
  return lines.slice(-5).map((line) => line.slice(0, 600)).join(' / ') || '(nothing logged)';
}

/** serve's stderr without Istio's startup noise about Gateway API CRD annotations. */
function serveProblems(serve: ServeProcess): string {
  return serve.log().split('\n').filter((line) => line.trim() !== '' && !/CRD .* expected to have a .* annotation/.test(line)).slice(-10).join(' / ').slice(-1_500);
}

/** A loopback port every cluster points at (serve's -upstream-fallback): Envoy needs an address, no traffic goes there. */
async function sink(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('sink has no TCP address');
  return { server, port: address.port };
}

// ---------------------------------------------------------------------------------------------
// TLS secrets

const gatewaySchema = z.object({
  spec: z.object({
    selector: z.record(z.string(), z.string()).default({}),
    servers: z.array(z.object({ tls: z.object({ mode: z.string().optional(), credentialName: z.string().optional() }).optional() })).default([]),
  }),
});

/**
 * The SDS secrets Istio gives the default gateway: `kubernetes://<credentialName>` of every
 * server of every Gateway selecting it, and `...-cacert` where the server verifies clients. The
 * seed has one per shoot (its Plutono host), so they are read from the objects, not from a
 * static render (which at 5,000 shoots costs minutes); the bench checks this against a render once.
 */
function gatewaySecretNames(objects: readonly JsonObject[]): string[] {
  const names = new Set<string>();
  for (const object of objects) {
    if (object['kind'] !== 'Gateway') continue;
    const { spec } = gatewaySchema.parse(object);
    if (!Object.entries(spec.selector).every(([key, value]) => proxy.labels[key] === value)) continue;
    for (const { tls } of spec.servers) {
      if (tls?.credentialName === undefined) continue;
      names.add(`kubernetes://${tls.credentialName}`);
      if (tls.mode === 'MUTUAL' || tls.mode === 'OPTIONAL_MUTUAL') names.add(`kubernetes://${tls.credentialName}-cacert`);
    }
  }
  return [...names].sort();
}

/** Static secrets of those names, all holding one throwaway certificate (what they hold does not matter here; generating thousands would). */
async function sharedSecrets(names: readonly string[]): Promise<JsonObject[]> {
  const made = await staticSecrets(['kubernetes://istiod-push-bench', 'kubernetes://istiod-push-bench-cacert']);
  const certificate = made.find((secret) => secret['tls_certificate'] !== undefined)?.['tls_certificate'];
  const validation = made.find((secret) => secret['validation_context'] !== undefined)?.['validation_context'];
  if (certificate === undefined || validation === undefined) throw new Error('staticSecrets gave no certificate');
  return names.map((name): JsonObject => (name.endsWith('-cacert') ? { name, validation_context: validation } : { name, tls_certificate: certificate }));
}

// ---------------------------------------------------------------------------------------------
// One row

interface Seed {
  readonly input: JsonObject[];
  readonly envoyFilters: number;
  readonly envoyFilterBytes: number;
  readonly inputBytes: number;
}

function seedFor(fixture: readonly JsonObject[], { form, revocation }: Variant): Seed {
  const objects = withOperatorSettings(fixture, { combinedForm: form, tunnelRevocation: revocation });
  const input = istioInputObjects(objects, generateForSeed(objects));
  const filters = input.filter((o) => o['kind'] === 'EnvoyFilter');
  return { input, envoyFilters: filters.length, envoyFilterBytes: istioInputDocuments(filters).length, inputBytes: istioInputDocuments(input).length };
}

interface ChangeResult {
  /** First write of a changed object → Envoy applied, ms. */
  readonly appliedMs: number;
  /** Of it, serve's loopback rewrite, ms. */
  readonly rewriteMs: number;
  /** pilot: push context init + Istio's generators, summed over the change's pushes, ms. */
  readonly workMs: number;
  readonly pushes: number;
  /** Bytes pilot pushed for the change, all types. */
  readonly bytes: number;
}

interface RowResult {
  readonly size: number;
  readonly form: CombinedFormName;
  readonly lines: string[];
  readonly summary: string;
}

async function runRow(size: number, variant: Variant): Promise<RowResult> {
  const { form } = variant;
  const rowStart = performance.now();
  const lines: string[] = [];
  const log = (line: string): void => {
    lines.push(line);
    console.log(`  ${line}`);
  };
  console.log(`\n${size} ACL shoots, combinedForm ${label(variant)} (load average ${loadavg().map((l) => l.toFixed(2)).join(' ')})`);

  const fixtureShoots = gatewaySeedShoots(size);
  const prepStart = performance.now();
  const fixture = gardenerSeedObjects(era, fixtureShoots);
  const seed = seedFor(fixture, variant);
  const prepSeconds = (performance.now() - prepStart) / 1000;
  log(
    `input: ${seed.input.length} objects Istio reads (${mib(seed.inputBytes)} MiB as JSON), of them ${seed.envoyFilters} EnvoyFilters (${mib(seed.envoyFilterBytes)} MiB); ` +
      `built by our generator in ${prepSeconds.toFixed(1)} s (not istiod's time)`,
  );

  const dir = await mkdtemp(join(tmpdir(), 'gardener-acl-istiod-push-'));
  const { server: sinkServer, port: sinkPort } = await sink();
  let serve: ServeProcess | undefined;
  let envoy: EnvoyInstance | undefined;
  try {
    const secrets = await sharedSecrets(gatewaySecretNames(seed.input));
    await writeFile(join(dir, 'objects.yaml'), istioInputDocuments(seed.input));
    // Full push, server side: from spawning the discovery server until it is ready to serve.
    const serveStart = performance.now();
    serve = new ServeProcess(
      spawn(findIstioRenderBinary(), ['serve', ...proxyArguments(proxy), '--upstream-fallback', String(sinkPort), join(dir, 'objects.yaml')], { stdio: ['pipe', 'pipe', 'pipe'] }),
    );
    const ready = readySchema.parse(JSON.parse(await serve.nextLine('ready line', READY_TIMEOUT_MS)));
    const readySeconds = (performance.now() - serveStart) / 1000;
    const atReady = await serveStats(serve, false);

    // Full push, proxy side: from spawning Envoy until it holds the complete configuration.
    const bootstrap = withIstioBootstrapSettings(xdsBootstrap(ready.node, parseAddress(ready.xds), secrets));
    const envoyStart = performance.now();
    // awaitLive false: the bench polls LIVE itself, tolerating an admin API that is slow to answer while Envoy takes a large push.
    envoy = await startEnvoy({ bootstrap, awaitListeners: [], drainTimeSeconds: 1, startTimeoutMs: ENVOY_COMPLETE_TIMEOUT_MS, awaitLive: false });
    const live = envoy;
    const expected = form === 'ecds' ? Array.from({ length: BUCKETS }, (_u, b) => ecdsResourceName(b)) : [];
    const remaining = ENVOY_COMPLETE_TIMEOUT_MS - (performance.now() - envoyStart);
    await pollUntil('Envoy LIVE, every ECDS resource loaded and no listener warming', remaining, async () => {
      const readyStatus = await fetch(`${live.adminUrl}/ready`, { signal: AbortSignal.timeout(ADMIN_TIMEOUT_MS) }).then((r) => r.status, () => 0);
      if (readyStatus !== 200) return undefined;
      const reloads = await patiently(() => ecdsReloadsByName(live));
      if (reloads === undefined || !expected.every((name) => (reloads.get(name) ?? 0) > 0)) return undefined;
      const counters = await patiently(() => envoyCounters(live));
      if (counters === undefined || counters['listener_manager.lds.update_success'] < 1 || counters['cluster_manager.cds.update_success'] < 1) return undefined;
      return counters['listener_manager.total_listeners_warming'] === 0 ? true : undefined;
    });
    const completeSeconds = (performance.now() - envoyStart) / 1000;
    const afterFull = await serveStats(serve, false);
    const afterFullGc = await serveStats(serve, true);
    const envoyFull = await envoyCounters(envoy);
    const ecdsHeld = (await ecdsReloadsByName(envoy)).size;
    const initAtReady = pilotDelta(undefined, atReady, 'pilot_pushcontext_init_seconds');
    const serverSeconds = (atReady.phases['startup_server_ms'] ?? Number.NaN) / 1000;
    const fullPushSeconds = allGenerateMs(atReady, afterFull) / 1000;
    log(
      `full push: serve start → ready ${readySeconds.toFixed(2)} s (reading the files ${((atReady.phases['startup_read_ms'] ?? Number.NaN) / 1000).toFixed(2)} s, ` +
        `building Istio's discovery server with them ${serverSeconds.toFixed(2)} s, in it the first push context ${(initAtReady.sum * 1000).toFixed(0)} ms); ` +
        `Envoy start → complete ${completeSeconds.toFixed(2)} s (pilot: ${pushTimes(atReady, afterFull)})`,
    );
    log(`  pushed: ${pushed(atReady, afterFull)}`);
    log(
      `  Envoy holds ${envoyFull['listener_manager.total_listeners_active']} listeners, ${envoyFull['cluster_manager.active_clusters']} clusters, ${ecdsHeld} ECDS resources; ` +
        `rejected: LDS ${envoyFull['listener_manager.lds.update_rejected']}, CDS ${envoyFull['cluster_manager.cds.update_rejected']}; Envoy heap ${mib(envoyFull['server.memory_allocated'])} MiB`,
    );
    log(
      `  istiod memory: ready (no proxy yet): heap in use ${mib(atReady.memory.heap_inuse)} MiB, RSS ${mib(atReady.memory.rss)} MiB; ` +
        `after the full push: ${memory(afterFull)}, live heap after GC ${mib(afterFullGc.memory.heap_alloc)} MiB; allocated since start ${(afterFull.memory.total_alloc / 1024 / MiB).toFixed(2)} GiB, ${afterFull.memory.num_gc} GCs`,
    );
    // A refused listener or cluster would make every figure after it meaningless.
    if (envoyFull['listener_manager.lds.update_rejected'] > 0 || envoyFull['cluster_manager.cds.update_rejected'] > 0) {
      throw new Error(`Envoy refused part of the full push: ${envoyProblems(envoy)}`);
    }
    const dropped = serve.log().match(/dropped/g)?.length ?? 0;
    if (dropped > 0) log(`  serve dropped ${dropped} resources (stderr): ${serveProblems(serve)}`);

    const changes: ChangeResult[] = [];
    if (size === 0) {
      log('ACL change: none (no ACL shoot to change)');
    } else {
      let objects = fixture;
      let cidrs = [...(fixtureShoots[0]?.rule?.cidrs ?? [])];
      const changed = fixtureShoots[0]!.id;
      const bucket = ecdsResourceName(ecdsBucketOf(changed, BUCKETS));
      let statsBefore = afterFullGc;
      const changeCount = size > MANY_SHOOTS ? 1 : CHANGES;
      for (let k = 1; k <= changeCount; k++) {
        cidrs = [...cidrs, `198.51.100.${k}/32`];
        objects = withRule(objects, changed, { action: 'ALLOW', type: 'remote_ip', cidrs });
        const next = seedFor(objects, variant);
        const config = istioInputDocuments(next.input.filter((o) => o['kind'] === 'EnvoyFilter'));
        const envoyBefore = await envoyCounters(envoy);
        const reloadsBefore = await ecdsReloadsByName(envoy);

        const sent = performance.now();
        // gc: serve collects the garbage of parsing the whole set before it writes, so the timed push does not pay for it.
        serve.child.stdin.write(`${JSON.stringify({ config, gc: true })}\n`);
        const reply = applyReplySchema.parse(JSON.parse(await serve.nextLine('reply to the change', REPLY_TIMEOUT_MS)));
        if (reply.error !== undefined || reply.applied === undefined) throw new Error(`serve refused the change: ${reply.error ?? 'no count'}`);
        const storedAt = performance.now();
        // Right away (pilot waits 100 ms of quiet before it pushes): what parsing the whole EnvoyFilter set allocated is the harness's, not the push's.
        const atReply = await serveStats(serve, false);
        let ldsAt: number | undefined;
        let reloadAt: number | undefined;
        const appliedAt = await pollUntil('Envoy to apply the change', APPLIED_TIMEOUT_MS, async () => {
          const now = await patiently(() => envoyCounters(live));
          if (now === undefined) return undefined;
          if (now['listener_manager.lds.update_rejected'] > envoyBefore['listener_manager.lds.update_rejected']) throw new Error(`Envoy refused the changed listeners: ${envoyProblems(live)}`);
          if (ldsAt === undefined && now['listener_manager.lds.update_success'] > envoyBefore['listener_manager.lds.update_success'] && now['listener_manager.total_listeners_warming'] === 0) {
            ldsAt = performance.now();
          }
          if (form === 'ecds') {
            const reloads = await patiently(() => ecdsReloadsByName(live));
            if (reloadAt === undefined && (reloads?.get(bucket) ?? 0) > (reloadsBefore.get(bucket) ?? 0)) reloadAt = performance.now();
            return reloadAt;
          }
          return ldsAt;
        });
        // Outside the timing: wait until pilot has finished pushing (no further response for SETTLE_QUIET_MS), then read its figures.
        const responses = (stats: ServeStats): number => pilotSeries(stats, 'pilot_xds_push_time').reduce((n, series) => n + (stats.pilot['pilot_xds_push_time']?.[series]?.count ?? 0), 0);
        let settled = await serveStats(serve, false);
        const settleDeadline = performance.now() + SETTLE_TIMEOUT_MS;
        let quietSince = performance.now();
        while (performance.now() - quietSince < SETTLE_QUIET_MS && performance.now() < settleDeadline) {
          await sleep(200);
          const again = await serveStats(serve, false);
          if (responses(again) !== responses(settled)) quietSince = performance.now();
          settled = again;
        }
        const envoyAfter = await envoyCounters(envoy);
        const reloadsAfter = await ecdsReloadsByName(envoy);
        const reloaded = [...reloadsAfter].filter(([name, n]) => n > (reloadsBefore.get(name) ?? 0)).map(([name]) => name);
        const afterGc = await serveStats(serve, true);
        // Pilot records nothing while serve parses the update, so its deltas are taken from before the write.
        const debounce = pilotDelta(statsBefore, settled, 'pilot_debounce_time');
        const init = pilotDelta(statsBefore, settled, 'pilot_pushcontext_init_seconds');
        const convergence = pilotDelta(statsBefore, settled, 'pilot_proxy_convergence_time');
        const rewriteMs = allTransformMs(statsBefore, settled);
        // istiod's work for the change, summed over its pushes: push context init, then Istio's generators for each response.
        const workMs = init.sum * 1000 + allGenerateMs(statsBefore, settled);
        // The push starts with the first write of a changed object: serve writes them back to back after its parse and comparison.
        const firstWriteAt = storedAt - (atReply.phases['update_write_ms'] ?? 0);
        const appliedMs = appliedAt - firstWriteAt;
        const bytes = pushedBytes(statsBefore, settled);
        const line =
          `change ${k} (+1 CIDR on ${changed}): ${reply.applied} EnvoyFilters changed. stdin line → store updated ${(storedAt - sent).toFixed(0)} ms (the harness: serve parses the whole EnvoyFilter set ` +
          `${(atReply.phases['update_parse_ms'] ?? Number.NaN).toFixed(0)} ms and compares it with the store ${(atReply.phases['update_compare_ms'] ?? Number.NaN).toFixed(0)} ms; ` +
          `then writes the changed ones back to back ${(atReply.phases['update_write_ms'] ?? Number.NaN).toFixed(0)} ms); ` +
          `first write → Envoy applied ${appliedMs.toFixed(0)} ms (${form === 'ecds' ? `${bucket} reloaded; listener update ${ldsAt === undefined ? 'none seen by then' : `at ${(ldsAt - firstWriteAt).toFixed(0)} ms`}` : 'listener update accepted and warmed'}; ` +
          `includes ${rewriteMs.toFixed(0)} ms of serve's rewrite). ` +
          `pilot: ${debounce.count} push(es), ${convergence.count} of them to this proxy; first event → push queued ${(debounce.last * 1000).toFixed(0)} ms (100 ms quiet + push context init ${(init.sum * 1000).toFixed(0)} ms), ` +
          `queued → proxy sent every type ${(convergence.last * 1000).toFixed(0)} ms (${pushTimes(statsBefore, settled)})${debounce.count > 1 ? ' (the last push\'s figures; the sums below cover all)' : ''}; ` +
          `istiod's work (push context init + generate, all pushes) ${workMs.toFixed(0)} ms; ` +
          `pushed ${pushed(statsBefore, settled)}. Envoy: listeners modified ${envoyAfter['listener_manager.listener_modified'] - envoyBefore['listener_manager.listener_modified']}, ` +
          `ECDS resources reloaded ${reloaded.length}, CDS updates ${envoyAfter['cluster_manager.cds.update_success'] - envoyBefore['cluster_manager.cds.update_success']}. ` +
          `istiod after: ${memory(settled)}, live heap after GC ${mib(afterGc.memory.heap_alloc)} MiB; the push allocated ${mib(settled.memory.total_alloc - atReply.memory.total_alloc)} MiB`;
        log(line);
        changes.push({ appliedMs, rewriteMs, workMs, pushes: convergence.count, bytes });
        statsBefore = afterGc;
      }
    }
    const last = await serveStats(serve, true);
    const rowSeconds = (performance.now() - rowStart) / 1000;
    log(`row wall time ${rowSeconds.toFixed(0)} s`);
    const summary =
      `| ${size} | ${label(variant)} | ${serverSeconds.toFixed(1)} | ${completeSeconds.toFixed(1)} | ${fullPushSeconds.toFixed(2)} | ${(pushedBytes(atReady, afterFull) / MiB).toFixed(1)} | ` +
      `${mib(afterFullGc.memory.heap_alloc)} / ${mib(afterFull.memory.rss)} / ${mib(afterFull.memory.rss_peak)} | ` +
      `${changes.length === 0 ? '–' : changes.map((c) => `${c.appliedMs.toFixed(0)} (${c.rewriteMs.toFixed(0)})`).join(', ')} | ` +
      `${changes.length === 0 ? '–' : changes.map((c) => `${c.workMs.toFixed(0)}${c.pushes === 1 ? '' : ` (${c.pushes} pushes to the proxy)`}`).join(', ')} | ${changes[0] === undefined ? '–' : (changes[0].bytes / MiB).toFixed(1)} | ` +
      `${changes.length === 0 ? '–' : `${mib(last.memory.heap_alloc)} / ${mib(last.memory.rss_peak)}`} | ${rowSeconds.toFixed(0)} |`;
    return { size, form, lines, summary };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log(`FAILED after ${((performance.now() - rowStart) / 1000).toFixed(0)} s: ${message.split('\n').slice(0, 6).join(' / ')}`);
    if (serve) log(`serve stderr (tail): ${serveProblems(serve) || '(nothing)'}`);
    if (envoy) log(`Envoy: ${envoyProblems(envoy)}`);
    return { size, form, lines, summary: `| ${size} | ${label(variant)} | failed: ${message.split('\n')[0] ?? ''} |` };
  } finally {
    await Promise.allSettled([envoy?.stop(), serve?.stop(), new Promise<void>((resolve) => sinkServer.close(() => resolve()))]);
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------

const benchStart = performance.now();
console.log(
  `istiod push bench: Gardener ${era.name} seed, default gateway (${gateway.namespace}); Istio's discovery server (tools/istio-render serve, debounce 100 ms) → Envoy ${ENVOY_VERSION} over delta ADS; ` +
    `ecds with the default ${BUCKETS} buckets; Envoy keeps only a few stats (as Istio's bootstrap); ${cpus().length} CPUs, other processes may run (load average at start ${loadavg().map((l) => l.toFixed(2)).join(' ')}). ` +
    `Each row is one run on a fresh server and Envoy; changes are ${CHANGES} in a row on the same server (1 above ${MANY_SHOOTS} shoots).`,
);
// Checked once on a small seed: the SDS secrets derived from the Gateways are exactly those Istio's
// static render of the gateway names (else Envoy would refuse the listener naming a missing one).
{
  const small = seedFor(gardenerSeedObjects(era, gatewaySeedShoots(3)), { form: 'ecds', revocation: 'hop' }).input;
  const rendered = [...planStaticGateway(await renderGatewayWithIstio(small, proxy)).sdsSecretNames].sort();
  const derived = gatewaySecretNames(small);
  if (JSON.stringify(rendered) !== JSON.stringify(derived)) throw new Error(`SDS secrets derived from the Gateways ${JSON.stringify(derived)} differ from Istio's render ${JSON.stringify(rendered)}`);
}

const rows: RowResult[] = [];
for (const size of SIZES) for (const variant of FORMS) rows.push(await runRow(size, variant));

console.log(
  `\nSummary (one run per row; the ${CHANGES} changes (1 above ${MANY_SHOOTS} shoots) in a row on the same server):\n` +
    `| ACL shoots | form | istiod start with the seed (s) | full push: Envoy start → complete (s) | full push: istiod generate (s) | full push: bytes (MiB) | istiod after the full push: live heap / RSS / peak RSS (MiB) | ACL change: first write → Envoy applied (ms; in brackets serve's rewrite in it) | ACL change: istiod's work, push context init + generate (ms) | ACL change: bytes of the first (MiB) | istiod after the changes: live heap / peak RSS (MiB) | row wall (s) |\n` +
    `|---|---|---|---|---|---|---|---|---|---|---|---|`,
);
for (const row of rows) console.log(row.summary);
console.log(`bench wall time ${((performance.now() - benchStart) / 1000).toFixed(0)} s`);
