// The EnvoyFilter webhook's index after one acl Extension changes, at N shoots x M CIDRs, side by
// side in one run: the rebuild the webhook did until issue 13 (every shoot's recorded ACL parsed
// again and every combined filter of the seed built, inside the next admission request) and the
// incremental index (only the changed Extension read again; no seed-wide filter at all).
// usage: npx tsx bench/webhook-index.ts [shoots=2000] [cidrs=50] [changes=20]
import { performance } from 'node:perf_hooks';
import { defaultOperatorConfig } from '../src/config/operator-config.js';
import { appliedAcls } from '../src/actuator/combined-syncer.js';
import { extensionSchema, type Extension } from '../src/gardener/objects.js';
import { planCombinedConnectFilters } from '../src/rbac/combined-connect-filters.js';
import { AclIndex } from '../src/webhook/acl-index.js';

const SHOOTS = Number(process.argv[2] ?? 2000);
const CIDRS = Number(process.argv[3] ?? 50);
const CHANGES = Number(process.argv[4] ?? 20);
const operator = defaultOperatorConfig();
const gateways = ['istio-ingress', 'istio-ingress--z1', 'istio-ingress--z2'].map((namespace, i) => ({ namespace, selector: { app: 'istio-ingressgateway', istio: `ingressgateway${i}` } }));

const id = (i: number) => `shoot--p${i % 50}--s${i}`;
const extension = (i: number, generation: number): Extension =>
  extensionSchema.parse({
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: 'acl', namespace: id(i), generation },
    spec: { type: 'acl' },
    status: {
      state: {
        gatewayNamespaces: ['istio-ingress'],
        applied: {
          rule: { action: 'ALLOW', type: 'remote_ip', cidrs: Array.from({ length: CIDRS }, (_, j) => `${11 + (j % 200)}.${i % 256}.${(i >> 8) % 256}.${generation % 256}/32`) },
          alwaysAllowed: ['10.250.0.0/16', '100.64.0.0/10'],
          legacyProxyAllowed: ['100.96.0.0/11'],
        },
      },
    },
  });

const extensions = Array.from({ length: SHOOTS }, (_, i) => extension(i, 1));
let revision = 0;
const index = new AclIndex({ extensions: () => extensions, revision: () => revision, synced: () => true });
index.legacyAcl(id(0));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const before: number[] = [];
const now: number[] = [];
const heapBefore: number[] = [];
for (let n = 0; n < CHANGES; n++) {
  const changed = (n * 7919) % SHOOTS;
  extensions[changed] = extension(changed, n + 2);
  revision++;
  global.gc?.();
  const h0 = process.memoryUsage().heapUsed;
  let t = performance.now();
  const { filters } = planCombinedConnectFilters({ operator, gateways, shoots: appliedAcls(extensions) });
  before.push(performance.now() - t);
  heapBefore.push(process.memoryUsage().heapUsed - h0);
  if (filters.length === 0) throw new Error('no filters');
  t = performance.now();
  const acl = index.legacyAcl(id(changed));
  now.push(performance.now() - t);
  if (typeof acl !== 'object' || acl.rule.cidrs.length !== CIDRS) throw new Error('index did not follow the change');
}
const b = median(before);
const a = median(now);
console.log(`webhook index after one Extension change, ${SHOOTS} shoots x ${CIDRS} CIDRs, median of ${CHANGES} changes`);
console.log(`  full rebuild (until issue 13): ${b.toFixed(1)} ms, heap grown by ~${(median(heapBefore) / 1024 / 1024).toFixed(0)} MiB during the rebuild`);
console.log(`  incremental index (now):      ${a.toFixed(2)} ms`);
console.log(`  ratio: ${(b / a).toFixed(0)}x faster`);
