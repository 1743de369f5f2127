// The continuity checker's judgement of stored objects (protection-oracle.ts), without an API
// server: every form's objects as the generator writes them are protection, several forms stored
// at once (a form switch in flight) too; and what a stored object holds decides, not whether a
// shoot's name appears in it: a looser leaf, a missing bucket or listener part, a dropped extraction,
// a lenient decoder's dropped `matcher`, a missing rules shard each show as the gap they are.
import { describe, expect, it } from 'vitest';
import { COMBINED_FORMS, type CombinedFormName } from '../../src/config/operator-config.js';
import type { SeedAcl } from '../../src/acl/model.js';
import { buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { ecdsBucketObjectName, ecdsBucketOf, ecdsListenerObjectName } from '../../src/rbac/connect-matcher-ecds.js';
import { extractionObjectName } from '../../src/rbac/connect-matcher.js';
import { withoutMatcher } from '../support/damaged-objects.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, rule, testSeed, type TestShoot } from '../support/test-seed.js';
import { cidrs, protectionGaps, type ShootExpectation, type StoredState, type Topology } from './protection-oracle.js';

const A = 'shoot--p--a';
const B = 'shoot--p--b';
const NODES = ['10.250.0.0/16'];
const A_RULE = { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } as const;
const A_LOOSER = { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '192.0.2.0/24'] } as const;
const B_RULE = { action: 'DENY', type: 'remote_ip', cidrs: ['198.51.100.0/24'] } as const;
const shoots = (a: TestShoot['rule'] = A_RULE): TestShoot[] => [
  { id: A, rule: a, always: NODES },
  { id: B, rule: B_RULE, always: NODES, gateway: ZONAL_GATEWAY },
];
const TOPOLOGY: Topology = { gateways: [DEFAULT_GATEWAY.namespace, ZONAL_GATEWAY.namespace], connectPorts: [8132, 8443], sniPort: 9443 };
const EXPECTED: ShootExpectation[] = [
  { technicalID: A, rules: [rule(A_RULE.action, A_RULE.type, A_RULE.cidrs)], alwaysAllowed: cidrs(NODES), sniGateways: [DEFAULT_GATEWAY.namespace] },
  { technicalID: B, rules: [rule(B_RULE.action, B_RULE.type, B_RULE.cidrs)], alwaysAllowed: cidrs(NODES), sniGateways: [ZONAL_GATEWAY.namespace] },
];

function seedIn(form: CombinedFormName, a?: TestShoot['rule']): SeedAcl {
  return testSeed(shoots(a), { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator: { combinedForm: form, ecdsBuckets: 4 } }).seed;
}

function stored(form: CombinedFormName, a?: TestShoot['rule']): StoredState & { combined: unknown[] } {
  const built = buildSeedEnvoyFilters(seedIn(form, a));
  return { combined: [...built.combined], perShoot: built.perShoot };
}

const named = (name: string, namespace = DEFAULT_GATEWAY.namespace) => (o: unknown): boolean => {
  const metadata = (o as { metadata: { name: string; namespace: string } }).metadata;
  return metadata.name === name && metadata.namespace === namespace;
};

describe.each(COMBINED_FORMS)('combinedForm %s', (form) => {
  it('the objects as written protect every shoot on every path; without them every CONNECT path is open', () => {
    expect(protectionGaps(stored(form), EXPECTED, TOPOLOGY)).toEqual([]);
    const gaps = protectionGaps({ ...stored(form), combined: [] }, EXPECTED, TOPOLOGY);
    for (const id of [A, B]) for (const ns of TOPOLOGY.gateways) for (const port of TOPOLOGY.connectPorts) expect(gaps.join('\n')).toContain(`${id} CONNECT ${ns}:${port} x-gardener-destination: open`);
  });

  it('a stored leaf looser than the rule is open, though the shoot is named in the objects', () => {
    const looser = stored(form, A_LOOSER);
    expect(JSON.stringify(looser.combined)).toContain(A);
    const gaps = protectionGaps(looser, EXPECTED, TOPOLOGY);
    expect(gaps).toContain(`${A} CONNECT ${DEFAULT_GATEWAY.namespace}:8443 x-gardener-destination: open (admits 192.0.2.77)`);
    expect(gaps.filter((g) => !g.includes('admits 192.0.2.77'))).toEqual([]);
  });

  it('both forms stored at once (a switch in flight) still protect, and a looser leaf in either is open', () => {
    const other = form === 'ecds' ? 'rules' : 'ecds';
    const both = { ...stored(form), combined: [...stored(form).combined, ...stored(other).combined] };
    expect(protectionGaps(both, EXPECTED, TOPOLOGY)).toEqual([]);
    // Every stored object is in the chain: the stricter of two disagreeing forms decides, so the looser one shows only where it is alone.
    const looserNew = { ...stored(form), combined: [...stored(form).combined, ...stored(other, A_LOOSER).combined] };
    expect(protectionGaps(looserNew, EXPECTED, TOPOLOGY)).toEqual([]);
    expect(protectionGaps({ ...looserNew, combined: stored(other, A_LOOSER).combined }, EXPECTED, TOPOLOGY).length).toBeGreaterThan(0);
  });
});

describe('what each form’s objects hold decides', () => {
  it('ecds: a missing bucket cuts its shoot off (its default refuses everyone, the shoot’s nodes too); the other shoots keep their ACLs', () => {
    const state = stored('ecds');
    const bucket = ecdsBucketObjectName(ecdsBucketOf(A, 4));
    const gaps = protectionGaps({ ...state, combined: state.combined.filter((o) => !named(bucket)(o)) }, EXPECTED, TOPOLOGY);
    expect(gaps).toContain(`${A} CONNECT ${DEFAULT_GATEWAY.namespace}:8443 x-gardener-destination: cut off (refuses 10.250.0.0)`);
    expect(gaps.every((g) => g.includes(`CONNECT ${DEFAULT_GATEWAY.namespace}:`) && g.includes('cut off'))).toBe(true);
  });

  it('ecds: a missing listener part leaves its port open; a bucket named twice with different contents cannot be judged', () => {
    const state = stored('ecds');
    const gaps = protectionGaps({ ...state, combined: state.combined.filter((o) => !named(ecdsListenerObjectName(8443))(o)) }, EXPECTED, TOPOLOGY);
    expect(gaps).toContain(`${A} CONNECT ${DEFAULT_GATEWAY.namespace}:8443 x-gardener-destination: open (admits 100.64.0.77)`);
    expect(gaps.some((g) => g.includes(':8132'))).toBe(false);
    const bucket = state.combined.find(named(ecdsBucketObjectName(ecdsBucketOf(A, 4)))) as { metadata: object };
    const copy = withoutMatcher({ ...bucket, metadata: { ...bucket.metadata, name: 'acl-connect-copy' } });
    expect(protectionGaps({ ...state, combined: [...state.combined, copy] }, EXPECTED, TOPOLOGY).join('\n')).toMatch(/cannot be evaluated \(.*different ECDS resources/);
  });

  it.each(['matcher', 'ecds'] as const)('%s: `matcher` dropped by a lenient decoder cuts shoots off (the fallback refuses every request naming them), never opens', (form) => {
    const state = stored(form);
    const gaps = protectionGaps({ ...state, combined: state.combined.map(withoutMatcher) }, EXPECTED, TOPOLOGY);
    expect(gaps.length).toBeGreaterThan(0);
    expect(gaps.filter((g) => !g.includes('cut off'))).toEqual([]);
  });

  it('matcher: without the extraction every request carrying a protected header is refused (cut off, not open)', () => {
    const state = stored('matcher');
    const gaps = protectionGaps({ ...state, combined: state.combined.filter((o) => !named(extractionObjectName(8132))(o)) }, EXPECTED, TOPOLOGY);
    expect(gaps).toContain(`${A} CONNECT ${DEFAULT_GATEWAY.namespace}:8132 reversed-vpn: cut off (refuses 10.250.0.0)`);
    expect(gaps.filter((g) => !g.includes('cut off') || !g.includes(':8132'))).toEqual([]);
  });

  it('rules: a missing shard on one gateway is open there only', () => {
    const state = stored('rules');
    const gaps = protectionGaps({ ...state, combined: state.combined.filter((o) => !named('acl-connect-8443-000', ZONAL_GATEWAY.namespace)(o)) }, EXPECTED, TOPOLOGY);
    expect(gaps).toContain(`${B} CONNECT ${ZONAL_GATEWAY.namespace}:8443 x-gardener-destination: open (admits 198.51.100.0)`);
    expect(gaps.filter((g) => !g.includes(`${ZONAL_GATEWAY.namespace}:8443`))).toEqual([]);
  });
});
