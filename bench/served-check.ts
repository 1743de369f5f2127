// What one pass of the served check costs per gateway pod (issue 30 point 3, issue 31): a real
// Envoy fed by Istio's own discovery server (istio-render serve) serves the default gateway of a
// Gardener 1.145 seed of N ACL shoots with the chart's defaults (combinedForm ecds, 48 buckets);
// the controller's reads (SERVED_CHECK_READS: listeners, route configurations, ECDS names) are
// made against its admin port, and what the controller then does with them is timed in this
// process: JSON.parse, servedGateway, checkServedProtection for every shoot. Side by side in the
// same run: the same for Envoy's whole /config_dump (what `verify --admin-url` reads).
// Bytes and Envoy's time per read; the controller's CPU time and the heap it holds at the peak
// of the pass (process heap after a forced GC before, and the largest heapUsed sampled during
// the pass), against the chart's V8 heap limit (controller.heap.maxOldSpaceMiB).
// The port-forward (API server and kubelet relay the bytes) is not part of it.
//
// Prints measurements only. usage: node --expose-gc --import tsx bench/served-check.ts [sizes=200,1000]
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { seedModelFromObjects } from '../src/render/seed-render.js';
import { SERVED_CHECK_READS } from '../src/served/gateway-admin.js';
import { servedGateway } from '../src/served/served-config.js';
import { checkServedProtection } from '../src/served/served-protection.js';
import { ERAS } from '../test/istio/eras.js';
import { generateForSeed, istioInputObjects } from '../test/istio/istio-rendered-seed.js';
import { startLiveAdsGateway } from '../test/istio/live-ads-gateway.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway } from '../test/istio/seed-fixture.js';
import { gatewaySeedShoots } from './gateway-seed-shoots.js';

const SIZES = (process.argv[2] ?? '200,1000').split(',').map(Number);
const era = ERAS['v1.145'];
const gateway = ingressGateway('default');
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc --import tsx bench/served-check.ts');
const heapLimitMiB = (parseYaml(readFileSync(new URL('../charts/gardener-acl/values.yaml', import.meta.url), 'utf8')) as { controller: { heap: { maxOldSpaceMiB: number } } }).controller.heap.maxOldSpaceMiB;
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

async function fetchText(url: string): Promise<{ text: string; ms: number }> {
  const started = performance.now();
  const response = await fetch(url, { signal: AbortSignal.timeout(600_000) });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  return { text, ms: performance.now() - started };
}

for (const size of SIZES) {
  const objects = gardenerSeedObjects(era, gatewaySeedShoots(size));
  const model = seedModelFromObjects(objects.map((object, i) => ({ object, source: `#${i}` })));
  if (!model.seed) throw new Error('no seed model');
  const started = performance.now();
  const live = await startLiveAdsGateway({ objects: istioInputObjects(objects, generateForSeed(objects)), proxy: { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) } });
  console.log(`\n${size} ACL shoots: gateway up in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  try {
    for (const [label, paths] of [
      ['controller reads', [...SERVED_CHECK_READS]],
      ['whole /config_dump', ['/config_dump']],
    ] as const) {
      gc();
      const before = process.memoryUsage().heapUsed;
      let peak = before;
      const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
      let bytes = 0;
      let envoyMs = 0;
      const cpuBefore = process.cpuUsage();
      const configs: unknown[] = [];
      for (const path of paths) {
        const { text, ms } = await fetchText(`${live.envoy.adminUrl}${path}`);
        bytes += Buffer.byteLength(text);
        envoyMs += ms;
        configs.push(...((JSON.parse(text) as { configs?: unknown[] }).configs ?? []));
        peak = Math.max(peak, process.memoryUsage().heapUsed);
      }
      const served = servedGateway({ configs });
      peak = Math.max(peak, process.memoryUsage().heapUsed);
      const report = checkServedProtection(model.seed, gateway.namespace, served);
      peak = Math.max(peak, process.memoryUsage().heapUsed);
      clearInterval(sample);
      const cpu = process.cpuUsage(cpuBefore);
      const faults = report.findings.filter((f) => f.severity !== 'absent').length;
      console.log(
        `  ${label.padEnd(20)} ${mib(bytes).padStart(7)} MiB in ${envoyMs.toFixed(0).padStart(6)} ms (Envoy + transfer); ` +
          `this process ${((cpu.user + cpu.system) / 1000).toFixed(0).padStart(6)} ms CPU, heap peak +${mib(peak - before)} MiB ` +
          `(${(((peak - before) / 2 ** 20 / heapLimitMiB) * 100).toFixed(0)} % of the chart's ${heapLimitMiB} MiB); ${report.shoots} shoots judged, ${faults} faults`,
      );
    }
  } finally {
    await live.stop();
  }
}
