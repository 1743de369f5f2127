// What a missing ECDS bucket does to a gateway, with Envoy taking everything over delta ADS from
// Istio's own discovery server (the same harness as ecds-live-ads.test.ts, Gardener 1.145 seed,
// default gateway, `combinedForm: ecds` in 4 buckets). The listener parts name every bucket with
// `initial_fetch_timeout: 0s` and no default config; these are the facts behind that choice:
// - a bucket missing when a gateway Envoy starts: the CONNECT listeners wait for it, and the
//   server does not become LIVE (the pod is not ready, so it gets no traffic at all) until the
//   bucket is stored again; then it serves, with the shoots' ACLs;
// - a bucket deleted under a running Envoy: Envoy keeps the config it has, so every shoot stays
//   enforced as last delivered (the controller restores the object), while a change in another
//   bucket in the same push takes effect (so the push did reach Envoy);
// - the alternative, a finite timeout: the server goes LIVE without the config and answers every
//   CONNECT on the port with 500, for every shoot (a ready pod that breaks everyone's tunnels).
import { afterEach, describe, expect, it } from 'vitest';
import { ecdsBucketObjectName, ecdsBucketOf } from '../../src/rbac/connect-matcher-ecds.js';
import { httpConnect, proxyV2From } from '../envoy/clients.js';
import { getString, isJsonObject, type JsonObject } from '../envoy/json.js';
import { CLIENTS, OUTSIDER } from '../support/conformance-matrix.js';
import { kapi } from '../support/decide.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { istioInputWithEcds, withMatcherForm, withRule } from './istio-rendered-seed.js';
import { startLiveAdsGateway, type LiveAdsGateway } from './live-ads-gateway.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway } from './seed-fixture.js';

const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const BUCKETS = 4;
const SHOOT = 'shoot--p--foo';
const OTHER = 'shoot--bar--a';
const FOO_CLIENT = CLIENTS.find((c) => c.label === 'shoot foo range, IPv4')!.proxySource!;
/** Refused by OTHER's DENY rule. */
const DENIED_BY_OTHER = CLIENTS.find((c) => c.label === 'denied by bar--a, IPv4')!.proxySource!;
/** Long enough for Istio's debounce, its push and Envoy's ECDS fetch many times over. */
const WAITED_MS = 8_000;
const POLL_MS = 100;

const gateway = ingressGateway('default');
const proxy = { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) };
const gardenerObjects = withMatcherForm(gardenerSeedObjects(era));
const full = istioInputWithEcds(gardenerObjects, BUCKETS);
const missingBucket = ecdsBucketObjectName(ecdsBucketOf(SHOOT, BUCKETS));
const isMissing = (o: JsonObject): boolean =>
  o['kind'] === 'EnvoyFilter' && isJsonObject(o['metadata']) && getString(o['metadata'], 'name') === missingBucket && getString(o['metadata'], 'namespace') === gateway.namespace;
const withoutBucket = full.filter((o) => !isMissing(o));
/** The listener parts with a finite wait for their resources instead of none. */
const withFetchTimeout = (objects: readonly JsonObject[]): JsonObject[] => JSON.parse(JSON.stringify(objects).replaceAll('"initial_fetch_timeout":"0s"', '"initial_fetch_timeout":"2s"')) as JsonObject[];

async function serverState(live: LiveAdsGateway): Promise<string> {
  const response = await fetch(`${live.envoy.adminUrl}/server_info`, { signal: AbortSignal.timeout(5_000) });
  const info = (await response.json()) as { state?: unknown };
  return String(info.state);
}

async function connectStatus(live: LiveAdsGateway, client: string, shoot: string): Promise<number> {
  const endpoint = await live.endpoint(8443, 4);
  return (await httpConnect({ ...endpoint, proxyHeader: proxyV2From(client), headers: [['X-Gardener-Destination', kapi(shoot)]] })).status;
}

async function eventuallyLive(live: LiveAdsGateway): Promise<void> {
  const deadline = Date.now() + WAITED_MS;
  while ((await serverState(live)) !== 'LIVE') {
    if (Date.now() > deadline) throw new Error(`Envoy not LIVE within ${WAITED_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

describe(`a missing ECDS bucket, live over ADS from Istio's discovery server (Gardener ${era.name} seed, default gateway)`, () => {
  let live: LiveAdsGateway | undefined;
  afterEach(async () => {
    await live?.stop();
    live = undefined;
  });

  it('missing when Envoy starts: the server never becomes LIVE (the pod is not ready) until the bucket is stored; then every shoot is enforced', async () => {
    expect(withoutBucket).toHaveLength(full.length - 1);
    live = await startLiveAdsGateway({ objects: withoutBucket, proxy, awaitLive: false });
    const states = new Set<string>();
    const until = Date.now() + WAITED_MS;
    while (Date.now() < until) {
      states.add(await serverState(live));
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    expect([...states]).not.toContain('LIVE');
    // What a readiness probe asks: not ready.
    expect((await fetch(`${live.envoy.adminUrl}/ready`, { signal: AbortSignal.timeout(5_000) })).status).toBe(503);

    await live.replaceEnvoyFilters(full);
    await eventuallyLive(live);
    expect(await connectStatus(live, FOO_CLIENT, SHOOT)).toBe(200);
    expect(await connectStatus(live, OUTSIDER.proxySource!, SHOOT)).toBe(403);
    expect(await connectStatus(live, DENIED_BY_OTHER, OTHER)).toBe(403);
  }, 120_000);

  it('deleted under a running Envoy: Envoy keeps the config it has, every shoot stays enforced as last delivered, while a change in another bucket in the same push applies', async () => {
    expect(ecdsBucketOf(OTHER, BUCKETS)).not.toBe(ecdsBucketOf(SHOOT, BUCKETS));
    live = await startLiveAdsGateway({ objects: full, proxy });
    expect(await connectStatus(live, OUTSIDER.proxySource!, SHOOT)).toBe(403);
    expect(await connectStatus(live, DENIED_BY_OTHER, OTHER)).toBe(403);
    // The same push deletes SHOOT's bucket and moves OTHER's DENY to another range.
    const otherChanged = istioInputWithEcds(withRule(gardenerObjects, OTHER, { action: 'DENY', type: 'remote_ip', cidrs: ['192.0.2.0/24'] }), BUCKETS);
    expect(await live.replaceEnvoyFilters(otherChanged.filter((o) => !isMissing(o)))).toBeGreaterThan(1);
    const deadline = Date.now() + WAITED_MS;
    while ((await connectStatus(live, DENIED_BY_OTHER, OTHER)) !== 200) {
      if (Date.now() > deadline) throw new Error(`OTHER's change did not reach Envoy within ${WAITED_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    expect(await serverState(live)).toBe('LIVE');
    expect(await connectStatus(live, OUTSIDER.proxySource!, SHOOT)).toBe(403);
    expect(await connectStatus(live, FOO_CLIENT, SHOOT)).toBe(200);
  }, 120_000);

  it('the alternative not taken, a finite initial_fetch_timeout: Envoy goes LIVE without the bucket and answers every CONNECT on the port with 500, for every shoot', async () => {
    live = await startLiveAdsGateway({ objects: withFetchTimeout(withoutBucket), proxy, awaitLive: false });
    await eventuallyLive(live);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await connectStatus(live, FOO_CLIENT, SHOOT)).toBe(500);
    expect(await connectStatus(live, FOO_CLIENT, OTHER)).toBe(500);
  }, 120_000);
});
