// What `tunnelRevocation: hop` (the shared hop, the default) costs Istio: the time its own config
// generation (tools/istio-render, pilot's ConfigGenTest) takes to build the default gateway of a
// Gardener 1.145 seed of N ACL shoots, without (`none`) and with the hop objects, side by side in
// one run. The shared hop adds a fixed 16 CLUSTER ADD and 16 LISTENER ADD patches per gateway,
// whatever N; the per-shoot hop of earlier versions added about 6 CLUSTER patches per ACL shoot,
// each tried on every cluster. Each render is a fresh process: the time includes reading the objects.
//
// usage: npx tsx bench/istio-tunnel-hop.ts [sizes=100,300,1000]
import { performance } from 'node:perf_hooks';
import { ERAS } from '../test/istio/eras.js';
import { generateForSeed, istioInputObjects, withOperatorSettings } from '../test/istio/istio-rendered-seed.js';
import { renderGatewayWithIstio } from '../test/istio/istio-render.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway } from '../test/istio/seed-fixture.js';
import { gatewaySeedShoots } from './gateway-seed-shoots.js';

const SIZES = (process.argv[2] ?? '100,300,1000').split(',').map(Number);
const era = ERAS['v1.145'];
const gateway = ingressGateway('default');


async function renderSeconds(count: number, tunnelRevocation: 'none' | 'hop'): Promise<{ seconds: number; clusters: number; listeners: number }> {
  const objects = withOperatorSettings(gardenerSeedObjects(era, gatewaySeedShoots(count)), { combinedForm: 'ecds', tunnelRevocation });
  const input = istioInputObjects(objects, generateForSeed(objects));
  const start = performance.now();
  const render = await renderGatewayWithIstio(input, { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) });
  return { seconds: (performance.now() - start) / 1000, clusters: render.clusters.length, listeners: render.listeners.length };
}

console.log('ACL shoots | Istio render of the default gateway without / with hops (s) | clusters | listeners');
for (const count of SIZES) {
  const without = await renderSeconds(count, 'none');
  const withHops = await renderSeconds(count, 'hop');
  console.log(
    `${String(count).padStart(10)} | ${without.seconds.toFixed(2).padStart(7)} / ${withHops.seconds.toFixed(2).padStart(7)} (${(withHops.seconds / without.seconds).toFixed(2)}x) | ${without.clusters} / ${withHops.clusters} | ${without.listeners} / ${withHops.listeners}`,
  );
}
