// Property tests: over random seeds, rules, clients and header combinations, the generated
// RBAC decides exactly as DESIGN section 3 says (the oracle), on every path.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../../src/acl/cidr.js';
import { buildSeedEnvoyFilters, allEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { admits, connectAdmitted } from '../oracle/acl-semantics.js';
import type { Address } from '../oracle/addresses.js';
import { connectRules, sniChainRules } from '../oracle/placement.js';
import { evalRbac } from '../oracle/rbac-evaluator.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, testSeed, type TestShoot } from '../support/test-seed.js';
import { rulesFormOnly } from '../support/rules-form.js';

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
  fc.tuple(v4Address, fc.integer({ min: 0, max: 32 })).map(([a, len]) => `${formatAddress(4, a)}/${len}`),
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

const headerName = fc.constantFrom('Reversed-VPN', 'X-Gardener-Destination', 'x-gardener-destination', 'REVERSED-VPN', 'X-Other');
const destination = fc
  .tuple(
    fc.constantFrom(...ID_POOL, 'shoot--zz--unknown'),
    fc.constantFrom('vpn', 'vpn-ha', 'kapi', 'socket', 'socket-suffix', 'junk'),
    fc.constantFrom('as-is', 'upper', 'prefixed', 'suffixed'),
  )
  .map(([id, form, variant]) => {
    const value = {
      vpn: `outbound|1194||vpn-seed-server.${id}.svc.cluster.local`,
      'vpn-ha': `outbound|1194||vpn-seed-server-3.${id}.svc.cluster.local`,
      kapi: `outbound|443||kube-apiserver.${id}.svc.cluster.local`,
      socket: `${id}--kube-apiserver-socket`,
      'socket-suffix': `x${id}--kube-apiserver-socket`,
      junk: id,
    }[form];
    if (variant === 'upper') return value.toUpperCase();
    if (variant === 'prefixed') return `outbound|443||kube-apiserver.other.svc.cluster.local,${value}`;
    if (variant === 'suffixed') return `${value},junk`;
    return value;
  });
const headersArb = fc.array(fc.tuple(headerName, destination), { maxLength: 4 });

function buildCase(shoots: { id: string; rule?: TestShoot['rule']; always: string[]; zonal: boolean }[]) {
  return testSeed(
    shoots.map((s) => ({ id: s.id, rule: s.rule, always: s.always, gateway: s.zonal ? ZONAL_GATEWAY : DEFAULT_GATEWAY })),
    { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY] },
  );
}

describe('generated RBAC matches the ACL semantics (DESIGN section 3)', () => {
  it('HTTP CONNECT: every gateway, every protected port, any header combination', () => {
    fc.assert(
      fc.property(shootsArb, headersArb, address, address, (shoots, headers, remote, direct) => {
        const { seed, oracle } = buildCase(shoots);
        const filters = rulesFormOnly(allEnvoyFilters(buildSeedEnvoyFilters(seed)));
        const expected = connectAdmitted(headers, { remote, direct }, seed.operator.protectedHeaders, oracle);
        for (const gateway of seed.gateways) {
          for (const port of seed.operator.protectedPorts) {
            const rules = connectRules(filters, gateway.namespace, port);
            for (const repeatedHeaders of ['individually', 'joined'] as const) {
              const actual = rules.every((r) => evalRbac(r, { remote, direct, headers, repeatedHeaders }));
              expect(actual, `${gateway.namespace}:${port} ${repeatedHeaders} ${JSON.stringify(headers)}`).toBe(expected);
            }
          }
        }
      }),
      { numRuns: 400 },
    );
  });

  it('SNI: each ACL shoot chain admits exactly what its rule admits; other chains carry no filter', () => {
    fc.assert(
      fc.property(shootsArb, address, address, (shoots, remote, direct) => {
        const { seed, oracle } = buildCase(shoots);
        const filters = rulesFormOnly(allEnvoyFilters(buildSeedEnvoyFilters(seed)));
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
        const filters = rulesFormOnly(allEnvoyFilters(buildSeedEnvoyFilters(seed)));
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
