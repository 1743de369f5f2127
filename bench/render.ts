// Renders a seed of N ACL shoots x M CIDRs through the whole offline pipeline (objects ->
// model -> EnvoyFilters) twice and prints time, peak memory, object sizes and whether the two
// outputs are byte-identical; side by side, each in its own process (peak RSS is per process):
// the whole-seed render that holds every object (renderSeed, what `render` did until issue 13) and
// the streaming render `render` uses now, both with the same V8 limits (256 MiB old space, a small
// young generation), so the figures show what each render needs rather than how lazily V8 collects.
// usage: npx tsx bench/render.ts [shoots=5000] [cidrs=50]
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { SourcedObject } from '../src/gardener/inventory.js';
import { renderSeed, renderSeedStream } from '../src/render/seed-render.js';

const SHOOTS = Number(process.argv[2] ?? 5000);
const CIDRS = Number(process.argv[3] ?? 50);
/** Set in the child processes: which render to measure. */
const MODE = process.argv[4] as 'whole' | 'stream' | undefined;
const HEAP_MIB = 256;
// A small young generation: the render makes much short-lived garbage (one object at a time).
const SEMI_SPACE_MIB = 4;
const K8S_LIMIT = 512 * 1024;
const GATEWAYS = ['istio-ingress', 'istio-ingress--z1', 'istio-ingress--z2'];

function seedObjects(): SourcedObject[] {
  const objects: unknown[] = GATEWAYS.map((ns, i) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'istio-ingressgateway', namespace: ns },
    spec: { selector: { matchLabels: { app: 'istio-ingressgateway', istio: i === 0 ? 'ingressgateway' : `ingressgateway--zone--z${i}` } } },
  }));
  for (let i = 0; i < SHOOTS; i++) {
    const id = `shoot--project${i % 300}--shoot${i}`;
    const cidrs = Array.from({ length: CIDRS }, (_, j) => (j % 5 === 4 ? `2001:db8:${i % 65536}:${j}::/64` : `${11 + (j % 200)}.${i % 256}.${(i >> 8) % 256}.0/24`));
    const gatewayIndex = i % GATEWAYS.length;
    objects.push(
      {
        apiVersion: 'extensions.gardener.cloud/v1alpha1',
        kind: 'Cluster',
        metadata: { name: id },
        spec: {
          seed: { spec: { networks: { nodes: '10.250.0.0/16', pods: '10.96.0.0/11' } } },
          shoot: { metadata: { name: `shoot${i}` }, spec: { networking: { nodes: '10.180.0.0/16' }, provider: { workers: [{ name: 'w' }] } }, status: { technicalID: id } },
        },
      },
      { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', metadata: { name: 'acl', namespace: id }, spec: { type: 'acl', providerConfig: { rule: { action: i % 7 ? 'ALLOW' : 'DENY', type: 'remote_ip', cidrs } } } },
      { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure', metadata: { name: `shoot${i}`, namespace: id }, status: { egressCIDRs: [`198.51.${i % 256}.1/32`] } },
      {
        apiVersion: 'networking.istio.io/v1beta1',
        kind: 'Gateway',
        metadata: { name: 'kube-apiserver', namespace: id },
        spec: {
          selector: { app: 'istio-ingressgateway', istio: gatewayIndex === 0 ? 'ingressgateway' : `ingressgateway--zone--z${gatewayIndex}` },
          servers: [{ hosts: [`api.${id}.internal.example.com`, `api.${id}.example.com`], port: { number: 443, name: 'tls', protocol: 'TLS' }, tls: { mode: 'PASSTHROUGH' } }],
        },
      },
    );
  }
  return objects.map((object, i) => ({ object, source: `generated #${i}` }));
}

const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

interface Pass {
  readonly ms: number;
  readonly digest: string;
  readonly objects: number;
  readonly combined: number;
  readonly bytes: number;
  readonly largest: { readonly name: string; readonly bytes: number };
}

/** Serializes, hashes and counts the documents of one render. */
function measure(started: number, documents: Iterable<unknown>): Pass {
  const hash = createHash('sha256');
  let count = 0;
  let combined = 0;
  let bytes = 0;
  let largest = { name: '', bytes: 0 };
  for (const document of documents) {
    const text = JSON.stringify(document);
    hash.update(text);
    count++;
    bytes += text.length;
    const { name, namespace } = (document as { metadata: { name: string; namespace: string } }).metadata;
    if (name.startsWith('acl-connect-')) combined++;
    if (text.length > largest.bytes) largest = { name: `${namespace}/${name}`, bytes: text.length };
  }
  return { ms: performance.now() - started, digest: hash.digest('hex'), objects: count, combined, bytes, largest };
}

/** The input is built here and let go once the model is made, as `render` lets go of the files it read. */
function startRender(mode: 'whole' | 'stream'): Iterable<unknown> {
  const objects = seedObjects();
  if (mode === 'whole') {
    const result = renderSeed(objects);
    if (result.problems.some((p) => p.severity === 'error')) throw new Error('bench input invalid');
    return [...result.envoyFilters, ...result.patches];
  }
  const result = renderSeedStream(objects);
  if (result.problems.some((p) => p.severity === 'error')) throw new Error('bench input invalid');
  return result.documents();
}

function renderOnce(mode: 'whole' | 'stream'): Pass {
  const started = performance.now();
  return measure(started, startRender(mode));
}

interface ChildResult {
  readonly first: Pass;
  readonly second: Pass;
  readonly peakRss: number;
  readonly rssWithInput: number;
}

if (MODE) {
  const rssWithInput = (() => {
    const objects = seedObjects();
    return objects.length > 0 ? process.memoryUsage().rss : 0;
  })();
  const first = renderOnce(MODE);
  const second = renderOnce(MODE);
  const result: ChildResult = { first, second, peakRss: process.resourceUsage().maxRSS * 1024, rssWithInput };
  console.log(JSON.stringify(result));
} else {
  const child = (mode: 'whole' | 'stream', nodeFlags: string[]): ChildResult => {
    const run = spawnSync(process.execPath, [...nodeFlags, '--import', 'tsx', fileURLToPath(import.meta.url), String(SHOOTS), String(CIDRS), mode], { encoding: 'utf8', maxBuffer: 1 << 20 });
    if (run.status !== 0) throw new Error(`${mode} render failed: ${run.stderr}`);
    return JSON.parse(run.stdout.trim().split('\n').pop() ?? '') as ChildResult;
  };
  // The same V8 limits for both: what each render needs, not how lazily V8 collects.
  const flags = [`--max-old-space-size=${HEAP_MIB}`, `--max-semi-space-size=${SEMI_SPACE_MIB}`];
  const whole = child('whole', flags);
  const stream = child('stream', flags);
  const { first } = stream;
  const identical = [whole.first, whole.second, stream.second].every((p) => p.digest === first.digest && p.bytes === first.bytes);
  console.log(`gardener-acl render benchmark: ${SHOOTS} shoots x ${CIDRS} CIDRs, ${GATEWAYS.length} gateways, two renders per process`);
  console.log(`  objects                ${first.objects} (${first.combined} combined CONNECT shards, ${first.combined / GATEWAYS.length} per gateway)`);
  console.log(`  total size             ${mib(first.bytes)}`);
  console.log(`  largest object         ${(first.largest.bytes / 1024).toFixed(1)} KiB (${first.largest.name}); ratio to the 512 KiB limit: ${(first.largest.bytes / K8S_LIMIT).toFixed(2)}`);
  console.log(`  byte-identical         ${identical} (all four renders, sha256 ${first.digest.slice(0, 16)}...)`);
  console.log(`  V8 limits (both)       ${flags.join(' ')}`);
  console.log(`  whole-seed render      ${whole.first.ms.toFixed(0)} / ${whole.second.ms.toFixed(0)} ms, peak RSS ${mib(whole.peakRss)} (RSS with the input objects alone: ${mib(whole.rssWithInput)})`);
  console.log(`  streaming render       ${first.ms.toFixed(0)} / ${stream.second.ms.toFixed(0)} ms, peak RSS ${mib(stream.peakRss)} (RSS with the input objects alone: ${mib(stream.rssWithInput)})`);
  console.log(`  peak RSS ratio         ${(whole.peakRss / stream.peakRss).toFixed(1)}x less`);
  if (first.largest.bytes >= K8S_LIMIT || !identical) process.exitCode = 1;
}
