// Renders a seed of N ACL shoots x M CIDRs through the whole offline pipeline (objects ->
// model -> EnvoyFilters) and prints time, peak memory, object sizes and whether the outputs are
// byte-identical; each render in its own process (peak RSS is per process), twice:
// - the whole-seed render that holds every object (renderSeed, what `render` did until issue 13);
// - the streaming render `render` uses now, each object serialized to JSON and hashed;
// - the streaming render written as YAML by the writer `render` uses (src/render/document-writer.ts)
//   to a file, as `render > file` does.
// All with the same V8 limits (256 MiB old space, a small young generation), so the figures show
// what each render needs rather than how lazily V8 collects. Every render lets go of its input
// objects once the model is made, as `render` lets go of the files it read: the whole-seed render is
// there to show the cost of holding every output object, and holding the input through it as well
// took its live heap to within a few tens of MiB of the 256 MiB, where issue 34 item 9 saw it die.
// For `render` as a command on a seed directory see bench/render-command.ts.
// usage: npx tsx bench/render.ts [shoots=5000] [cidrs=50]
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { writeDocuments, type Written } from '../src/render/document-writer.js';
import { renderSeedModel, renderSeedStream, seedModelFromObjects, type SeedModel, type SeedRenderStream } from '../src/render/seed-render.js';
import { GENERATED_GATEWAYS, generatedSeedObjects } from '../test/support/generated-seed.js';

const SHOOTS = Number(process.argv[2] ?? 5000);
const CIDRS = Number(process.argv[3] ?? 50);
type Mode = 'whole' | 'stream' | 'yaml';
/** Set in the child processes: which render to measure. */
const MODE = process.argv[4] as Mode | undefined;
const HEAP_MIB = 256;
// A small young generation: the render makes much short-lived garbage (one object at a time).
const SEMI_SPACE_MIB = 4;
const K8S_LIMIT = 512 * 1024;

const seedObjects = () => generatedSeedObjects(SHOOTS, CIDRS);

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

// In functions of their own, so that no frame of the caller (a suspended async one included) still
// holds the input objects once the model is made.
function modelOfSeed(): SeedModel {
  return seedModelFromObjects(seedObjects());
}

function streamOfSeed(): SeedRenderStream {
  const result = renderSeedStream(seedObjects());
  if (result.problems.some((p) => p.severity === 'error')) throw new Error('bench input invalid');
  return result;
}

function startRender(mode: 'whole' | 'stream'): Iterable<unknown> {
  if (mode === 'whole') {
    const result = renderSeedModel(modelOfSeed());
    if (result.problems.some((p) => p.severity === 'error')) throw new Error('bench input invalid');
    return [...result.envoyFilters, ...result.patches];
  }
  return streamOfSeed().documents();
}

async function renderOnce(mode: Mode): Promise<Pass> {
  const started = performance.now();
  if (mode !== 'yaml') return measure(started, startRender(mode));
  const written = await writeYaml();
  return { ...measure(started, []), ms: performance.now() - started, objects: written.documents, bytes: written.bytes };
}

/** The streaming render as `render -o yaml > file` writes it: through the command's writer, synchronously to a file. */
async function writeYaml(): Promise<Written> {
  const result = streamOfSeed();
  const dir = mkdtempSync(path.join(tmpdir(), 'acl-render-bench-'));
  const fd = openSync(path.join(dir, 'render.yaml'), 'w');
  try {
    return await writeDocuments(result.documents(), 'yaml', { write: (text) => writeSync(fd, text) });
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true });
  }
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
  const first = await renderOnce(MODE);
  const second = await renderOnce(MODE);
  const result: ChildResult = { first, second, peakRss: process.resourceUsage().maxRSS * 1024, rssWithInput };
  console.log(JSON.stringify(result));
} else {
  const child = (mode: Mode, nodeFlags: string[]): ChildResult => {
    const run = spawnSync(process.execPath, [...nodeFlags, '--import', 'tsx', fileURLToPath(import.meta.url), String(SHOOTS), String(CIDRS), mode], { encoding: 'utf8', maxBuffer: 1 << 20 });
    if (run.status !== 0) throw new Error(`${mode} render failed (exit ${run.status ?? run.signal}): ${run.stderr.slice(-2000)}`);
    return JSON.parse(run.stdout.trim().split('\n').pop() ?? '') as ChildResult;
  };
  // The same V8 limits for all: what each render needs, not how lazily V8 collects.
  const flags = [`--max-old-space-size=${HEAP_MIB}`, `--max-semi-space-size=${SEMI_SPACE_MIB}`];
  const whole = child('whole', flags);
  const stream = child('stream', flags);
  const yaml = child('yaml', flags);
  const { first } = stream;
  const identical = [whole.first, whole.second, stream.second].every((p) => p.digest === first.digest && p.bytes === first.bytes);
  const gateways = GENERATED_GATEWAYS.length;
  const row = (label: string, r: ChildResult, note = `RSS with the input objects alone: ${mib(r.rssWithInput)}`) =>
    console.log(`  ${label.padEnd(22)} ${r.first.ms.toFixed(0)} / ${r.second.ms.toFixed(0)} ms, peak RSS ${mib(r.peakRss)} (${note})`);
  console.log(`gardener-acl render benchmark: ${SHOOTS} shoots x ${CIDRS} CIDRs, ${gateways} gateways, two renders per process`);
  console.log(`  objects                ${first.objects} (${first.combined} combined CONNECT shards, ${first.combined / gateways} per gateway)`);
  console.log(`  total size             ${mib(first.bytes)} as JSON, ${mib(yaml.first.bytes)} as YAML`);
  console.log(`  largest object         ${(first.largest.bytes / 1024).toFixed(1)} KiB (${first.largest.name}); ratio to the 512 KiB limit: ${(first.largest.bytes / K8S_LIMIT).toFixed(2)}`);
  console.log(`  byte-identical         ${identical} (whole-seed and streaming renders, sha256 ${first.digest.slice(0, 16)}...)`);
  console.log(`  V8 limits (all)        ${flags.join(' ')}`);
  row('whole-seed render', whole);
  row('streaming render', stream);
  row('streaming, YAML file', yaml, `${yaml.first.objects} objects through render's writer`);
  console.log(`  peak RSS ratio         ${(whole.peakRss / stream.peakRss).toFixed(1)}x less (whole-seed / streaming)`);
  if (first.largest.bytes >= K8S_LIMIT || !identical || yaml.first.objects !== first.objects) process.exitCode = 1;
}
