// What `tunnelRevocation: hop` costs a gateway Envoy: the same seed's VPN clusters without and
// with the hops (README "Revocation"), at several numbers of ACL shoots, in one run: Envoy's
// allocated memory and the time to load the config. Each shoot has the three VPN clusters a
// gateway may hold (vpn-seed-server, -0, -1); the hops are the product's patches
// (tunnelHopPatches), applied as Istio applies them: Gardener's cluster renamed, the door and the
// internal listener added. Only loopback addresses are used; nothing is sent.
//
// usage: npx tsx bench/tunnel-hop.ts [sizes=0,1000,5000] [stats=istio|all]
// (istio: the stats an Istio gateway keeps, its bootstrap's stats matcher; all: Envoy's full stats)
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { SEED_ENVOY_VERSION } from '../test/envoy/envoy-binary.js';
import { startEnvoy, type EnvoyInstance } from '../test/envoy/envoy-process.js';
import { INTERNAL_LISTENER_EXTENSION, staticCluster } from '../test/envoy/gardener-gateway.js';
import type { JsonObject } from '../test/envoy/json.js';
import { HOP_SERVICES, routedClusterName, tunnelHopPatches } from '../src/rbac/tunnel-hop.js';

const SIZES = (process.argv[2] ?? '0,1000,5000').split(',').map(Number);
const UPSTREAM_PORT = 9; // never connected to

function seed(shoots: number, hops: boolean): { clusters: JsonObject[]; listeners: JsonObject[] } {
  const clusters: JsonObject[] = [];
  const listeners: JsonObject[] = [];
  for (let i = 0; i < shoots; i++) {
    const id = `shoot--p${i % 97}--s${i}`;
    const gardener = new Map(HOP_SERVICES.map((service) => [routedClusterName(service, id), staticCluster(routedClusterName(service, id), UPSTREAM_PORT)]));
    if (hops) {
      for (const patch of tunnelHopPatches(id, 1)) {
        const value = patch.patch.value as JsonObject;
        if (patch.applyTo === 'LISTENER') listeners.push(value);
        else if (patch.patch.operation === 'ADD') clusters.push(value);
        else if (patch.match.cluster !== undefined) {
          const renamed = gardener.get(patch.match.cluster.name);
          if (renamed !== undefined) clusters.push({ ...renamed, name: value['name'] as string });
        }
      }
    } else {
      clusters.push(...gardener.values());
    }
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

async function measure(shoots: number, hops: boolean): Promise<{ mib: number; loadS: number }> {
  const { clusters, listeners } = seed(shoots, hops);
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

console.log('ACL shoots | Envoy allocated without / with hops | start with config (s) without / with | listeners + clusters added');
for (const shoots of SIZES) {
  const without = await measure(shoots, false);
  const withHops = await measure(shoots, true);
  console.log(
    `${String(shoots).padStart(10)} | ${without.mib.toFixed(1).padStart(7)} / ${withHops.mib.toFixed(1).padStart(7)} MiB (${(withHops.mib / without.mib).toFixed(2)}x, +${((withHops.mib - without.mib) * 1024 / Math.max(1, shoots)).toFixed(1)} KiB per shoot)` +
      ` | ${without.loadS.toFixed(2)} / ${withHops.loadS.toFixed(2)} | ${shoots * HOP_SERVICES.length} + ${shoots * HOP_SERVICES.length}`,
  );
}
