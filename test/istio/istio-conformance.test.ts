// The conformance matrix against gateways that Istio's own code rendered: for each Gardener era,
// Gardener's objects and our generator's EnvoyFilters (legacy filters mutated by our webhook
// patches) go through istio-render for every ingress gateway of the seed, a real Envoy serves
// each gateway, and every decision must equal docs/design.md section 3 (the oracle). The fixture seed has
// no OperatorConfiguration, so the operator defaults apply (the ecds form; both headers protected
// on 8132 and 8443); the suite runs again with each other form an operator may set: matcher, and
// rules, which seeds on an older Istio set (its reading of "targets S" is every mention, the
// matcher forms' a routable first value).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig, isMatcherForm } from '../../src/config/operator-config.js';
import { admits } from '../oracle/acl-semantics.js';
import { encodeProxyV2Header, headerValue, httpConnect, probeTcp, probeTls, sendHttpRequest } from '../envoy/clients.js';
import {
  CLIENTS,
  OUTSIDER,
  connectCases,
  connectExpected,
  connectMismatches,
  oracleClient,
  proxyHeader,
  runAll,
  type Client,
} from '../support/conformance-matrix.js';
import { fixtureOracle, oracleShoot, type FixtureOracle } from './fixture-oracle.js';
import { probeHttps } from './https-probe.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { renderSeedThroughIstio, type IstioRenderedSeed } from './istio-rendered-seed.js';
import { ERA_NAMES, ERAS } from './eras.js';
import { FIXTURE_SHOOTS, INGRESS_GATEWAYS, ingressGateway, socketCluster, usesTlsTermination, type FixtureShoot, type GatewayKey } from './seed-fixture.js';
import { sniEndpoints, type SniEndpoint } from './sni-endpoints.js';

/** The HA shoot runs two VPN servers; the matrix names the last one. */
const HA_VPN_INDEX = 1;

function gatewayOf(gateways: ReadonlyMap<GatewayKey, IstioGateway>, key: GatewayKey): IstioGateway {
  const gateway = gateways.get(key);
  if (gateway === undefined) throw new Error(`gateway ${key} not started`);
  return gateway;
}

/** Sum of every HTTP RBAC denial on the gateway (only our combined filters are HTTP RBAC filters). */
async function httpRbacDenials(gateway: IstioGateway): Promise<number> {
  const stats = await gateway.envoy.stats('^http\\..*\\.rbac\\.denied$');
  return [...stats.values()].reduce((sum, value) => sum + value, 0);
}

let probeCounter = 0;

/** One client against one TLS host: whether the oracle's verdict is what the Istio-rendered Envoy did. */
async function sniMismatch(gateway: IstioGateway, endpoint: SniEndpoint, client: Client, oracle: FixtureOracle): Promise<string | undefined> {
  const target = await gateway.endpoint(9443, client.listenerFamily);
  const options = { ...target, sni: endpoint.sni, proxyHeader: proxyHeader(client), localAddress: client.localAddress };
  const expected = admits(oracleShoot(oracle.shoots, endpoint.owner), oracleClient(client));
  const label = `${client.label} -> ${endpoint.sni} on ${endpoint.gateway}`;
  if (endpoint.tls.mode === 'passthrough') {
    const { reached } = await probeTls(options);
    const ok = expected ? reached?.cluster === endpoint.cluster : reached === undefined;
    return ok ? undefined : `${label}: expected ${expected ? `to reach ${endpoint.cluster}` : 'closed'}, got ${JSON.stringify(reached)}`;
  }
  const marker = `probe-${process.pid}-${++probeCounter}`;
  const result = await probeHttps({ ...options, marker });
  const upstreamGotIt = gateway.echo.upstream(endpoint.cluster).connections.some((c) => c.received.includes(marker));
  const problems: string[] = [];
  if (result.servedCertificate !== endpoint.tls.credentialName) problems.push(`served certificate ${result.servedCertificate}, want ${endpoint.tls.credentialName}`);
  if (expected !== (result.status !== undefined)) problems.push(expected ? 'closed without response but docs/design.md admits' : `answered ${result.status} but docs/design.md denies`);
  if (expected !== upstreamGotIt) problems.push(expected ? `request did not reach ${endpoint.cluster}` : `request reached ${endpoint.cluster}`);
  return problems.length === 0 ? undefined : `${label}: ${problems.join('; ')}`;
}

const FORMS = [defaultOperatorConfig().combinedForm, 'matcher', 'rules'] as const;

describe.each(FORMS.flatMap((form) => ERA_NAMES.map((name) => [name, ERAS[name].summary, form] as const)))('Gardener %s seed (%s) rendered by Istio, served by real Envoys, combinedForm %s', (eraName, _summary, form) => {
  const era = ERAS[eraName];
  const reading = isMatcherForm(form) ? ('routable' as const) : ('mentions' as const);
  let seed: IstioRenderedSeed;
  let oracle: FixtureOracle;
  const gateways = new Map<GatewayKey, IstioGateway>();

  beforeAll(async () => {
    seed = await renderSeedThroughIstio(era, undefined, form === defaultOperatorConfig().combinedForm ? undefined : { combinedForm: form });
    oracle = fixtureOracle(seed.gardenerObjects);
    for (const gateway of INGRESS_GATEWAYS) {
      const render = seed.renders.get(gateway.key);
      if (render === undefined) throw new Error(`no render for ${gateway.key}`);
      gateways.set(gateway.key, await startIstioGateway(render));
    }
  });
  afterAll(async () => {
    await Promise.allSettled([...gateways.values()].map((gateway) => gateway.stop()));
  });

  it('the oracle knows the matrix shoots with the fixture’s rules', () => {
    expect(oracle.shoots.map((s) => s.technicalID).sort()).toEqual(FIXTURE_SHOOTS.map((s) => s.id).sort());
    expect(oracle.shoots.filter((s) => s.rule !== undefined).length).toBe(FIXTURE_SHOOTS.filter((s) => s.rule !== undefined).length);
  });

  const connectTargets = INGRESS_GATEWAYS.flatMap((gateway) => era.connectPorts.map((p) => [gateway.key, p.port, p.header] as const));
  it.each(connectTargets)('HTTP CONNECT on the %s gateway’s %i (%s): every header set from every client is decided as docs/design.md says', async (key, port, routeHeader) => {
    const gateway = gatewayOf(gateways, key);
    const expectation = {
      oracle: oracle.shoots,
      protectedHeaders: defaultOperatorConfig().protectedHeaders,
      routeHeader,
      routeRegex: new RegExp(era.destinationRegex),
      clusters: gateway.clusters,
      reading,
    };
    const deniedBefore = await httpRbacDenials(gateway);
    const cases = connectCases(HA_VPN_INDEX);
    expect(await connectMismatches(gateway, port, cases, expectation)).toEqual([]);
    const expectedDenials = cases.filter(({ client, headers }) => !connectExpected(client, headers, expectation)).length;
    expect(expectedDenials).toBeGreaterThan(50);
    expect(await httpRbacDenials(gateway)).toBe(deniedBefore + expectedDenials);
  });

  it.each(era.connectPorts.map((p) => [p.port] as const))('non-CONNECT requests and unmatched CONNECTs on %i keep Gardener’s redirect', async (port) => {
    const target = await gatewayOf(gateways, 'default').endpoint(port, 4);
    const outsider = proxyHeader(OUTSIDER);
    const host = 'api.foo.p.example.test';
    const get = await sendHttpRequest({ ...target, method: 'GET', target: '/', proxyHeader: outsider, headers: [['Host', host]] });
    expect(get.status).toBe(301);
    expect(headerValue(get, 'location')).toBe(`https://${host}:443/`);
    expect((await httpConnect({ ...target, proxyHeader: outsider, headers: [['X-Gardener-Destination', 'not-a-cluster'], ['Reversed-VPN', 'not-a-cluster']] })).status).toBe(301);
  });

  it.each(INGRESS_GATEWAYS.map((g) => [g.key] as const))('SNI on the %s gateway: every API server and observability host admits exactly its owner’s ACL clients', async (key) => {
    const endpoints = sniEndpoints(era).filter((e) => e.gateway === key);
    expect(endpoints.length).toBeGreaterThan(0);
    const gateway = gatewayOf(gateways, key);
    const cases = CLIENTS.flatMap((client) => endpoints.map((endpoint) => ({ client, endpoint })));
    const mismatches = await runAll(cases.map(({ client, endpoint }) => () => sniMismatch(gateway, endpoint, client, oracle)));
    expect(mismatches.filter(Boolean)).toEqual([]);
    // Not vacuous: on every TLS mode served here, some clients are admitted and some are not.
    for (const mode of new Set(endpoints.map((e) => e.tls.mode))) {
      const verdicts = new Set(cases.filter((c) => c.endpoint.tls.mode === mode).map((c) => admits(oracleShoot(oracle.shoots, c.endpoint.owner), oracleClient(c.client))));
      expect(verdicts, mode).toEqual(new Set([true, false]));
    }
  });

  if (era.legacyApiserverProxy) {
    it('legacy PROXY-protocol port 8443: the PROXY destination selects the shoot’s chain, which admits exactly its ACL’s clients (and its pods)', async () => {
      const clients: Client[] = [...CLIENTS.filter((c) => c.proxySource !== undefined), { label: 'shoot pod', proxySource: '100.96.3.4', listenerFamily: 4 }];
      const cases = clients.flatMap((client) => FIXTURE_SHOOTS.map((shoot) => ({ client, shoot })));
      const mismatches = await runAll(cases.map(({ client, shoot }) => () => legacyMismatch(gatewayOf(gateways, shoot.gateway), shoot, client)));
      // Includes the TLS-terminated shoot, whose legacy chain forwards to its socket listener.
      expect(mismatches.filter((m) => m !== undefined).map((m) => m?.message)).toEqual([]);
    });
  }

  async function legacyMismatch(gateway: IstioGateway, shoot: FixtureShoot, client: Client): Promise<{ shoot: string; message: string } | undefined> {
    const target = await gateway.endpoint(8443, 4);
    const ipv6Header = client.proxySource?.includes(':') === true || client.proxyFamily === 'TCP6';
    const destination = { address: ipv6Header ? `::ffff:${shoot.apiserverIP}` : shoot.apiserverIP, port: 443 };
    const header = encodeProxyV2Header({ source: { address: client.proxySource as string, port: 40_000 }, destination, family: ipv6Header ? 'TCP6' : 'TCP4' });
    const { reached } = await probeTcp({ ...target, proxyHeader: header, localAddress: client.localAddress });
    const cluster = usesTlsTermination(era, shoot) ? socketCluster(shoot.id) : `outbound|443||kube-apiserver.${shoot.id}.svc.cluster.local`;
    // Gardener's chain matches the IPv4 address only; a TCP6 destination reaches no shoot chain.
    const want = !ipv6Header && admits(oracleShoot(oracle.legacyProxyShoots, shoot.id), oracleClient(client));
    if (want ? reached?.cluster === cluster : reached === undefined) return undefined;
    const via = ingressGateway(shoot.gateway).namespace;
    return { shoot: shoot.id, message: `${client.label} -> ${shoot.id} via ${via}: expected ${want ? `to reach ${cluster}` : 'closed'}, got ${JSON.stringify(reached)}` };
  }
});
