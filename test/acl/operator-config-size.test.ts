// The operator configuration never admits values under which one shoot at the CIDR limit could
// not fit one combined CONNECT filter: such a shoot would be left out of the CONNECT protection.
import { describe, expect, it } from 'vitest';
import { parseOperatorConfig, type OperatorConfig } from '../../src/acl/operator-config.js';
import { planCombinedConnectFilters } from '../../src/rbac/combined-connect-filters.js';
import { cidr, rule } from '../support/test-seed.js';

const errors = (raw: unknown) => {
  const parsed = parseOperatorConfig(raw);
  return parsed.ok ? [] : parsed.errors.map((e) => `${e.path}: ${e.message}`);
};
const config = (raw: unknown): OperatorConfig => {
  const parsed = parseOperatorConfig(raw);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return parsed.config;
};

describe('operator configuration: one maximal shoot fits one combined filter', () => {
  it('point 5: rejects maxCIDRs 1000 with maxObjectBytes 16 KiB, naming both values and the fix', () => {
    expect(errors({ maxCIDRs: 1000, maxObjectBytes: 16384 })).toEqual([
      'maxCIDRs: maxCIDRs 1000 does not fit maxObjectBytes 16384: one shoot with 1000 CIDRs (plus 0 additionalAllowedCIDRs and 16 ranges of its own) needs up to 159458 bytes, ' +
        'more than the 12288 bytes one combined CONNECT filter holds; lower maxCIDRs to at most 56, or raise maxObjectBytes to at least 163554',
    ]);
  });

  it('point 5: the suggested values are exactly the limits', () => {
    expect(errors({ maxCIDRs: 56, maxObjectBytes: 16384 })).toEqual([]);
    expect(errors({ maxCIDRs: 57, maxObjectBytes: 16384 })).toHaveLength(1);
    expect(errors({ maxCIDRs: 1000, maxObjectBytes: 163554 })).toEqual([]);
    expect(errors({ maxCIDRs: 1000, maxObjectBytes: 163553 })).toHaveLength(1);
    // The defaults fit even the smallest object size.
    expect(errors({ maxObjectBytes: 16384 })).toEqual([]);
    expect(errors({ maxCIDRs: 1000 })).toEqual([]);
  });

  it('point 5: bounds additionalAllowedCIDRs, which every shoot policy repeats', () => {
    const many = Array.from({ length: 101 }, (_, i) => `192.0.${i}.0/24`);
    expect(errors({ additionalAllowedCIDRs: many })).toEqual([
      "additionalAllowedCIDRs: lists more than 100 ranges; every one is repeated in every shoot's policy, so merge them into wider ranges",
    ]);
    const hundred = many.slice(0, 100);
    expect(errors({ additionalAllowedCIDRs: hundred })).toEqual([]);
    // No maxCIDRs helps when the operator's own ranges already fill the object.
    expect(errors({ additionalAllowedCIDRs: hundred, maxObjectBytes: 16384 })).toEqual([
      'maxCIDRs: maxCIDRs 50 does not fit maxObjectBytes 16384: one shoot with 50 CIDRs (plus 100 additionalAllowedCIDRs and 16 ranges of its own) needs up to 24438 bytes, ' +
        'more than the 12288 bytes one combined CONNECT filter holds; raise maxObjectBytes to at least 28534, or list fewer additionalAllowedCIDRs',
    ]);
  });

  it('point 5: an accepted configuration places a real shoot at the CIDR limit, in either address family and action', () => {
    const operator = config({ maxCIDRs: 56, maxObjectBytes: 16384, protectedHeaders: ['Reversed-VPN', 'X-Gardener-Destination'] });
    const always = ['10.250.0.0/16', '100.96.0.0/11', '10.180.0.0/16', ...Array.from({ length: 13 }, (_, i) => `198.51.${100 + i}.199/32`)].map(cidr);
    const v4 = Array.from({ length: 56 }, (_, i) => `203.${100 + i}.113.255/32`);
    const v6 = Array.from({ length: 56 }, (_, i) => `2001:db8:ffff:ffff:ffff:ffff:ffff:${(0xf000 + i).toString(16)}/128`);
    for (const cidrs of [v4, v6]) {
      for (const action of ['ALLOW', 'DENY']) {
        const shoot = { technicalID: 'shoot--abcdefghij--abcdefghijklmnopqrstu', rule: rule(action, 'direct_remote_ip', cidrs), alwaysAllowed: always };
        const plan = planCombinedConnectFilters({ operator, gateways: [{ namespace: 'istio-ingress', selector: { istio: 'ingressgateway' } }], shoots: [shoot] });
        expect(plan.unplaced).toEqual(new Map());
        for (const f of plan.filters) expect(JSON.stringify(f).length).toBeLessThanOrEqual(operator.maxObjectBytes);
      }
    }
  });
});

describe('operator configuration: combinedForm and ecdsBuckets', () => {
  it('a bad combinedForm or ecdsBuckets is refused with the field, the value and the fix', () => {
    expect(errors({ combinedForm: 'ecdss' })).toEqual(['combinedForm: must be rules, matcher or ecds']);
    expect(errors({ combinedForm: 'ecds', ecdsBuckets: 0 })).toEqual(['ecdsBuckets: must be at least 1: every listener names every bucket, and jump hashing into 0 buckets places no shoot']);
    expect(errors({ combinedForm: 'ecds', ecdsBuckets: 1000 })).toEqual([
      'ecdsBuckets: must be at most 256: every bucket adds one HTTP filter per protected header to every CONNECT request; raise maxObjectBytes instead',
    ]);
    expect(errors({ combinedForm: 'ecds', ecdsBuckets: 2.5 })).toEqual(['ecdsBuckets: must be a whole number from 1 to 256, such as 32']);
    expect(config({ combinedForm: 'ecds' }).ecdsBuckets).toBe(32);
  });
});

describe('operator configuration: protected headers', () => {
  it('refuses a header of the prefix the matcher forms set themselves, naming the value and the fix', () => {
    expect(errors({ protectedHeaders: ['X-Gardener-Destination', 'X-Gardener-ACL-Remote-Address'] })).toEqual([
      'protectedHeaders[1]: "X-Gardener-ACL-Remote-Address" starts with x-gardener-acl-, which the extension reserves for the headers it sets; name a header a route takes the cluster from, such as X-Gardener-Destination',
    ]);
    expect(errors({ protectedHeaders: ['X-Gardener-Destination', 'X-Gardener-Aclx'] })).toEqual([]);
  });
});
