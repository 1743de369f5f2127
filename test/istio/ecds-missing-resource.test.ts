// What a missing ECDS bucket does to a gateway, with Envoy taking everything over delta ADS from
// Istio's own discovery server (the same harness as ecds-live-ads.test.ts, Gardener 1.145 seed,
// default gateway, `combinedForm: ecds` in 4 buckets: fewer buckets than the default keep the
// render small; how many there are does not change what one missing bucket does). The listener
// parts name every bucket with `initial_fetch_timeout` ECDS_FETCH_TIMEOUT and a default config
// that refuses every request naming a shoot (src/rbac/connect-matcher-ecds.ts); these are the
// facts behind that choice, printed by the tests:
// - a bucket missing when a gateway Envoy starts and written again within the timeout (what the
//   controller does): the server becomes LIVE as soon as Istio pushes it, with every ACL enforced;
// - a bucket that stays missing: the server becomes LIVE after the timeout (the pod gets ready,
//   so a rollout or a scale-up goes on), refusing every CONNECT that names a shoot until the
//   bucket is back; it never admits a client an ACL refuses;
// - a bucket deleted under a running Envoy: Envoy keeps the config it has (Istio sends no
//   removal), so every shoot stays enforced as last delivered, while a change in another bucket
//   in the same push takes effect.
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { ECDS_FETCH_TIMEOUT, ecdsBucketObjectName, ecdsBucketOf } from '../../src/rbac/connect-matcher-ecds.js';
import { durationMs } from '../../src/cli/duration.js';
import { httpConnect, proxyV2From } from '../envoy/clients.js';
import { CONFORMANCE_ENVOY_VERSIONS } from '../envoy/envoy-binary.js';
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
const NO_ACL = 'shoot--p--foo-bar';
const FOO_CLIENT = CLIENTS.find((c) => c.label === 'shoot foo range, IPv4')!.proxySource!;
/** Refused by OTHER's DENY rule. */
const DENIED_BY_OTHER = CLIENTS.find((c) => c.label === 'denied by bar--a, IPv4')!.proxySource!;
const FETCH_TIMEOUT_MS = durationMs.parse(ECDS_FETCH_TIMEOUT);
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

async function serverState(live: LiveAdsGateway): Promise<string> {
  const response = await fetch(`${live.envoy.adminUrl}/server_info`, { signal: AbortSignal.timeout(5_000) });
  const info = (await response.json()) as { state?: unknown };
  return String(info.state);
}

async function connectStatus(live: LiveAdsGateway, client: string, shoot: string): Promise<number> {
  const endpoint = await live.endpoint(8443, 4);
  return (await httpConnect({ ...endpoint, proxyHeader: proxyV2From(client), headers: [['X-Gardener-Destination', kapi(shoot)]] })).status;
}

/** ms from `since` until Envoy is LIVE; throws past `limitMs`. */
async function msUntilLive(live: LiveAdsGateway, since: number, limitMs: number): Promise<number> {
  while ((await serverState(live)) !== 'LIVE') {
    if (performance.now() - since > limitMs) throw new Error(`Envoy not LIVE within ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return performance.now() - since;
}

describe.each(CONFORMANCE_ENVOY_VERSIONS)(`a missing ECDS bucket, live over ADS from Istio's discovery server (Gardener ${era.name} seed, default gateway), Envoy %s`, (envoyVersion) => {
  let live: LiveAdsGateway | undefined;
  afterEach(async () => {
    await live?.stop();
    live = undefined;
  });

  it('missing when Envoy starts and written again within the timeout: the server waits for it, then serves with every shoot enforced', async () => {
    expect(withoutBucket).toHaveLength(full.length - 1);
    const started = performance.now();
    live = await startLiveAdsGateway({ objects: withoutBucket, proxy, envoyVersion, awaitLive: false });
    await new Promise((resolve) => setTimeout(resolve, WAITED_MS));
    expect(await serverState(live)).not.toBe('LIVE');
    // What a readiness probe asks: not ready yet.
    expect((await fetch(`${live.envoy.adminUrl}/ready`, { signal: AbortSignal.timeout(5_000) })).status).toBe(503);

    const restored = performance.now();
    await live.replaceEnvoyFilters(full);
    const liveAfterMs = await msUntilLive(live, restored, WAITED_MS);
    expect(performance.now() - started).toBeLessThan(FETCH_TIMEOUT_MS);
    expect(await connectStatus(live, FOO_CLIENT, SHOOT)).toBe(200);
    expect(await connectStatus(live, OUTSIDER.proxySource!, SHOOT)).toBe(403);
    expect(await connectStatus(live, DENIED_BY_OTHER, OTHER)).toBe(403);
    expect(await connectStatus(live, OUTSIDER.proxySource!, NO_ACL)).toBe(200);
    console.log(`Envoy ${envoyVersion}, missing bucket written again: LIVE ${liveAfterMs.toFixed(0)} ms after the write`);
  }, 120_000);

  it(`a bucket that stays missing: the server becomes LIVE after ${ECDS_FETCH_TIMEOUT} and refuses every CONNECT naming a shoot (never one an ACL refuses) until the bucket is back`, async () => {
    const started = performance.now();
    live = await startLiveAdsGateway({ objects: withoutBucket, proxy, envoyVersion, awaitLive: false });
    const liveAfterMs = await msUntilLive(live, started, FETCH_TIMEOUT_MS + 30_000);
    expect(liveAfterMs).toBeGreaterThanOrEqual(FETCH_TIMEOUT_MS - 1_000);
    expect((await fetch(`${live.envoy.adminUrl}/ready`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
    // The default config decides for the missing bucket: refused, whoever the shoot and the client.
    expect(await connectStatus(live, OUTSIDER.proxySource!, SHOOT)).toBe(403);
    expect(await connectStatus(live, FOO_CLIENT, SHOOT)).toBe(403);
    expect(await connectStatus(live, DENIED_BY_OTHER, OTHER)).toBe(403);
    expect(await connectStatus(live, OUTSIDER.proxySource!, NO_ACL)).toBe(403);

    const restored = performance.now();
    await live.replaceEnvoyFilters(full);
    while ((await connectStatus(live, FOO_CLIENT, SHOOT)) !== 200) {
      if (performance.now() - restored > WAITED_MS) throw new Error(`the bucket did not reach Envoy within ${WAITED_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    const servedAfterMs = performance.now() - restored;
    expect(await connectStatus(live, OUTSIDER.proxySource!, SHOOT)).toBe(403);
    expect(await connectStatus(live, DENIED_BY_OTHER, OTHER)).toBe(403);
    expect(await connectStatus(live, OUTSIDER.proxySource!, NO_ACL)).toBe(200);
    console.log(`Envoy ${envoyVersion}, bucket missing: LIVE ${liveAfterMs.toFixed(0)} ms after start; written again, its shoots admitted ${servedAfterMs.toFixed(0)} ms after the write`);
  }, 180_000);

  it('deleted under a running Envoy: Envoy keeps the config it has, every shoot stays enforced as last delivered, while a change in another bucket in the same push applies', async () => {
    expect(ecdsBucketOf(OTHER, BUCKETS)).not.toBe(ecdsBucketOf(SHOOT, BUCKETS));
    live = await startLiveAdsGateway({ objects: full, proxy, envoyVersion });
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
});
