// Renders a seed of N ACL shoots x M CIDRs through the whole offline pipeline (objects ->
// model -> EnvoyFilters) and prints time, peak memory and object sizes.
// usage: npx tsx bench/render.ts [shoots=5000] [cidrs=50]
import { performance } from 'node:perf_hooks';
import type { SourcedObject } from '../src/gardener/inventory.js';
import { renderSeed } from '../src/render/seed-render.js';

const SHOOTS = Number(process.argv[2] ?? 5000);
const CIDRS = Number(process.argv[3] ?? 50);
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

const objects = seedObjects();
const rssBefore = process.memoryUsage().rss;
const t0 = performance.now();
const first = renderSeed(objects);
const t1 = performance.now();
const second = renderSeed(objects);
const t2 = performance.now();

const errors = first.problems.filter((p) => p.severity === 'error');
if (errors.length > 0) throw new Error(`bench input invalid: ${errors[0]?.message}`);
const sizes = first.envoyFilters.map((f) => ({ name: `${f.metadata.namespace}/${f.metadata.name}`, bytes: JSON.stringify(f).length }));
const largest = sizes.reduce((a, b) => (b.bytes > a.bytes ? b : a));
const combined = first.envoyFilters.filter((f) => f.metadata.name.startsWith('acl-connect-'));
const identical = JSON.stringify(first.envoyFilters) === JSON.stringify(second.envoyFilters);

console.log(`gardener-acl render benchmark: ${SHOOTS} shoots x ${CIDRS} CIDRs, ${GATEWAYS.length} gateways`);
console.log(`  first render           ${(t1 - t0).toFixed(0)} ms`);
console.log(`  second render (same)   ${(t2 - t1).toFixed(0)} ms   byte-identical: ${identical}`);
console.log(`  objects                ${first.envoyFilters.length} (${combined.length} combined CONNECT shards, ${combined.length / GATEWAYS.length} per gateway)`);
console.log(`  total size             ${mib(sizes.reduce((s, x) => s + x.bytes, 0))}`);
console.log(`  largest object         ${(largest.bytes / 1024).toFixed(1)} KiB (${largest.name}); ratio to the 512 KiB limit: ${(largest.bytes / K8S_LIMIT).toFixed(2)}`);
console.log(`  peak RSS               ${mib(process.resourceUsage().maxRSS * 1024)} (RSS before rendering ${mib(rssBefore)})`);
if (largest.bytes >= K8S_LIMIT || !identical) process.exitCode = 1;
