// What tunnel revocation (`tunnelRevocation: hop`, the shared hop) costs a gateway Envoy: the
// same seed's VPN clusters without and with the shared hop's doors and shard listeners
// (docs/operators/revocation.md), at several numbers of ACL shoots, in one run: Envoy's allocated memory and the
// time to load the config. Each shoot has the three VPN clusters a gateway may hold
// (vpn-seed-server, -0, -1) and nothing else of Gardener's (a real gateway also holds each shoot's
// kube-apiserver cluster and SNI chains), so the ratio is an upper bound. The hop's objects are the
// product's (sharedHopObjects); its entry filters sit on the CONNECT listeners, which this seed
// does not have. Only loopback addresses are used; nothing is sent.
//
// usage: npx tsx bench/tunnel-hop.ts [sizes=0,1000,5000] [stats=istio|all]
// (istio: the stats an Istio gateway keeps, its bootstrap's stats matcher; all: Envoy's full stats)
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { SEED_ENVOY_VERSION } from '../test/envoy/envoy-binary.js';
import { startEnvoy, type EnvoyInstance } from '../test/envoy/envoy-process.js';
import { INTERNAL_LISTENER_EXTENSION, staticCluster } from '../test/envoy/gardener-gateway.js';
import type { JsonObject } from '../test/envoy/json.js';
import { VPN_SERVICES, sharedHopObjects, vpnClusterName } from '../src/rbac/shared-tunnel-hop.js';

const SIZES = (process.argv[2] ?? '0,1000,5000').split(',').map(Number);
const UPSTREAM_PORT = 9; // never connected to

const shootID = (i: number): string => `shoot--p${i % 97}--s${i}`;

/** The shared hop's doors and listeners for `shoots` ACL shoots, as Istio adds them. */
function sharedHop(shoots: number): { clusters: JsonObject[]; listeners: JsonObject[] } {
  const ids = Array.from({ length: shoots }, (_, i) => ({ technicalID: shootID(i) }));
  const objects = sharedHopObjects({ namespace: 'istio-ingress', selector: { app: 'istio-ingressgateway' } }, { protectedPorts: [8132, 8443], protectedHeaders: ['Reversed-VPN', 'X-Gardener-Destination'], maxObjectBytes: 524_288 }, ids);
  const patches = objects.flatMap((o) => o.spec.configPatches) as { applyTo: string; patch: { value: JsonObject } }[];
  return { clusters: patches.filter((p) => p.applyTo === 'CLUSTER').map((p) => p.patch.value), listeners: patches.filter((p) => p.applyTo === 'LISTENER').map((p) => p.patch.value) };
}

function seed(shoots: number, hop: boolean): { clusters: JsonObject[]; listeners: JsonObject[] } {
  const { clusters, listeners } = hop ? sharedHop(shoots) : { clusters: [], listeners: [] };
  for (let i = 0; i < shoots; i++) {
    for (const service of VPN_SERVICES) clusters.push(staticCluster(vpnClusterName(service, shootID(i)), UPSTREAM_PORT));
  }
  return { clusters, listeners };
}

/**
 * The stats a gateway Envoy keeps: Istio's bootstrap (pkg/bootstrap/config.go, the required
 * inclusion prefixes, suffixes and regex, and envoy_bootstrap.json's fixed patterns). Without it
 * every cluster and listener would carry Envoy's full stats, which an Istio gateway does not.
 */
const ISTIO_STATS_MATCHER = {
  inclusion_list: {
    patterns: [
      ...['reporter=', 'cluster_manager', 'listener_manager', 'server', 'cluster.xds-grpc', 'wasm', 'component', 'istio'].map((prefix) => ({ prefix })),
      ...['rbac.allowed', 'rbac.denied', 'shadow_allowed', 'shadow_denied', 'downstream_cx_active'].map((suffix) => ({ suffix })),
      { safe_regex: { regex: String.raw`vhost\..*\.route\..*` } },
    ],
  },
};

const STATS: JsonObject = (process.argv[3] ?? 'istio') === 'all' ? {} : { stats_config: { stats_matcher: ISTIO_STATS_MATCHER } };

const memorySchema = z.object({ allocated: z.string() });
async function allocated(envoy: EnvoyInstance): Promise<number> {
  const response = await fetch(`${envoy.adminUrl}/memory`, { signal: AbortSignal.timeout(30_000) });
  return Number(memorySchema.parse(await response.json()).allocated);
}

async function measure(shoots: number, hop: boolean): Promise<{ mib: number; loadS: number }> {
  const { clusters, listeners } = seed(shoots, hop);
  const start = performance.now();
  const envoy = await startEnvoy({
    envoyVersion: SEED_ENVOY_VERSION,
    bootstrap: { static_resources: { clusters, listeners }, bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION], ...STATS },
    startTimeoutMs: 600_000,
    // Internal listeners bind no port, which is what the harness waits for: wait for Envoy's counts instead.
    awaitLive: false,
  });
  try {
    for (;;) {
      if (performance.now() - start > 600_000) throw new Error(`Envoy did not load ${listeners.length} listeners and ${clusters.length} clusters`);
      // The admin API answers late (or times out) while Envoy's main thread is still loading.
      const counts = await Promise.all(['listener_manager.total_listeners_active', 'server.state', 'cluster_manager.active_clusters'].map((name) => envoy.stat(name))).catch(() => undefined);
      if (counts?.[0] === listeners.length && counts[1] === 0 && counts[2] === clusters.length) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const loadS = (performance.now() - start) / 1000;
    for (;;) {
      const bytes = await allocated(envoy).catch(() => undefined);
      if (bytes !== undefined) return { mib: bytes / 2 ** 20, loadS };
    }
  } finally {
    await envoy.stop();
  }
}

console.log('ACL shoots | Envoy allocated without / with the shared hop | start with config (s) without / with');
for (const shoots of SIZES) {
  const without = await measure(shoots, false);
  const withHop = await measure(shoots, true);
  console.log(
    `${String(shoots).padStart(10)} | ${without.mib.toFixed(1).padStart(7)} / ${withHop.mib.toFixed(1).padStart(7)} MiB (${(withHop.mib / without.mib).toFixed(2)}x, +${(((withHop.mib - without.mib) * 1024) / Math.max(1, shoots)).toFixed(1)} KiB per shoot)` +
      ` | ${without.loadS.toFixed(2)} / ${withHop.loadS.toFixed(2)}`,
  );
}
