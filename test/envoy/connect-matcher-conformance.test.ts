// The conformance matrix on the matcher form of the combined CONNECT filters (operator
// `combinedForm: matcher`), on a real Envoy of every supported version and both Gardener eras
// with two CONNECT ports. Every decision must equal docs/design.md section 3 read as the matcher form
// reads "targets S" (a routable first value of a protected header); the tunnel checks (a tunnel
// only ever reaches a shoot that admits the client) are the same as for the rules form. Also:
// audit counters per shoot, and that a missing or misordered extraction fails closed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMITTED_BY_EVERY_SHOOT, extractionObjectName } from '../../src/rbac/connect-matcher.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { mentionedShoots, routablyNamedShoots, wouldRefuse } from '../oracle/acl-semantics.js';
import { CLIENTS, OUTSIDER, SPOOFED_EXTRACTION_HEADERS, everyNamedShootRefuses, connectCases, connectExpected, connectMismatches, oracleClient, proxyHeader, type ConnectExpectation } from '../support/conformance-matrix.js';
import { kapi, socket, vpn } from '../support/decide.js';
import { testSeed, type TestShoot } from '../support/test-seed.js';
import { httpConnect } from './clients.js';
import { CONFORMANCE_SHOOTS, DOMAIN, conformanceGatewaySpec } from './conformance-seed.js';
import { CONFORMANCE_ENVOY_VERSIONS, routeRepeatedHeaders, type EnvoyVersion } from './envoy-binary.js';
import { gatewayUpstreams, hcmStatPrefix } from './gardener-gateway.js';
import { DESTINATION_HEADER_REGEX, GARDENER_ERAS } from './gardener-shapes.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';

const MATCHER = { combinedForm: 'matcher' } as const;
const built = testSeed(CONFORMANCE_SHOOTS, { observabilityDomain: DOMAIN, operator: MATCHER });
const GENERATED = allEnvoyFilters(buildSeedEnvoyFilters(built.seed));
const AUDITED_SHOOTS: TestShoot[] = CONFORMANCE_SHOOTS.map((s) => (s.rule ? { ...s, rule: { ...s.rule, mode: 'audit' } } : s));
const audited = testSeed(AUDITED_SHOOTS, { observabilityDomain: DOMAIN, operator: MATCHER });
const ACL_IDS = CONFORMANCE_SHOOTS.filter((s) => s.rule).map((s) => s.id);
// Every ACL shoot admits the seed's node range, and enough shoots share it that each lookup checks
// it once before the shoots' leaves (never requested, the fillers only make that pay off).
const SEED_NODES = '10.250.0.0/16';
const HOISTED_SHOOTS: TestShoot[] = [
  ...CONFORMANCE_SHOOTS.map((s) => (s.rule ? { ...s, always: [...new Set([...(s.always ?? []), SEED_NODES])] } : s)),
  ...Array.from({ length: 30 }, (_, i): TestShoot => ({ id: `shoot--fill--s${i}`, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [`198.18.${i}.0/24`] }, always: [SEED_NODES] })),
];
const hoisted = testSeed(HOISTED_SHOOTS, { observabilityDomain: DOMAIN, operator: MATCHER });

function expectation(era: keyof typeof GARDENER_ERAS, envoyVersion: EnvoyVersion, routeHeader: string, clusters: ReadonlySet<string>, oracle = built.oracle): ConnectExpectation {
  const regex = era === 'v1.139-v1.149' ? DESTINATION_HEADER_REGEX.v1_139 : DESTINATION_HEADER_REGEX.v1_114;
  return { oracle, protectedHeaders: built.seed.operator.protectedHeaders, routeHeader, routeRegex: new RegExp(regex), routeRepeatedHeaders: routeRepeatedHeaders(envoyVersion), clusters, reading: 'routable' };
}

it('the matrix has requests the two readings of "targets S" decide differently (the cases README "Combined filter forms" describes)', () => {
  const e = { oracle: built.oracle, protectedHeaders: built.seed.operator.protectedHeaders };
  const differing = connectCases().filter(({ client, headers }) => connectExpected(client, headers, { ...e, reading: 'mentions' }) !== connectExpected(client, headers, { ...e, reading: 'routable' }));
  expect(differing.length).toBeGreaterThan(20);
  // The matcher form only ever admits more where no routable value names the refusing shoot.
  for (const { client, headers } of differing) {
    expect(connectExpected(client, headers, { ...e, reading: 'routable' })).toBe(true);
    const refusing = mentionedShoots(headers, e.protectedHeaders, e.oracle).filter((s) => wouldRefuse(s, oracleClient(client)));
    expect(refusing.every((s) => !routablyNamedShoots(headers, e.protectedHeaders, e.oracle).includes(s))).toBe(true);
  }
});

describe.each(CONFORMANCE_ENVOY_VERSIONS)('matcher form on Envoy %s', (envoyVersion) => {
  describe.each(['v1.130-v1.138', 'v1.139-v1.149'] as const)('Gardener %s gateway', (era) => {
    let gateway: LiveGateway;
    const clusters = new Set(gatewayUpstreams(conformanceGatewaySpec(era)).map((u) => u.cluster));
    beforeAll(async () => {
      gateway = await startLiveGateway({ ...conformanceGatewaySpec(era), envoyVersion, envoyFilters: GENERATED });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('places every generated patch', () => {
      expect(gateway.placement.patches.filter((p) => p.applications === 0).map((p) => `${p.envoyFilter}#${p.patchIndex}`)).toEqual([]);
    });

    it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))('HTTP CONNECT on %i: every header set from every client is decided as docs/design.md says', async (port, routeHeader) => {
      const e = expectation(era, envoyVersion, routeHeader, clusters);
      const deniedStat = `http.${hcmStatPrefix(port)}.rbac.denied`;
      const before = await gateway.envoy.stat(deniedStat);
      const cases = connectCases();
      expect(await connectMismatches(gateway, port, cases, e)).toEqual([]);
      const expectedDenials = cases.filter(({ client, headers }) => !connectExpected(client, headers, e)).length;
      expect(expectedDenials).toBeGreaterThan(50);
      expect(await gateway.envoy.stat(deniedStat)).toBe(before + expectedDenials);
    });

    it('a client that sends its own target or address headers cannot choose the shoot whose ACL applies, nor the address it is judged by', async () => {
      const target = await gateway.endpoint(8443, 4);
      const connect = async (spoofed: readonly (readonly [string, string])[]) =>
        (await httpConnect({ ...target, proxyHeader: proxyHeader(OUTSIDER), headers: [['X-Gardener-Destination', kapi('shoot--p--foo')], ...spoofed.map(([k, v]) => [k, v] as [string, string])] })).status;
      for (const spoofed of SPOOFED_EXTRACTION_HEADERS) expect(await connect([spoofed]), spoofed[0]).toBe(403);
      expect(await connect(SPOOFED_EXTRACTION_HEADERS)).toBe(403);
    });
  });

  describe('with the ranges every shoot admits checked once before the lookup', () => {
    const era = 'v1.139-v1.149';
    const filters = allEnvoyFilters(buildSeedEnvoyFilters(hoisted.seed));
    let gateway: LiveGateway;
    const clusters = new Set(gatewayUpstreams(conformanceGatewaySpec(era)).map((u) => u.cluster));
    beforeAll(async () => {
      gateway = await startLiveGateway({ ...conformanceGatewaySpec(era), envoyVersion, envoyFilters: filters });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('the shards check the seed nodes once, before the lookup', () => {
      expect(JSON.stringify(filters)).toContain(ADMITTED_BY_EVERY_SHOOT);
    });

    it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))('HTTP CONNECT on %i: every header set from every client is decided as docs/design.md says', async (port, routeHeader) => {
      const e = expectation(era, envoyVersion, routeHeader, clusters, hoisted.oracle);
      const cases = connectCases();
      expect(await connectMismatches(gateway, port, cases, e)).toEqual([]);
      expect(cases.filter(({ client, headers }) => !connectExpected(client, headers, e)).length).toBeGreaterThan(50);
    });
  });

  describe('without its extraction, or with the extraction after the shards, every request naming a shoot is refused (fails closed)', () => {
    const era = 'v1.139-v1.149';
    const withoutExtraction = GENERATED.filter((f) => !f.metadata.name.endsWith('-extract'));
    const misordered = GENERATED.map((f) => (f.metadata.name === extractionObjectName(8443) ? { ...f, spec: { ...f.spec, priority: -10 } } : f));

    it.each([
      ['missing', withoutExtraction],
      ['misordered', misordered],
    ] as const)('extraction %s', async (_label, filters) => {
      expect(filters.length).toBeLessThanOrEqual(GENERATED.length);
      const gateway = await startLiveGateway({ ...conformanceGatewaySpec(era), envoyVersion, envoyFilters: filters });
      try {
        const target = await gateway.endpoint(8443, 4);
        const admitted = proxyHeader(CLIENTS[0]!);
        for (const value of [kapi('shoot--p--foo'), socket('shoot--p--foo-bar'), vpn('shoot--x-bar--a')]) {
          expect((await httpConnect({ ...target, proxyHeader: admitted, headers: [['X-Gardener-Destination', value]] })).status, value).toBe(403);
        }
      } finally {
        await gateway.stop();
      }
    });
  });

  describe('with `matcher` dropped from every RBAC filter (an Istio that decodes the patch leniently), the fallback rules refuse every request naming a shoot (fails closed)', () => {
    const era = 'v1.139-v1.149';
    const withoutMatcher = GENERATED.map((f) => ({
      ...f,
      spec: {
        ...f.spec,
        configPatches: f.spec.configPatches.map((p) => {
          const value = p.patch.value as { readonly typed_config?: Record<string, unknown> };
          if (value.typed_config?.['matcher'] === undefined) return p;
          const { matcher: _dropped, shadow_matcher: _alsoDropped, ...rest } = value.typed_config;
          return { ...p, patch: { ...p.patch, value: { ...value, typed_config: rest } } };
        }),
      },
    }));
    let gateway: LiveGateway;
    const clusters = new Set(gatewayUpstreams(conformanceGatewaySpec(era)).map((u) => u.cluster));
    beforeAll(async () => {
      expect(JSON.stringify(withoutMatcher)).not.toContain('"matcher"');
      gateway = await startLiveGateway({ ...conformanceGatewaySpec(era), envoyVersion, envoyFilters: withoutMatcher });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))('HTTP CONNECT on %i: refused exactly when a protected header names a shoot routably, whoever the client', async (port, routeHeader) => {
      const cases = connectCases();
      const e = { ...expectation(era, envoyVersion, routeHeader, clusters), oracle: everyNamedShootRefuses(cases, built.seed.operator.protectedHeaders) };
      expect(await connectMismatches(gateway, port, cases, e)).toEqual([]);
      // Admitted with matcher, refused without: what an RBAC filter with nothing in it would have let through.
      const fallbackRefusesMore = cases.filter(({ client, headers }) => connectExpected(client, headers, expectation(era, envoyVersion, routeHeader, clusters)) && !connectExpected(client, headers, e));
      expect(fallbackRefusesMore.length).toBeGreaterThan(50);
    });
  });

  it('without the client addresses (the address filter missing), ACL shoots refuse every client, DENY rules too (fails closed); shoots without ACL still pass', async () => {
    const era = 'v1.139-v1.149';
    const withoutAddresses = GENERATED.map((f) =>
      f.metadata.name === extractionObjectName(8443) ? { ...f, spec: { ...f.spec, configPatches: f.spec.configPatches.filter((p) => p.patch.value.name !== 'gardener-acl-connect-address-8443') } } : f,
    );
    expect(JSON.stringify(withoutAddresses)).not.toBe(JSON.stringify(GENERATED));
    const gateway = await startLiveGateway({ ...conformanceGatewaySpec(era), envoyVersion, envoyFilters: withoutAddresses });
    try {
      const target = await gateway.endpoint(8443, 4);
      // Admitted by both ACLs when the address is known: inside foo's ALLOW range, outside bar--a's DENY range.
      const client = proxyHeader(CLIENTS[0]!);
      const status = async (value: string) => (await httpConnect({ ...target, proxyHeader: client, headers: [['X-Gardener-Destination', value]] })).status;
      expect(await status(kapi('shoot--p--foo')), 'ALLOW rule').toBe(403);
      expect(await status(kapi('shoot--bar--a')), 'DENY rule').toBe(403);
      expect(await status(kapi('shoot--p--foo-bar')), 'no ACL').toBe(200);
    } finally {
      await gateway.stop();
    }
  });

  describe('audit mode in the matcher form', () => {
    const era = 'v1.139-v1.149';
    let gateway: LiveGateway;
    const clusters = new Set(gatewayUpstreams(conformanceGatewaySpec(era)).map((u) => u.cluster));
    beforeAll(async () => {
      gateway = await startLiveGateway({ ...conformanceGatewaySpec(era), envoyVersion, envoyFilters: allEnvoyFilters(buildSeedEnvoyFilters(audited.seed)) });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))(
      'CONNECT on %i: everything passes; rbac.policy.<id>.shadow_denied counts, per header filter, what enforce refuses',
      async (port, routeHeader) => {
        const hcm = `http.${hcmStatPrefix(port)}.rbac.`;
        const counters = async () => {
          const stats = await gateway.envoy.stats(`^${hcm.replace(/\./g, '\\.')}policy\\..*\\.shadow_denied$`);
          return new Map(ACL_IDS.map((id) => [id, stats.get(`${hcm}policy.${id}.shadow_denied`) ?? 0]));
        };
        const deniedBefore = await gateway.envoy.stat(`${hcm}denied`);
        const before = await counters();
        const e = expectation(era, envoyVersion, routeHeader, clusters, audited.oracle);
        const cases = connectCases();
        expect(await connectMismatches(gateway, port, cases, e)).toEqual([]);
        expect(await gateway.envoy.stat(`${hcm}denied`)).toBe(deniedBefore);
        // One RBAC filter per protected header: a shoot is counted once for each header whose first value names it routably.
        const expected = new Map(ACL_IDS.map((id) => [id, 0]));
        for (const { client, headers } of cases) {
          for (const header of built.seed.operator.protectedHeaders) {
            for (const s of routablyNamedShoots(headers, [header], built.oracle)) {
              if (wouldRefuse(s, oracleClient(client))) expected.set(s.technicalID, (expected.get(s.technicalID) ?? 0) + 1);
            }
          }
        }
        const after = await counters();
        expect(new Map(ACL_IDS.map((id) => [id, (after.get(id) ?? 0) - (before.get(id) ?? 0)]))).toEqual(expected);
        expect([...expected.values()].every((n) => n > 0)).toBe(true);
      },
    );
  });
});
