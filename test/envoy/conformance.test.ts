// The data-plane conformance suite: a real Envoy, serving a Gardener-shaped gateway with the
// generated EnvoyFilters placed in it, decides a generated adversarial matrix of real
// connections; every decision must equal docs/design.md section 3 (the oracle). The gateways run the
// default form (ecds, its buckets served as Envoy runs them once ECDS delivered them) and the
// rules form, each judged by its reading of "targets S".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeCidrSet } from '../../src/acl/cidr.js';
import { isMatcherForm, type CombinedFormName } from '../../src/config/operator-config.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { admits, type OracleShoot } from '../oracle/acl-semantics.js';
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
import { kapi, vpn } from '../support/decide.js';
import { testSeed } from '../support/test-seed.js';
import { encodeProxyV2Header, headerValue, httpConnect, probeTcp, probeTls, sendHttpRequest } from './clients.js';
import { CONFORMANCE_SHOOTS, DOMAIN, apiserverIP, conformanceGatewaySpec, host, patchedLegacyFilters } from './conformance-seed.js';
import { gatewayUpstreams, hcmStatPrefix } from './gardener-gateway.js';
import { GARDENER_ERAS } from './gardener-shapes.js';
import { CONFORMANCE_ENVOY_VERSIONS, routeRepeatedHeaders } from './envoy-binary.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';

const SHOOTS = CONFORMANCE_SHOOTS;
const built = testSeed(SHOOTS, { observabilityDomain: DOMAIN });
const ORACLE: readonly OracleShoot[] = built.oracle;
const FORMS = [built.seed.operator.combinedForm, 'rules'] as const;
/** The operator's protectedPorts on a seed of this era: its CONNECT listeners (a seed without 8132 protects 8443 only). */
const protectedPorts = (era: keyof typeof GARDENER_ERAS) => GARDENER_ERAS[era].connectPorts.map((p) => p.logicalPort);
const generated = (form: CombinedFormName, ports?: readonly number[]) =>
  allEnvoyFilters(buildSeedEnvoyFilters(testSeed(SHOOTS, { observabilityDomain: DOMAIN, operator: { combinedForm: form, ...(ports ? { protectedPorts: [...ports] } : {}) } }).seed));
const GENERATED = generated(built.seed.operator.combinedForm);
const gatewaySpec = conformanceGatewaySpec;

describe.each(CONFORMANCE_ENVOY_VERSIONS)('on Envoy %s', (envoyVersion) => {
  describe.each(FORMS.flatMap((form) => (['v1.130-v1.138', 'v1.139-v1.149', 'v1.148-v1.149-no-legacy-port'] as const).map((era) => [era, form] as const)))('conformance on a Gardener %s gateway, combinedForm %s (real Envoy)', (era, form) => {
    let gateway: LiveGateway;
    const clusters = new Set(gatewayUpstreams(gatewaySpec(era)).map((u) => u.cluster));

    beforeAll(async () => {
      gateway = await startLiveGateway({ ...gatewaySpec(era), envoyVersion, envoyFilters: generated(form, protectedPorts(era)) });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('places every generated patch somewhere (no silent no-op)', () => {
      const unapplied = gateway.placement.patches.filter((p) => p.applications === 0).map((p) => `${p.envoyFilter}#${p.patchIndex}`);
      expect(unapplied).toEqual([]);
    });

    it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))(
      'HTTP CONNECT on %i: every header set from every client is decided as docs/design.md says',
      async (port, routeHeader) => {
        const regex = new RegExp(GARDENER_ERAS[era].destinationRegex);
        const deniedStat = `http.${hcmStatPrefix(port)}.rbac.denied`;
        const deniedBefore = await gateway.envoy.stat(deniedStat);
        const expectation = {
          oracle: ORACLE,
          protectedHeaders: built.seed.operator.protectedHeaders,
          routeHeader,
          routeRegex: regex,
          routeRepeatedHeaders: routeRepeatedHeaders(envoyVersion),
          clusters,
          reading: isMatcherForm(form) ? ('routable' as const) : ('mentions' as const),
        };
        const cases = connectCases();
        const mismatches = await connectMismatches(gateway, port, cases, expectation);
        expect(cases.length).toBeGreaterThan(500);
        expect(mismatches.filter(Boolean)).toEqual([]);
        const expectedDenials = cases.filter(({ client, headers }) => !connectExpected(client, headers, expectation)).length;
        expect(expectedDenials).toBeGreaterThan(50);
        expect(await gateway.envoy.stat(deniedStat)).toBe(deniedBefore + expectedDenials);
      },
    );

    it('non-CONNECT requests and unmatched CONNECTs keep Gardener’s redirect', async () => {
      const target = await gateway.endpoint(8443, 4);
      const outsider = proxyHeader(OUTSIDER);
      const get = await sendHttpRequest({ ...target, method: 'GET', target: '/', proxyHeader: outsider, headers: [['Host', host('shoot--p--foo')]] });
      expect(get.status).toBe(301);
      expect(headerValue(get, 'location')).toBe(`https://${host('shoot--p--foo')}:443/`);
      const unmatched = await httpConnect({ ...target, proxyHeader: outsider, headers: [['X-Gardener-Destination', 'not-a-cluster']] });
      expect(unmatched.status).toBe(301);
    });

    it('SNI: each shoot’s API server chain admits exactly its ACL’s clients', async () => {
      const cases = CLIENTS.flatMap((client) => SHOOTS.map((shoot) => ({ client, shoot })));
      const mismatches = await runAll(
        cases.map(({ client, shoot }) => async () => {
          const target = await gateway.endpoint(9443, client.listenerFamily);
          const { reached } = await probeTls({ ...target, sni: host(shoot.id), proxyHeader: proxyHeader(client), localAddress: client.localAddress });
          const oracleShoot = ORACLE.find((s) => s.technicalID === shoot.id) as OracleShoot;
          const expected = admits(oracleShoot, oracleClient(client));
          const ok = expected ? reached?.cluster === kapi(shoot.id) : reached === undefined;
          return ok ? undefined : `${client.label} -> ${shoot.id}: expected ${expected ? 'reached' : 'closed'}, got ${JSON.stringify(reached)}`;
        }),
      );
      expect(mismatches.filter(Boolean)).toEqual([]);
    });

    it('observability wildcard chain: each host is restricted by its owner’s ACL only', async () => {
      const hosts = SHOOTS.flatMap((s) => ['p', 'gu', 'api'].map((prefix) => ({ owner: s.id, sni: `${prefix}-${s.id.replace(/^shoot--?/, '')}.${DOMAIN}` })));
      const cases = CLIENTS.filter((c) => c.listenerFamily === 4).flatMap((client) => hosts.map((h) => ({ client, ...h })));
      const mismatches = await runAll(
        cases.map(({ client, owner, sni }) => async () => {
          const target = await gateway.endpoint(9443, 4);
          const { reached } = await probeTls({ ...target, sni, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
          const expected = admits(ORACLE.find((s) => s.technicalID === owner) as OracleShoot, oracleClient(client));
          return (reached !== undefined) === expected ? undefined : `${client.label} -> ${sni}: expected ${expected ? 'reached' : 'closed'}`;
        }),
      );
      expect(mismatches.filter(Boolean)).toEqual([]);
    });
  });

  describe('conformance on a Gardener 1.114–1.122 gateway: legacy PROXY-protocol apiserver-proxy port (real Envoy)', () => {
    let gateway: LiveGateway;

    beforeAll(async () => {
      gateway = await startLiveGateway({ ...gatewaySpec('v1.114-v1.122'), envoyVersion, envoyFilters: [...GENERATED, ...patchedLegacyFilters(built.seed)] });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('the PROXY destination selects the shoot’s chain, which admits exactly its ACL’s clients (and its pods)', async () => {
      const clients: Client[] = [...CLIENTS.filter((c) => c.proxySource !== undefined), { label: 'shoot foo pod', proxySource: '100.96.3.4', listenerFamily: 4 }];
      const cases = clients.flatMap((client) => SHOOTS.map((shoot, i) => ({ client, shoot, i })));
      const mismatches = await runAll(
        cases.map(({ client, shoot, i }) => async () => {
          const target = await gateway.endpoint(8443, 4);
          const destination = { address: client.proxySource?.includes(':') || client.proxyFamily === 'TCP6' ? `::ffff:${apiserverIP(i)}` : apiserverIP(i), port: 443 };
          const header = encodeProxyV2Header({ source: { address: client.proxySource as string, port: 40_000 }, destination, family: client.proxyFamily ?? (client.proxySource?.includes(':') ? 'TCP6' : 'TCP4') });
          const { reached } = await probeTcp({ ...target, proxyHeader: header, localAddress: client.localAddress });
          const o = ORACLE.find((s) => s.technicalID === shoot.id) as OracleShoot;
          const legacy = { ...o, alwaysAllowed: normalizeCidrSet([...o.alwaysAllowed, ...(built.seed.shoots.find((s) => s.technicalID === shoot.id)?.legacyProxyAllowed ?? [])]) };
          const expected = admits(legacy, oracleClient(client));
          // Gardener's chain matches the IPv4 ClusterIP only; a TCP6 destination reaches no chain at all.
          const chainMatches = !(client.proxySource?.includes(':') || client.proxyFamily === 'TCP6');
          const want = chainMatches && expected;
          return (reached?.cluster === kapi(shoot.id)) === want ? undefined : `${client.label} -> ${shoot.id}: expected ${want ? 'reached' : 'closed'}, got ${JSON.stringify(reached)}`;
        }),
      );
      expect(mismatches.filter(Boolean)).toEqual([]);
    });

    it('8132 is still protected in this era', async () => {
      const target = await gateway.endpoint(8132, 4);
      const outsider = proxyHeader(OUTSIDER);
      expect((await httpConnect({ ...target, proxyHeader: outsider, headers: [['Reversed-VPN', vpn('shoot--p--foo', 0)]] })).status).toBe(403);
      const inside = proxyHeader({ label: 'in', proxySource: '203.0.113.9', listenerFamily: 4 });
      expect((await httpConnect({ ...target, proxyHeader: inside, headers: [['Reversed-VPN', vpn('shoot--p--foo', 0)]] })).status).toBe(200);
    });
  });
});
