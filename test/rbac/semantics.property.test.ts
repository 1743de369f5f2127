// Property tests: over random seeds, rules, clients and header combinations, the generated
// filters decide exactly as docs/design.md section 3 says (the oracle; with the tunnel hop of the default,
// also its refusal of two VPN servers, docs/operators/revocation.md), on every path, in every form of the
// combined CONNECT filters (each against its own reading of "targets S"), as the oracle's model of
// Envoy 1.37 and 1.40 runs them (test/oracle/envoy-chain-evaluator.ts, calibrated on the real
// Envoys by test/envoy/oracle-vs-envoy.test.ts). The matcher forms also when damaged as Envoy could
// see them (a bucket missing, `matcher` dropped): then every request naming a shoot routably is refused.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../../src/acl/cidr.js';
import { COMBINED_FORMS, type CombinedFormName } from '../../src/config/operator-config.js';
import { buildSeedEnvoyFilters, allEnvoyFilters, tunnelHopServed, type AnyGeneratedEnvoyFilter } from '../../src/rbac/seed-envoy-filters.js';
import { admits, codecTrimmed, connectAdmitted, routedTarget } from '../oracle/acl-semantics.js';
import type { Address } from '../oracle/addresses.js';
import { ENVOY_BEHAVIOURS, EnvoyConnectChain, type ChainRun } from '../oracle/envoy-chain-evaluator.js';
import { sniChainRules } from '../oracle/placement.js';
import { evalRbac } from '../oracle/rbac-evaluator.js';
import { readingOf } from '../support/decide.js';
import { affectedPorts, definesEcdsResources, hasMatcher, nameOf, namespaceOf, withoutMatcher } from '../support/damaged-objects.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, testSeed, type TestShoot } from '../support/test-seed.js';

// IDs chosen to collide under naive matching: prefixes, project suffixes, a legacy ID whose
// socket form is a substring of another shoot's. (A legacy and a current ID of the same
// project and name cannot coexist: they are the same shoot.)
const ID_POOL = [
  'shoot--p--foo',
  'shoot--p--foo-bar',
  'shoot--x-p--foo',
  'shoot-q--foo',
  'shoot--xshoot-q--foo',
  'shoot--bar--a',
  'shoot--x-bar--a',
  'shoot--q--z',
];

const V4_BASES = [0x0a000000n, 0x0a010000n, 0xc0a80100n, 0xcb007100n, 0n];
const V6_BASES = [0x20010db8n << 96n, (0x20010db8n << 96n) | (1n << 80n), 0n, 0xffffn << 32n];

const v4Address = fc.tuple(fc.constantFrom(...V4_BASES), fc.bigInt({ min: 0n, max: 0x1ffffn })).map(([b, low]) => (b + low) & 0xffffffffn);
const v6Address = fc.tuple(fc.constantFrom(...V6_BASES), fc.bigInt({ min: 0n, max: 0x1ffffn })).map(([b, low]) => b + low);

const address: fc.Arbitrary<Address> = fc.oneof(
  v4Address.map((value) => ({ family: 4 as const, value })),
  v4Address.map((value) => ({ family: 6 as const, value: (0xffffn << 32n) | value })), // IPv4-mapped
  v6Address.map((value) => ({ family: 6 as const, value })),
);

const cidrText = fc.oneof(
  // /0 often: a DENY of everything ties with the matcher forms' "any other address" ranges, where the first listed must win.
  fc.tuple(v4Address, fc.oneof(fc.integer({ min: 0, max: 32 }), fc.constantFrom(0, 8, 24, 32))).map(([a, len]) => `${formatAddress(4, a)}/${len}`),
  fc.tuple(v6Address, fc.oneof(fc.integer({ min: 0, max: 128 }), fc.constantFrom(0, 64, 96, 104, 120))).map(([a, len]) => `${formatAddress(6, a)}/${len}`),
);

const ruleArb = fc.record({
  action: fc.constantFrom('ALLOW', 'DENY', 'allow', 'Deny'),
  type: fc.constantFrom('remote_ip', 'direct_remote_ip', 'source_ip'),
  cidrs: fc.array(cidrText, { minLength: 1, maxLength: 4 }),
  // Audit refuses nothing on any path; the oracle says so.
  mode: fc.constantFrom(undefined, undefined, 'enforce', 'audit', 'Audit'),
});

const shootsArb = fc.uniqueArray(fc.constantFrom(...ID_POOL), { minLength: 1, maxLength: ID_POOL.length }).chain((ids) =>
  fc.tuple(...ids.map((id) =>
    fc.record({
      id: fc.constant(id),
      rule: fc.option(ruleArb, { nil: undefined, freq: 4 }),
      always: fc.array(cidrText, { maxLength: 3 }),
      zonal: fc.boolean(),
    }),
  )),
);

// Protected headers in any case, an unprotected one, and the headers the matcher forms' extraction
// sets (a client sending them must not choose the shoot or the address it is judged by).
const headerName = fc.constantFrom(
  'Reversed-VPN',
  'X-Gardener-Destination',
  'x-gardener-destination',
  'REVERSED-VPN',
  'X-Other',
  'x-gardener-acl-target',
  'x-gardener-acl-target-x-gardener-destination',
  'x-gardener-acl-target-reversed-vpn',
  'x-gardener-acl-remote-address',
  'x-gardener-acl-direct-address',
);
const destination = fc
  .tuple(
    fc.constantFrom(...ID_POOL, 'shoot--zz--unknown'),
    fc.constantFrom('vpn', 'vpn-ha', 'kapi', 'socket', 'socket-suffix', 'junk', 'key', 'address'),
    fc.constantFrom('as-is', 'as-is', 'upper', 'prefixed', 'suffixed', 'spaced', 'not-utf8-tail', 'utf8-tail', 'empty'),
  )
  .map(([id, form, variant]) => {
    const value = {
      vpn: `outbound|1194||vpn-seed-server.${id}.svc.cluster.local`,
      'vpn-ha': `outbound|1194||vpn-seed-server-3.${id}.svc.cluster.local`,
      kapi: `outbound|443||kube-apiserver.${id}.svc.cluster.local`,
      socket: `${id}--kube-apiserver-socket`,
      'socket-suffix': `x${id}--kube-apiserver-socket`,
      junk: id,
      // What the extraction writes: a target key, an address every shoot admits.
      key: `=${id}`,
      address: '10.250.1.1',
    }[form];
    if (variant === 'upper') return value.toUpperCase();
    if (variant === 'prefixed') return `outbound|443||kube-apiserver.other.svc.cluster.local,${value}`;
    if (variant === 'suffixed') return `${value},junk`;
    if (variant === 'spaced') return ` \t${value} `;
    // Bytes after the value (the client writes latin1): not UTF-8, and UTF-8 (é).
    if (variant === 'not-utf8-tail') return `${value}\xff`;
    if (variant === 'utf8-tail') return `${value}\xc3\xa9`;
    if (variant === 'empty') return '';
    return value;
  });
const headersArb = fc.array(fc.tuple(headerName, destination), { maxLength: 5 });

type ShootCase = { id: string; rule?: TestShoot['rule']; always: string[]; zonal: boolean };

function buildCase(shoots: readonly ShootCase[], form?: CombinedFormName) {
  return testSeed(
    shoots.map((s) => ({ id: s.id, rule: s.rule, always: s.always, gateway: s.zonal ? ZONAL_GATEWAY : DEFAULT_GATEWAY })),
    { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], ...(form === undefined ? {} : { operator: { combinedForm: form } }) },
  );
}

/** Every CONNECT chain of the seed: per gateway namespace, protected port and supported Envoy. */
function chainsOf(objects: readonly AnyGeneratedEnvoyFilter[], namespaces: readonly string[], ports: readonly number[]) {
  return namespaces.flatMap((namespace) =>
    ports.flatMap((port) => ENVOY_BEHAVIOURS.map((behaviour) => ({ namespace, port, chain: new EnvoyConnectChain(objects, { namespace, port }, behaviour) }))),
  );
}

/**
 * The shoots a request names routably in a protected header, whether or not the seed knows them:
 * namespaces shaped like a technical ID (`shoot-…`); another namespace (garden, `xshoot--p--a`) is
 * no shoot's control plane.
 */
function everyRoutablyNamedShoot(headers: readonly (readonly [string, string])[], protectedHeaders: readonly string[]): string[] {
  return protectedHeaders.flatMap((name) => {
    const values = headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => codecTrimmed(v));
    const id = values.length > 0 ? routedTarget(values.join(',')) : undefined;
    return id?.startsWith('shoot-') ? [id] : [];
  });
}

const MATCHER_FORMS = COMBINED_FORMS.filter((form) => form !== 'rules');

/**
 * What the continuity checker relies on to ask only one Envoy: a run the model calls version-neutral
 * (no repeated header, only ASCII) gets the same outcome on every supported Envoy.
 */
function expectNeutralRunsAgree(runs: readonly { namespace: string; port: number; chain: EnvoyConnectChain; run: ChainRun }[]): void {
  for (const { namespace, port, chain, run } of runs) {
    if (!run.versionNeutral) continue;
    for (const other of runs.filter((r) => r.namespace === namespace && r.port === port && r.chain !== chain)) {
      expect(other.run.outcome.kind, `${namespace}:${port}: neutral on Envoy ${chain.behaviour.version} (${run.outcome.kind}), not on ${other.chain.behaviour.version}`).toBe(run.outcome.kind);
    }
  }
}

describe.each(COMBINED_FORMS)('combinedForm %s: the generated CONNECT filters decide as docs/design.md section 3 reads "targets S" for the form', (form) => {
  it('every gateway, every protected port, Envoy 1.37 and 1.40, any header combination, adversarial headers and bytes', () => {
    fc.assert(
      fc.property(shootsArb, headersArb, address, address, (shoots, headers, remote, direct) => {
        const { seed, oracle } = buildCase(shoots, form);
        expect(seed.operator.combinedForm).toBe(form);
        const objects = allEnvoyFilters(buildSeedEnvoyFilters(seed));
        const expected = connectAdmitted(headers, { remote, direct }, seed.operator.protectedHeaders, oracle, readingOf(form), tunnelHopServed(seed));
        const runs = chainsOf(objects, seed.gateways.map((g) => g.namespace), seed.operator.protectedPorts).map(({ namespace, port, chain }) => ({ namespace, port, chain, run: chain.run({ headers, remote, direct }) }));
        for (const { namespace, port, chain, run } of runs) {
          expect(run.outcome.kind === 'passed', `${namespace}:${port} Envoy ${chain.behaviour.version} ${JSON.stringify(headers)}: ${JSON.stringify(run.outcome)}`).toBe(expected);
        }
        expectNeutralRunsAgree(runs);
      }),
      { numRuns: 250 },
    );
  });
});

type Damage = 'matcher dropped everywhere' | 'matcher dropped in one object' | 'a bucket missing';

describe.each(MATCHER_FORMS)('combinedForm %s, damaged as Envoy could see it', (form) => {
  const damages: readonly Damage[] = form === 'ecds' ? ['matcher dropped everywhere', 'matcher dropped in one object', 'a bucket missing'] : ['matcher dropped everywhere', 'matcher dropped in one object'];

  it('where the damage reaches, every request naming a shoot routably (with or without ACL, known or not) is refused and every other one passes; elsewhere nothing changes', () => {
    fc.assert(
      fc.property(shootsArb, headersArb, address, address, fc.constantFrom(...damages), fc.nat(), (shoots, headers, remote, direct, damage, pick) => {
        const { seed, oracle } = buildCase(shoots, form);
        const objects = allEnvoyFilters(buildSeedEnvoyFilters(seed));
        const candidates = objects.filter(damage === 'a bucket missing' ? definesEcdsResources : hasMatcher);
        // The matcher form has no objects without an ACL shoot: nothing to damage.
        fc.pre(candidates.length > 0);
        const victim = candidates[pick % candidates.length] as AnyGeneratedEnvoyFilter;
        const damaged =
          damage === 'a bucket missing'
            ? objects.filter((o) => o !== victim)
            : objects.map((o) => (damage === 'matcher dropped everywhere' || o === victim ? withoutMatcher(o) : o));
        const reached = (namespace: string, port: number): boolean =>
          damage === 'matcher dropped everywhere' ? objects.some((o) => hasMatcher(o) && namespaceOf(o) === namespace && affectedPorts(o, seed.operator.protectedPorts).includes(port)) : namespaceOf(victim) === namespace && affectedPorts(victim, seed.operator.protectedPorts).includes(port);
        const { protectedHeaders } = seed.operator;
        const intact = connectAdmitted(headers, { remote, direct }, protectedHeaders, oracle, 'routable', tunnelHopServed(seed));
        const namesNone = everyRoutablyNamedShoot(headers, protectedHeaders).length === 0;
        const runs = chainsOf(damaged, seed.gateways.map((g) => g.namespace), seed.operator.protectedPorts).map(({ namespace, port, chain }) => ({ namespace, port, chain, run: chain.run({ headers, remote, direct }) }));
        for (const { namespace, port, chain, run } of runs) {
          const expected = reached(namespace, port) ? namesNone : intact;
          expect(run.outcome.kind === 'passed', `${damage} (${nameOf(victim)}) ${namespace}:${port} Envoy ${chain.behaviour.version} ${JSON.stringify(headers)}: ${JSON.stringify(run.outcome)}`).toBe(expected);
        }
        expectNeutralRunsAgree(runs);
      }),
      { numRuns: 150 },
    );
  });
});

describe('the shoots’ own SNI filters match the ACL semantics (docs/design.md section 3), whatever the combined form', () => {
  it('SNI: each ACL shoot chain admits exactly what its rule admits; other chains carry no filter', () => {
    fc.assert(
      fc.property(shootsArb, address, address, (shoots, remote, direct) => {
        const { seed, oracle } = buildCase(shoots);
        const filters = allEnvoyFilters(buildSeedEnvoyFilters(seed));
        for (const shoot of shoots) {
          const gateway = shoot.zonal ? ZONAL_GATEWAY : DEFAULT_GATEWAY;
          const rules = sniChainRules(filters, gateway.namespace, seed.operator.sniPort, [`api.${shoot.id}.example.com`]);
          const o = oracle.find((x) => x.technicalID === shoot.id);
          if (!o?.rule) expect(rules).toEqual([]);
          const actual = rules.every((r) => evalRbac(r, { remote, direct, sni: `api.${shoot.id}.example.com` }));
          expect(actual).toBe(o ? admits(o, { remote, direct }) : true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('observability wildcard chain: a shoot’s filter restricts only its own hosts', () => {
    const domain = 'ingress.seed.example.com';
    fc.assert(
      fc.property(shootsArb, fc.constantFrom(...ID_POOL), fc.constantFrom('p', 'gu', 'api', 'x-p', 'otc'), address, (shoots, target, prefix, remote) => {
        const { seed, oracle } = testSeed(shoots.map((s) => ({ id: s.id, rule: s.rule, always: s.always })), { observabilityDomain: domain });
        const filters = allEnvoyFilters(buildSeedEnvoyFilters(seed));
        const short = target.replace(/^shoot--?/, '');
        const sni = `${prefix}-${short}.${domain}`;
        const rules = sniChainRules(filters, DEFAULT_GATEWAY.namespace, seed.operator.sniPort, [`*.${domain}`]);
        const actual = rules.every((r) => evalRbac(r, { remote, direct: remote, sni }));
        // The host belongs to `target` only when the prefix has no hyphen (Gardener's prefixes never do).
        const owner = prefix.includes('-') ? undefined : oracle.find((o) => o.technicalID === target);
        expect(actual).toBe(owner ? admits(owner, { remote, direct: remote }) : true);
      }),
      { numRuns: 300 },
    );
  });
});
