// HTTP CONNECT setup latency through a real Envoy 1.40 with the ACL filters of N shoots placed on
// the gateway: gardener-acl's combined filters in every form (`ecds`, the default: the per-header
// lookup in ECDS buckets; `ours`: the rules form, sharded DENY policies; `matcher`: the lookup in
// listener patches), each with the chart's other defaults, next to the Go reference extension's
// shape (one ALLOW filter per shoot per port) for the same seed model. The ECDS resources reach
// Envoy as watched files (istiod sends them over ADS): each file subscription takes one of the
// user's inotify instances (fs.inotify.max_user_instances, 128 by default), which the default 48
// buckets leave room for. Prints measurements and never asserts
// timings; it only refuses to report numbers for requests that did not succeed.
//
// usage: npx tsx bench/envoy-connect.ts [sizes=0,100,1000,5000] [requests=300] [warmup=30] [shapes=ours,matcher,ecds,reference]
// (ecds, like every shape of ours, with the default tunnelRevocation hop: the tunnel hop's entry on
// the CONNECT listeners and its shard listeners; its doors are clusters the harness's gateway,
// started without filters, does not get, which only VPN destinations would reach; ecds-none: the
// same without the hop)
//
// The gateway carries only the two shoots the requests hit (their echo upstreams and SNI chains);
// the filters of all N shoots are placed anyway: CONNECT routes take the cluster from a header, so
// RBAC filters need no cluster to exist. A gateway with upstreams for all 5,000 shoots (15,000 echo
// servers and Envoy clusters) took 24 s to start on a 2-core machine and 830 MB in Envoy, mostly clusters,
// which would drown what the filters cost. Per-shoot SNI filters of shoots without a chain here are no-ops.

import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { allEnvoyFilters, buildSeedEnvoyFilters, type AnyGeneratedEnvoyFilter } from '../src/rbac/seed-envoy-filters.js';
import { EcdsFiles, ecdsReloads } from '../test/envoy/ecds-files.js';
import { testSeed, type TestShoot } from '../test/support/test-seed.js';
import { httpConnect, proxyV2From } from '../test/envoy/clients.js';
import { HeldConnection, connectRequestBytes } from '../test/envoy/held-connection.js';
import { ENVOY_VERSION } from '../test/envoy/envoy-binary.js';
import type { BoundAddress, EnvoyInstance } from '../test/envoy/envoy-process.js';
import { HEADER_GARDENER_DESTINATION, GARDENER_PORT, istioClusterName } from '../test/envoy/gardener-shapes.js';
import { approximateIstioPlacement, type PlacementResult } from '../test/envoy/istio-placement-approximation.js';
import { getObject, getObjectList, getString, type JsonObject } from '../test/envoy/json.js';
import { startLiveGateway, type LiveGateway } from '../test/envoy/live-gateway.js';
import { listenerConfigs } from '../test/envoy/gardener-gateway.js';
import { referenceExtensionFilters } from '../test/envoy/reference-extension-shape.js';

const SIZES = (process.argv[2] ?? '0,100,1000,5000').split(',').map(Number);
const SHAPES = (process.argv[5] ?? 'ours,matcher,ecds,reference').split(',') as Shape[];
const REQUESTS = Number(process.argv[3] ?? 1000);
const WARMUP = Number(process.argv[4] ?? 50);
const CIDRS_PER_SHOOT = 10;
// Bounds every measurement loop in time as well as in count (a stuck Envoy must not hang the bench).
const ROW_BUDGET_MS = 60_000;
const PORT = GARDENER_PORT.httpProxy;

const TARGET = 'shoot--bench--target';
const OPEN = 'shoot--bench--open';

type Shape = 'ours' | 'matcher' | 'ecds' | 'ecds-none' | 'reference';
type RequestKind = 'ACL shoot' | 'shoot without ACL';

// ---------------------------------------------------------------------------------------------
// The seed

/** Ten /24s (every fifth one IPv6) unique to shoot `index`, as a shoot owner might list them. */
function shootCidrs(index: number): string[] {
  return Array.from({ length: CIDRS_PER_SHOOT }, (_unused, j) =>
    j % 5 === 4 ? `2001:db8:${(index % 65_536).toString(16)}:${j}::/64` : `${11 + j}.${index % 256}.${index >> 8}.0/24`,
  );
}

function aclShoot(id: string, index: number): TestShoot {
  return {
    id,
    rule: { action: 'ALLOW', type: 'remote_ip', cidrs: shootCidrs(index) },
    // Seed nodes, seed pods, the shoot's node range, one egress address.
    always: ['10.250.0.0/16', '10.96.0.0/11', '10.180.0.0/16', `198.51.100.${index % 256}/32`],
  };
}

/** N ACL shoots, the first of which is the one the requests target, plus one shoot without ACL. */
function benchShoots(aclShoots: number): TestShoot[] {
  const others = Array.from({ length: Math.max(0, aclShoots - 1) }, (_unused, i) => aclShoot(`shoot--p${i % 50}--s${i + 1}`, i + 1));
  const target: TestShoot = aclShoots > 0 ? aclShoot(TARGET, 0) : { id: TARGET };
  return [target, ...others, { id: OPEN }];
}

/** A client inside the target's last IPv4 range, so matching walks past its other ranges first. */
function admittedClient(): string {
  const lastIpv4 = shootCidrs(0).filter((range) => !range.includes(':')).at(-1);
  if (lastIpv4 === undefined) throw new Error('the target shoot has no IPv4 range');
  return lastIpv4.replace(/\.0\/24$/, '.9');
}
const ADMITTED_CLIENT = admittedClient();
/** The harness's Envoy drains replaced filter chains for 1 s (--drain-time-s 1); tunnels are counted after this. */
const PAST_DRAIN_MS = 3_000;
/** A second ACL shoot (index 1 of benchShoots) and a client inside its first range. */
const OTHER_ACL = 'shoot--p0--s1';
const OTHER_ACL_CLIENT = shootCidrs(1)[0]!.replace(/\.0\/24$/, '.9');

interface ShapeConfig {
  /** EnvoyFilters the gateway's listeners get (placed as Istio would). */
  readonly envoyFilters: unknown[];
  /** ECDS resources (`{name, typed_config}`), for the ecds shape. */
  readonly ecdsResources: JsonObject[];
}

function filtersOf(shape: Shape, shoots: readonly TestShoot[]): ShapeConfig {
  const { seed } = testSeed(shoots, {
    // Each form with the chart's other defaults (ecds: its 48 buckets of 512 KiB).
    // ecds-none: the default form without the tunnel hop (tunnelRevocation none), to show what the hop costs.
    operator: { combinedForm: shape === 'ours' || shape === 'reference' ? 'rules' : shape === 'ecds-none' ? 'ecds' : shape, ...(shape === 'ecds-none' ? { tunnelRevocation: 'none' as const } : {}) },
  });
  if (shape === 'reference') return { envoyFilters: referenceExtensionFilters(seed), ecdsResources: [] };
  const filters = buildSeedEnvoyFilters(seed);
  if (shape !== 'ecds' && shape !== 'ecds-none') return { envoyFilters: allEnvoyFilters(filters), ecdsResources: [] };
  // The bucket objects travel as ECDS resources (istiod: EXTENSION_CONFIG), the rest as EnvoyFilters.
  const isBucket = (o: AnyGeneratedEnvoyFilter) => o.spec.configPatches.some((p) => p.applyTo === 'EXTENSION_CONFIG');
  const ecdsResources = filters.combined.filter(isBucket).flatMap((o) => o.spec.configPatches.map((p) => p.patch.value as unknown as JsonObject));
  return { envoyFilters: allEnvoyFilters(filters).filter((o) => !isBucket(o)), ecdsResources };
}

/** The same seed after the target's owner added one range: the ACL change an LDS update carries. */
function changedShoots(shoots: readonly TestShoot[]): TestShoot[] {
  return shoots.map((shoot) =>
    shoot.id === TARGET && shoot.rule !== undefined ? { ...shoot, rule: { ...shoot.rule, cidrs: [...shoot.rule.cidrs, '192.0.2.0/24'] } } : shoot,
  );
}

// ---------------------------------------------------------------------------------------------
// Measurements

interface Latencies {
  p50: number;
  p99: number;
  mean: number;
  count: number;
}

function summarize(samples: number[]): Latencies {
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
  const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
  return { p50: rank(0.5), p99: rank(0.99), mean, count: sorted.length };
}

/** One CONNECT from the admitted client: ms from sending it to reading the echo identity through the tunnel. */
async function timedConnect(endpoint: BoundAddress, shoot: string): Promise<number> {
  const destination = istioClusterName.kubeApiserver(shoot);
  const start = performance.now();
  const result = await httpConnect({
    ...endpoint,
    proxyHeader: proxyV2From(ADMITTED_CLIENT),
    headers: [[HEADER_GARDENER_DESTINATION, destination]],
  });
  const elapsed = performance.now() - start;
  if (result.status !== 200 || result.tunnel?.cluster !== destination) {
    throw new Error(`CONNECT to ${shoot} did not reach it (status ${result.status}, tunnel ${JSON.stringify(result.tunnel)})`);
  }
  return elapsed;
}

async function measureRow(gateway: LiveGateway, shoot: string): Promise<Latencies> {
  const endpoint = await gateway.endpoint(PORT);
  const deadline = Date.now() + ROW_BUDGET_MS;
  for (let i = 0; i < WARMUP && Date.now() < deadline; i++) await timedConnect(endpoint, shoot);
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS && Date.now() < deadline; i++) samples.push(await timedConnect(endpoint, shoot));
  return summarize(samples);
}

const memorySchema = z.object({ allocated: z.string(), heap_size: z.string() });

/** An admin request that timed out: Envoy's main thread, which also parses config, did not answer in time. */
function isAdminTimeout(error: unknown): boolean {
  return error instanceof Error && /time(d)? ?out/i.test(`${error.name} ${error.message}`);
}

/** Retries an admin read while Envoy's main thread is too busy (parsing config) to answer in time. */
async function patiently<T>(read: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + LDS_DEADLINE_MS;
  for (;;) {
    try {
      return await read();
    } catch (error) {
      if (performance.now() > deadline || !isAdminTimeout(error)) throw error;
    }
  }
}

async function envoyMemory(envoy: EnvoyInstance): Promise<{ allocated: number; heap: number }> {
  const response = await fetch(`${envoy.adminUrl}/memory`, { signal: AbortSignal.timeout(5_000) });
  const memory = memorySchema.parse(await response.json());
  return { allocated: Number(memory.allocated), heap: Number(memory.heap_size) };
}

/** HTTP filters in front of the router in the CONNECT listener (ours: RBAC and, matcher form, the extraction): what every request runs through. */
function rbacFiltersPerRequest(placement: PlacementResult): number {
  const listener = placement.gateway.listeners.find((l) => l.logicalPort === PORT);
  const hcm = getObjectList(getObjectList(listener?.config ?? {}, 'filter_chains')[0] ?? {}, 'filters')[0];
  const config = hcm === undefined ? undefined : getObject(hcm, 'typed_config');
  return Math.max(0, (config === undefined ? 0 : getObjectList(config, 'http_filters').length) - 1);
}

const LDS_STATS = '^listener_manager\\.(lds\\.update_(success|rejected)|total_listeners_warming)$';
const LDS_DEADLINE_MS = 120_000;

async function ldsCounters(envoy: EnvoyInstance): Promise<{ success: number; rejected: number; warming: number }> {
  const stats = await envoy.stats(LDS_STATS);
  return {
    success: stats.get('listener_manager.lds.update_success') ?? 0,
    rejected: stats.get('listener_manager.lds.update_rejected') ?? 0,
    warming: stats.get('listener_manager.total_listeners_warming') ?? 0,
  };
}

/**
 * Waits for Envoy's verdict on an LDS update itself. Envoy parses listeners on its main thread,
 * which also serves the admin API: with thousands of shoots that takes longer than the harness's
 * 2 s admin timeout, so `replaceListeners` gives up while Envoy is still working.
 */
async function awaitLdsVerdict(envoy: EnvoyInstance, successBefore: number, rejectedBefore: number): Promise<void> {
  const deadline = Date.now() + LDS_DEADLINE_MS;
  while (Date.now() < deadline) {
    const now = await ldsCounters(envoy).catch(() => undefined);
    if (now !== undefined && now.rejected > rejectedBefore) throw new Error('Envoy rejected the listener update');
    if (now !== undefined && now.success > successBefore && now.warming === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no LDS verdict within ${LDS_DEADLINE_MS} ms`);
}

/** ms from writing the ECDS and listener files until Envoy accepted and warmed the listeners (the harness polls every 20 ms). */
async function timedListenerLoad(envoy: EnvoyInstance, placement: PlacementResult, ecds?: { files: EcdsFiles; resources: JsonObject[] }): Promise<number> {
  const before = await ldsCounters(envoy);
  const start = performance.now();
  try {
    if (ecds) await ecds.files.write(ecds.resources);
    const listeners = listenerConfigs(placement.gateway);
    const result = await envoy.replaceListeners(ecds ? ecds.files.listeners(listeners) : listeners);
    if (!result.accepted) throw new Error(`Envoy rejected the listeners:\n${result.output.slice(-2_000)}`);
  } catch (error) {
    if (!isAdminTimeout(error)) throw error;
    await awaitLdsVerdict(envoy, before.success, before.rejected);
  }
  return performance.now() - start;
}

interface ConfigurationResult {
  shape: Shape;
  aclShoots: number;
  envoyFilters: number;
  rbacFilters: number;
  placementMs: number;
  loadMs: number;
  changeMs: number;
  /** Tunnels to other shoots held across the target's ACL change, and how many of them Envoy closed. */
  othersHeld: number;
  othersClosed: number;
  memory: { allocated: number; heap: number };
  rows: Map<RequestKind, Latencies>;
}

/** Open tunnels to shoots other than the target (one without ACL, twice, and another ACL shoot), each checked to carry data. */
async function holdOtherTunnels(gateway: LiveGateway, aclShoots: number): Promise<HeldConnection[]> {
  const endpoint = await gateway.endpoint(PORT);
  const wanted = [
    { shoot: OPEN, client: ADMITTED_CLIENT },
    { shoot: OPEN, client: OTHER_ACL_CLIENT },
    ...(aclShoots > 1 ? [{ shoot: OTHER_ACL, client: OTHER_ACL_CLIENT }] : []),
  ];
  return Promise.all(
    wanted.map(async ({ shoot, client }, i) => {
      const label = `tunnel ${i} to ${shoot}`;
      const tunnel = await HeldConnection.open(label, endpoint, connectRequestBytes(client, istioClusterName.kubeApiserver(shoot), HEADER_GARDENER_DESTINATION));
      const status = await tunnel.connectStatus();
      if (!status.includes(' 200 ') || (await tunnel.identity())?.cluster !== istioClusterName.kubeApiserver(shoot)) throw new Error(`${label}: ${status}`);
      return tunnel;
    }),
  );
}

function timedPlacement(gateway: LiveGateway, filters: readonly unknown[]): { placement: PlacementResult; ms: number } {
  const start = performance.now();
  const placement = approximateIstioPlacement(gateway.baseGateway, filters);
  return { placement, ms: performance.now() - start };
}

/** ms from writing the changed ECDS resources until Envoy reloaded all of them. */
async function timedEcdsChange(envoy: EnvoyInstance, files: EcdsFiles, before: readonly JsonObject[], after: readonly JsonObject[]): Promise<number> {
  const old = new Map(before.map((r) => [getString(r, 'name'), JSON.stringify(r)]));
  const changed = after.filter((r) => old.get(getString(r, 'name')) !== JSON.stringify(r));
  const reloads = await patiently(() => ecdsReloads(envoy));
  const start = performance.now();
  await files.write(changed);
  // Envoy parses on its main thread, which also answers the admin API: a slow answer is no answer yet.
  while ((await ecdsReloads(envoy).catch(() => -1)) < reloads + changed.length) {
    if (performance.now() - start > LDS_DEADLINE_MS) throw new Error('Envoy did not reload the changed ECDS resources');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - start;
}

async function measureConfiguration(shape: Shape, aclShoots: number): Promise<ConfigurationResult> {
  const shoots = benchShoots(aclShoots);
  const { envoyFilters, ecdsResources } = filtersOf(shape, shoots);
  const files = shape === 'ecds' || shape === 'ecds-none' ? await EcdsFiles.create() : undefined;
  const gatewayShoots = [TARGET, OPEN, ...(aclShoots > 1 ? [OTHER_ACL] : [])].map((id) => ({ technicalID: id, sniChains: [[`api.${id}.example.com`]] }));
  // Start without filters and hand them over through LDS, so Envoy's load time is measured apart
  // from the harness's placement (which is not Istio and not what a seed would spend).
  const gateway = await startLiveGateway({ era: 'v1.139-v1.149', shoots: gatewayShoots, listenersViaFile: true });
  try {
    const initial = timedPlacement(gateway, envoyFilters);
    const loadMs = await timedListenerLoad(gateway.envoy, initial.placement, files && { files, resources: ecdsResources });
    const rows = new Map<RequestKind, Latencies>([
      ['ACL shoot', await measureRow(gateway, TARGET)],
      ['shoot without ACL', await measureRow(gateway, OPEN)],
    ]);
    const memory = await patiently(() => envoyMemory(gateway.envoy));
    const held = aclShoots > 0 ? await holdOtherTunnels(gateway, aclShoots) : [];
    const changed = filtersOf(shape, changedShoots(shoots));
    // ECDS: the listeners stay as they are (their part does not depend on the shoots); only changed resources are sent.
    const changeMs = files
      ? await timedEcdsChange(gateway.envoy, files, ecdsResources, changed.ecdsResources)
      : await timedListenerLoad(gateway.envoy, timedPlacement(gateway, changed.envoyFilters).placement);
    await new Promise((resolve) => setTimeout(resolve, held.length > 0 ? PAST_DRAIN_MS : 0));
    const othersClosed = (await Promise.all(held.map(async (t) => !(await t.echoes())))).filter(Boolean).length;
    for (const t of held) t.destroy();
    return {
      shape,
      aclShoots,
      envoyFilters: envoyFilters.length,
      rbacFilters: rbacFiltersPerRequest(initial.placement),
      placementMs: initial.ms,
      loadMs,
      changeMs,
      othersHeld: held.length,
      othersClosed,
      memory,
      rows,
    };
  } catch (error) {
    process.stderr.write(`Envoy's output:\n${gateway.envoy.output().slice(-4_000)}\n`);
    throw error;
  } finally {
    await gateway.stop();
    await files?.remove();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (value: number): string => value.toFixed(2).padStart(7);
const ratio = (reference: number, ours: number): string => `${(reference / ours).toFixed(2)}x`.padStart(7);

function latencyTable(results: readonly ConfigurationResult[]): string[] {
  const lines = [`shoots  request             shape      |     p50     p99    mean | p50 / 0-shoot p50 of the shape`];
  for (const size of SIZES) {
    for (const shape of SHAPES) {
      const row = results.find((r) => r.shape === shape && r.aclShoots === size);
      const baseline = results.find((r) => r.shape === shape && r.aclShoots === 0);
      if (row === undefined) continue;
      for (const [kind, l] of row.rows) {
        const base = baseline?.rows.get(kind);
        lines.push(
          `${String(size).padStart(6)}  ${kind.padEnd(19)} ${shape.padEnd(9)}  | ${ms(l.p50)} ${ms(l.p99)} ${ms(l.mean)} | ${base === undefined ? '      -' : ratio(l.p50, base.p50)}` +
            (l.count < REQUESTS ? `  (only ${l.count} samples: time budget)` : ''),
        );
      }
    }
  }
  return lines;
}

function configurationTable(results: readonly ConfigurationResult[]): string[] {
  const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)}`.padStart(9);
  const seconds = (milliseconds: number): string => (milliseconds / 1000).toFixed(2).padStart(8);
  const lines = [`shoots  shape      EnvoyFilters  filters/request      allocated MiB  heap MiB  load (s)  ACL change (s)  other shoots' tunnels closed  harness placement (s)`];
  for (const r of results) {
    lines.push(
      `${String(r.aclShoots).padStart(6)}  ${r.shape.padEnd(9)}  ${String(r.envoyFilters).padStart(12)}  ${String(r.rbacFilters).padStart(20)}  ` +
        `${mib(r.memory.allocated)}    ${mib(r.memory.heap)} ${seconds(r.loadMs)}  ${seconds(r.changeMs)}  ${(r.othersHeld > 0 ? `${r.othersClosed} of ${r.othersHeld}` : '-').padStart(28)}        ${seconds(r.placementMs)}`,
    );
  }
  return lines;
}

const results: ConfigurationResult[] = [];
const benchStart = performance.now();
for (const size of SIZES) {
  for (const shape of SHAPES) {
    process.stderr.write(`measuring ${shape} with ${size} ACL shoots...\n`);
    results.push(await measureConfiguration(shape, size));
  }
}

console.log(
  `Envoy ${ENVOY_VERSION}: HTTP CONNECT setup on ${PORT} (X-Gardener-Destination), admitted client ${ADMITTED_CLIENT} via PROXY v2;` +
    ` ${REQUESTS} sequential requests after ${WARMUP} warm-up, ms from sending CONNECT to reading the echo identity through the tunnel.`,
);
console.log(`Each ACL shoot: ALLOW, ${CIDRS_PER_SHOOT} CIDRs (2 IPv6), 4 always-allowed ranges. Shoot 0 of N is the ACL shoot hit.\n`);
for (const line of latencyTable(results)) console.log(line);
console.log('\nConfiguration cost. load: the filters handed to a running Envoy through file-based LDS, from writing the file');
console.log('until Envoy accepted and warmed the listeners (20-50 ms polling); ACL change: the same for one added CIDR of the');
console.log('target shoot (no change with 0 shoots); other shoots\' tunnels closed: tunnels to the shoot without ACL and to');
console.log(`${OTHER_ACL}, open across that change, that no longer carry data ${PAST_DRAIN_MS / 1000} s after it (drain time 1 s);`);
console.log("memory: Envoy /memory after the requests; harness placement: the test approximation of Istio's patching, not a seed's cost.\n");
for (const line of configurationTable(results)) console.log(line);
console.log(`\nbench took ${((performance.now() - benchStart) / 1000).toFixed(0)} s`);
