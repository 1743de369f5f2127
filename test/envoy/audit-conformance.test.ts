// Issue 14 point 1, on the real Envoy: with every ACL in audit mode the conformance matrix's
// connections are all admitted on every path (SNI, both CONNECT ports, the observability wildcard
// chain, the legacy PROXY-protocol port), and each shoot's counter holds exactly the number of
// connections enforce mode would have refused for that shoot. The expected counts come from the
// oracle (docs/design.md section 3), not from the generator.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeCidrSet } from '../../src/acl/cidr.js';
import { parseConnectFilterName } from '../../src/rbac/combined-connect-filters.js';
import { combinedEntries } from '../../src/rbac/filter-values.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { mentionedShoots, wouldRefuse, type OracleShoot } from '../oracle/acl-semantics.js';
import { CLIENTS, connectCases, connectMismatches, oracleClient, proxyHeader, runAll, type Client } from '../support/conformance-matrix.js';
import { kapi } from '../support/decide.js';
import { DEFAULT_GATEWAY, testSeed, type TestShoot } from '../support/test-seed.js';
import { encodeProxyV2Header, probeTcp, probeTls } from './clients.js';
import { CONFORMANCE_SHOOTS, DOMAIN, apiserverIP, conformanceGatewaySpec, host, patchedLegacyFilters } from './conformance-seed.js';
import { gatewayUpstreams, hcmStatPrefix } from './gardener-gateway.js';
import { DESTINATION_HEADER_REGEX, GARDENER_ERAS } from './gardener-shapes.js';
import { CONFORMANCE_ENVOY_VERSIONS, routeRepeatedHeaders } from './envoy-binary.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';
import { rulesFormOnly } from '../support/rules-form.js';

const ENFORCED = CONFORMANCE_SHOOTS;
const AUDITED: TestShoot[] = ENFORCED.map((s) => (s.rule ? { ...s, rule: { ...s.rule, mode: 'audit' } } : s));
const ACL_IDS = ENFORCED.filter((s) => s.rule).map((s) => s.id);

// Pinned to the rules form: the CONNECT counts below are the rules form's (one shard, counted for
// its first refusing policy in key order) and the gateway here takes listener patches only. The
// matcher form's audit counters are checked in connect-matcher-conformance.test.ts; the SNI,
// observability and legacy paths are the shoots' own filters, the same in every form.
const RULES_FORM = { combinedForm: 'rules' } as const;
const enforced = testSeed(ENFORCED, { observabilityDomain: DOMAIN, operator: RULES_FORM });
const audited = testSeed(AUDITED, { observabilityDomain: DOMAIN, operator: RULES_FORM });
/** What enforce mode would refuse: the counts audit mode must report. */
const ENFORCE_ORACLE: readonly OracleShoot[] = enforced.oracle;
const GENERATED = rulesFormOnly(allEnvoyFilters(buildSeedEnvoyFilters(audited.seed)));
const oracleOf = (id: string): OracleShoot => ENFORCE_ORACLE.find((s) => s.technicalID === id) as OracleShoot;
const gatewaySpec = conformanceGatewaySpec;

/** Counters by technical ID whose names are `<prefix><id><suffix>`; shoots without a counter count 0. */
async function countersByShoot(gateway: LiveGateway, prefix: string, suffix: string): Promise<Map<string, number>> {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const stats = await gateway.envoy.stats(`^${escape(prefix)}.+${escape(suffix)}$`);
  return new Map(ACL_IDS.map((id) => [id, stats.get(`${prefix}${id}${suffix}`) ?? 0]));
}

function tally(ids: Iterable<string>): Map<string, number> {
  const counts = new Map(ACL_IDS.map((id) => [id, 0]));
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** The audited shoots of each combined shard on `port` (each shard is one RBAC filter with its own shadow rules). */
function shardsOn(port: number): string[][] {
  return GENERATED.filter((f) => f.metadata.namespace === DEFAULT_GATEWAY.namespace && parseConnectFilterName(f.metadata.name)?.port === port).map((f) =>
    f.spec.configPatches.flatMap((p) => [...combinedEntries(p.patch.value.typed_config)].filter(([, e]) => e.mode === 'audit').map(([id]) => id)),
  );
}

describe.each(CONFORMANCE_ENVOY_VERSIONS)('on Envoy %s', (envoyVersion) => {
  describe('audit mode on a Gardener v1.139-v1.149 gateway (real Envoy)', () => {
    const era = 'v1.139-v1.149';
    let gateway: LiveGateway;
    const clusters = new Set(gatewayUpstreams(gatewaySpec(era)).map((u) => u.cluster));

    beforeAll(async () => {
      gateway = await startLiveGateway({ ...gatewaySpec(era), envoyVersion, envoyFilters: GENERATED });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('places every audit patch (shadow rules are not a silent no-op)', () => {
      expect(gateway.placement.patches.filter((p) => p.applications === 0).map((p) => `${p.envoyFilter}#${p.patchIndex}`)).toEqual([]);
    });

    it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))(
      'HTTP CONNECT on %i: every request passes as if no ACL existed; rbac.policy.<id>.shadow_denied counts what enforce refuses',
      async (port, routeHeader) => {
        const hcm = `http.${hcmStatPrefix(port)}.rbac.`;
        const deniedBefore = await gateway.envoy.stat(`${hcm}denied`);
        const before = await countersByShoot(gateway, `${hcm}policy.`, '.shadow_denied');
        const protectedHeaders = audited.seed.operator.protectedHeaders;
        const expectation = { oracle: audited.oracle, protectedHeaders, routeHeader, routeRegex: new RegExp(DESTINATION_HEADER_REGEX.v1_139), routeRepeatedHeaders: routeRepeatedHeaders(envoyVersion), clusters };
        const cases = connectCases();
        const mismatches = await connectMismatches(gateway, port, cases, expectation);
        expect(mismatches.filter(Boolean)).toEqual([]);
        expect(await gateway.envoy.stat(`${hcm}denied`)).toBe(deniedBefore);

        // Envoy counts a request once per shard: for the first refusing policy in key order.
        const shards = shardsOn(port);
        const refusedByEnforce = cases.map(({ client, headers }) =>
          mentionedShoots(headers, protectedHeaders, ENFORCE_ORACLE)
            .filter((s) => wouldRefuse(s, oracleClient(client)))
            .map((s) => s.technicalID),
        );
        const attributed = refusedByEnforce.flatMap((ids) => shards.flatMap((shard) => ids.filter((id) => shard.includes(id)).sort().slice(0, 1)));
        const after = await countersByShoot(gateway, `${hcm}policy.`, '.shadow_denied');
        const counted = new Map(ACL_IDS.map((id) => [id, (after.get(id) ?? 0) - (before.get(id) ?? 0)]));
        expect(counted).toEqual(tally(attributed));
        // Every request enforce refuses is counted: one shard here, so once, for one shoot.
        expect(shards).toHaveLength(1);
        expect([...counted.values()].reduce((a, b) => a + b, 0)).toBe(refusedByEnforce.filter((ids) => ids.length > 0).length);
        expect(refusedByEnforce.filter((ids) => ids.length > 0).length).toBeGreaterThan(50);
      },
    );

    it('SNI: every client reaches every API server; gardener_acl_sni.<id>.rbac.shadow_denied counts what enforce refuses', async () => {
      const before = await countersByShoot(gateway, 'gardener_acl_sni.', '.rbac.shadow_denied');
      const cases = CLIENTS.flatMap((client) => ENFORCED.map((shoot) => ({ client, shoot })));
      const mismatches = await runAll(
        cases.map(({ client, shoot }) => async () => {
          const target = await gateway.endpoint(9443, client.listenerFamily);
          const { reached } = await probeTls({ ...target, sni: host(shoot.id), proxyHeader: proxyHeader(client), localAddress: client.localAddress });
          return reached?.cluster === kapi(shoot.id) ? undefined : `${client.label} -> ${shoot.id}: not reached`;
        }),
      );
      expect(mismatches.filter(Boolean)).toEqual([]);
      const after = await countersByShoot(gateway, 'gardener_acl_sni.', '.rbac.shadow_denied');
      const expected = tally(cases.filter(({ client, shoot }) => wouldRefuse(oracleOf(shoot.id), oracleClient(client))).map(({ shoot }) => shoot.id));
      expect(new Map(ACL_IDS.map((id) => [id, (after.get(id) ?? 0) - (before.get(id) ?? 0)]))).toEqual(expected);
      expect([...expected.values()].every((n) => n > 0)).toBe(true);
    });

    it('observability wildcard chain: every host is reached; gardener_acl_observability.<id>.rbac.shadow_denied counts its own hosts only', async () => {
      const before = await countersByShoot(gateway, 'gardener_acl_observability.', '.rbac.shadow_denied');
      const hosts = ENFORCED.flatMap((s) => ['p', 'gu', 'api'].map((prefix) => ({ owner: s.id, sni: `${prefix}-${s.id.replace(/^shoot--?/, '')}.${DOMAIN}` })));
      const cases = CLIENTS.filter((c) => c.listenerFamily === 4).flatMap((client) => hosts.map((h) => ({ client, ...h })));
      const mismatches = await runAll(
        cases.map(({ client, sni }) => async () => {
          const target = await gateway.endpoint(9443, 4);
          const { reached } = await probeTls({ ...target, sni, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
          return reached !== undefined ? undefined : `${client.label} -> ${sni}: not reached`;
        }),
      );
      expect(mismatches.filter(Boolean)).toEqual([]);
      const after = await countersByShoot(gateway, 'gardener_acl_observability.', '.rbac.shadow_denied');
      const expected = tally(cases.filter(({ client, owner }) => wouldRefuse(oracleOf(owner), oracleClient(client))).map(({ owner }) => owner));
      expect(new Map(ACL_IDS.map((id) => [id, (after.get(id) ?? 0) - (before.get(id) ?? 0)]))).toEqual(expected);
    });
  });

  describe('audit mode on the legacy PROXY-protocol apiserver-proxy port, Gardener 1.114-1.122 (real Envoy)', () => {
    let gateway: LiveGateway;

    beforeAll(async () => {
      gateway = await startLiveGateway({ ...gatewaySpec('v1.114-v1.122'), envoyVersion, envoyFilters: [...GENERATED, ...patchedLegacyFilters(audited.seed)] });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('every IPv4 PROXY client reaches the chosen API server; gardener_acl_legacy_proxy.<id>.rbac.shadow_denied counts what enforce refuses', async () => {
      const clients: Client[] = [...CLIENTS.filter((c) => c.proxySource !== undefined && !c.proxySource.includes(':') && c.proxyFamily !== 'TCP6'), { label: 'shoot foo pod', proxySource: '100.96.3.4', listenerFamily: 4 }];
      const before = await countersByShoot(gateway, 'gardener_acl_legacy_proxy.', '.rbac.shadow_denied');
      const cases = clients.flatMap((client) => ENFORCED.map((shoot, i) => ({ client, shoot, i })));
      const mismatches = await runAll(
        cases.map(({ client, shoot, i }) => async () => {
          const target = await gateway.endpoint(8443, 4);
          const header = encodeProxyV2Header({ source: { address: client.proxySource as string, port: 40_000 }, destination: { address: apiserverIP(i), port: 443 }, family: 'TCP4' });
          const { reached } = await probeTcp({ ...target, proxyHeader: header, localAddress: client.localAddress });
          return reached?.cluster === kapi(shoot.id) ? undefined : `${client.label} -> ${shoot.id}: not reached, ${JSON.stringify(reached)}`;
        }),
      );
      expect(mismatches.filter(Boolean)).toEqual([]);
      const legacyOracle = (id: string): OracleShoot => {
        const o = oracleOf(id);
        return { ...o, alwaysAllowed: normalizeCidrSet([...o.alwaysAllowed, ...(audited.seed.shoots.find((s) => s.technicalID === id)?.legacyProxyAllowed ?? [])]) };
      };
      const after = await countersByShoot(gateway, 'gardener_acl_legacy_proxy.', '.rbac.shadow_denied');
      const expected = tally(cases.filter(({ client, shoot }) => wouldRefuse(legacyOracle(shoot.id), oracleClient(client))).map(({ shoot }) => shoot.id));
      expect(new Map(ACL_IDS.map((id) => [id, (after.get(id) ?? 0) - (before.get(id) ?? 0)]))).toEqual(expected);
      expect([...expected.values()].some((n) => n > 0)).toBe(true);
    });
  });
});
