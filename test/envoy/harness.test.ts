// Smoke test of the real-Envoy harness, driven by HAND-WRITTEN EnvoyFilters (not the generator):
// it shows that placement, gateway shape, clients, echo upstreams and stats fit together, and that
// each of them can report a failure.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerValue, httpConnect, probeTcp, probeTls, proxyV2From, sendHttpRequest } from './clients.js';
import { validateConfig } from './envoy-process.js';
import { gatewayBootstrap, hcmStatPrefix } from './gardener-gateway.js';
import { HEADER_GARDENER_DESTINATION, HEADER_REVERSED_VPN, gardenerLegacyProxyEnvoyFilter, istioClusterName } from './gardener-shapes.js';
import { ANY, httpRbacEnvoyFilter, networkRbacFilter, remoteIp, singlePolicyRules, sniRbacEnvoyFilter } from './hand-written-filters.js';
import { approximateIstioPlacement } from './istio-placement-approximation.js';
import type { JsonObject } from './json.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';

const SHOOT_A = 'shoot--p--a';
const SHOOT_B = 'shoot--p--b';
const HOST_A_INTERNAL = 'api.a.p.internal.example.test';
const HOST_A_EXTERNAL = 'api.a.example.test';
const HOST_B = 'api.b.p.internal.example.test';
const INSIDE = '10.1.2.3'; // in the hand-written ACLs' 10.0.0.0/8
const OUTSIDE = '203.0.113.9';

const shoots = [
  { technicalID: SHOOT_A, sniChains: [[HOST_A_INTERNAL, HOST_A_EXTERNAL]] },
  { technicalID: SHOOT_B, sniChains: [[HOST_B]] },
];

const TEN_SLASH_EIGHT = remoteIp('10.0.0.0', 8);

/** HTTP RBAC: deny CONNECTs whose X-Gardener-Destination mentions shoot A unless from 10.0.0.0/8. */
const handWrittenHttpAcl = httpRbacEnvoyFilter(
  'hand-written-http-acl',
  8443,
  singlePolicyRules(
    'DENY',
    SHOOT_A,
    { header: { name: 'x-gardener-destination', string_match: { contains: `.${SHOOT_A}.` } } },
    { not_id: TEN_SLASH_EIGHT },
  ),
);

/** Network RBAC on shoot A's SNI chain (matched by one of its hosts): allow only 10.0.0.0/8. */
const handWrittenSniAcl = sniRbacEnvoyFilter('hand-written-sni-acl', 9443, HOST_A_EXTERNAL, singlePolicyRules('ALLOW', 'from-ten', ANY, TEN_SLASH_EIGHT));
const SNI_STAT_PREFIX = 'hand_written_sni_acl.';

describe('real-Envoy harness: Gardener v1.139-v1.149 gateway with hand-written EnvoyFilters', () => {
  let gateway: LiveGateway;

  beforeAll(async () => {
    gateway = await startLiveGateway({ era: 'v1.139-v1.149', shoots, envoyFilters: [handWrittenHttpAcl, handWrittenSniAcl] });
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  it('places every hand-written patch exactly once', () => {
    expect(gateway.placement.patches.map((p) => [p.envoyFilter, p.applications])).toEqual([
      ['istio-ingress/hand-written-http-acl', 1],
      ['istio-ingress/hand-written-sni-acl', 1],
    ]);
  });

  it('HTTP RBAC on 8443: admits 10.1.2.3 to shoot A, denies 203.0.113.9 with 403, counts the denial', async () => {
    const target = await gateway.endpoint(8443);
    const destinationA = istioClusterName.kubeApiserver(SHOOT_A);
    const deniedStat = `http.${hcmStatPrefix(8443)}.rbac.denied`;
    const deniedBefore = await gateway.envoy.stat(deniedStat);

    const inside = await httpConnect({ ...target, proxyHeader: proxyV2From(INSIDE), headers: [[HEADER_GARDENER_DESTINATION, destinationA]] });
    expect(inside.status).toBe(200);
    expect(inside.tunnel).toEqual({ shoot: SHOOT_A, cluster: destinationA });

    const bytesBefore = gateway.echo.bytesReceived();
    const outside = await httpConnect({ ...target, proxyHeader: proxyV2From(OUTSIDE), headers: [[HEADER_GARDENER_DESTINATION, destinationA]] });
    expect(outside.status).toBe(403);
    expect(outside.tunnel).toBeUndefined();
    expect(gateway.echo.bytesReceived()).toBe(bytesBefore);
    expect(await gateway.envoy.stat(deniedStat)).toBe(deniedBefore + 1);
  });

  it('HTTP RBAC on 8443 leaves shoot B (no ACL) reachable from anywhere', async () => {
    const destinationB = istioClusterName.vpnSeedServer(SHOOT_B);
    const result = await httpConnect({
      ...(await gateway.endpoint(8443)),
      proxyHeader: proxyV2From(OUTSIDE),
      headers: [['x-GARDENER-destination', destinationB]],
    });
    expect(result.status).toBe(200);
    expect(result.tunnel).toEqual({ shoot: SHOOT_B, cluster: destinationB });
  });

  it('8132 routes on Reversed-VPN (no ACL placed there by the hand-written filter)', async () => {
    const destination = istioClusterName.vpnSeedServer(SHOOT_A);
    const result = await httpConnect({
      ...(await gateway.endpoint(8132)),
      proxyHeader: proxyV2From(OUTSIDE),
      headers: [[HEADER_REVERSED_VPN, destination]],
    });
    expect(result.status).toBe(200);
    expect(result.tunnel).toEqual({ shoot: SHOOT_A, cluster: destination });
  });

  it("non-CONNECT requests get Gardener's https redirect, unmatched CONNECTs too", async () => {
    const target = await gateway.endpoint(8443);
    const get = await sendHttpRequest({ ...target, method: 'GET', target: '/healthz', headers: [['Host', HOST_A_EXTERNAL]] });
    expect(get.status).toBe(301);
    expect(headerValue(get, 'location')).toBe(`https://${HOST_A_EXTERNAL}:443/healthz`);

    const unmatched = await httpConnect({ ...target, headers: [[HEADER_GARDENER_DESTINATION, 'outbound|443||evil.example.test']] });
    expect(unmatched.status).toBe(301);
  });

  it('network RBAC on the SNI chain: any host of the chain is protected, by PROXY source', async () => {
    const target = await gateway.endpoint(9443);
    const cluster = istioClusterName.kubeApiserver(SHOOT_A);
    const deniedStat = `${SNI_STAT_PREFIX}rbac.denied`;
    const deniedBefore = await gateway.envoy.stat(deniedStat);

    for (const sni of [HOST_A_INTERNAL, HOST_A_EXTERNAL]) {
      expect((await probeTls({ ...target, sni, proxyHeader: proxyV2From(INSIDE) })).reached).toEqual({ shoot: SHOOT_A, cluster });
      expect((await probeTls({ ...target, sni, proxyHeader: proxyV2From(OUTSIDE) })).reached).toBeUndefined();
    }
    expect(await gateway.envoy.stat(deniedStat)).toBe(deniedBefore + 2);

    const otherShoot = await probeTls({ ...target, sni: HOST_B, proxyHeader: proxyV2From(OUTSIDE) });
    expect(otherShoot.reached).toEqual({ shoot: SHOOT_B, cluster: istioClusterName.kubeApiserver(SHOOT_B) });
  });

  it('without PROXY header the loopback source address is the client address', async () => {
    const target = await gateway.endpoint(9443);
    const result = await probeTls({ ...target, sni: HOST_A_INTERNAL, localAddress: '127.0.0.5' });
    expect(result.reached).toBeUndefined(); // 127.0.0.5 is outside 10.0.0.0/8
  });

  it('validateConfig accepts the served config and rejects stat_prefix inside HTTP RBAC', async () => {
    const served = gatewayBootstrap(gateway.placement.gateway);
    expect(await validateConfig(served)).toMatchObject({ ok: true });

    const broken = structuredClone(handWrittenHttpAcl);
    const patches = (broken['spec'] as { configPatches: Array<{ patch: { value: { typed_config: JsonObject } } }> }).configPatches;
    const firstPatch = patches[0];
    if (firstPatch === undefined) throw new Error('fixture has no patch');
    firstPatch.patch.value.typed_config['stat_prefix'] = 'not_in_http_rbac';
    const placed = approximateIstioPlacement(gateway.baseGateway, [broken]);
    const result = await validateConfig(gatewayBootstrap(placed.gateway));
    expect(result.ok).toBe(false);
    expect(result.output).toContain('stat_prefix');
  });
});

describe('real-Envoy harness: legacy apiserver-proxy port (Gardener v1.114-v1.122)', () => {
  const API_A = '240.0.0.10';
  const API_B = '240.0.0.11';
  let gateway: LiveGateway;

  /** Gardener's per-shoot EnvoyFilter for A, with a network RBAC put before tcp_proxy (as our webhook will). */
  function mutatedLegacyFilterForA(): JsonObject {
    const filter = gardenerLegacyProxyEnvoyFilter({ technicalID: SHOOT_A, apiserverIP: API_A });
    const chain = (filter['spec'] as { configPatches: Array<{ patch: { value: { filters: JsonObject[] } } }> }).configPatches[0]?.patch.value;
    if (chain === undefined) throw new Error('Gardener legacy EnvoyFilter has no chain');
    chain.filters.unshift(
      networkRbacFilter('hand-written-legacy-acl', 'hand_written_legacy_acl.', singlePolicyRules('ALLOW', 'from-ten', ANY, TEN_SLASH_EIGHT)),
    );
    return filter;
  }

  beforeAll(async () => {
    gateway = await startLiveGateway({
      era: 'v1.114-v1.122',
      shoots,
      envoyFilters: [mutatedLegacyFilterForA(), gardenerLegacyProxyEnvoyFilter({ technicalID: SHOOT_B, apiserverIP: API_B })],
    });
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  it('the PROXY destination selects the shoot chain; the mutated chain enforces its RBAC', async () => {
    const target = await gateway.endpoint(8443);
    const clusterA = istioClusterName.kubeApiserver(SHOOT_A);
    const toA = (source: string): Buffer => proxyV2From(source, { address: API_A, port: 443 });

    expect((await probeTcp({ ...target, proxyHeader: toA(INSIDE) })).reached).toEqual({ shoot: SHOOT_A, cluster: clusterA });
    expect((await probeTcp({ ...target, proxyHeader: toA(OUTSIDE) })).reached).toBeUndefined();
    expect(await gateway.envoy.stat('hand_written_legacy_acl.rbac.denied')).toBe(1);

    const toB = proxyV2From(OUTSIDE, { address: API_B, port: 443 });
    expect((await probeTcp({ ...target, proxyHeader: toB })).reached).toEqual({
      shoot: SHOOT_B,
      cluster: istioClusterName.kubeApiserver(SHOOT_B),
    });
  });

  it('the PROXY header is required on the legacy port', async () => {
    const target = await gateway.endpoint(8443);
    expect((await probeTcp(target)).reached).toBeUndefined();
  });
});
