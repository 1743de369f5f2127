// The operator configuration never admits values under which one shoot at the CIDR limit could
// not fit one combined CONNECT filter: such a shoot would be left out of the CONNECT protection.
import { describe, expect, it } from 'vitest';
import { MAX_LISTENER_PART_BYTES, parseOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import { buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
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

// Per form: the default (ecds buckets hold each leaf once) and the rules form, whose DENY policies
// are larger (an operator who chooses it gets its own limits).
const LIMITS = [
  { form: 'ecds', needs: 80536, holds: 8721, fittingCidrs: 79, fittingBytes: 88199, withHundred: { needs: 11226, fittingCidrs: 17, fittingBytes: 18889 } },
  { form: 'rules', needs: 159458, holds: 12288, fittingCidrs: 56, fittingBytes: 163554, withHundred: { needs: 24438, fittingCidrs: 0, fittingBytes: 28534 } },
] as const;

describe.each(LIMITS)('operator configuration: one maximal shoot fits one combined filter (combinedForm $form)', (l) => {
  const form = l.form === 'ecds' ? {} : { combinedForm: l.form };
  it('point 5: rejects maxCIDRs 1000 with maxObjectBytes 16 KiB, naming both values and the fix', () => {
    expect(errors({ ...form, maxCIDRs: 1000, maxObjectBytes: 16384 })).toEqual([
      `maxCIDRs: maxCIDRs 1000 does not fit maxObjectBytes 16384: one shoot with 1000 CIDRs (plus 0 additionalAllowedCIDRs and 16 ranges of its own) needs up to ${l.needs} bytes, ` +
        `more than the ${l.holds} bytes one combined CONNECT filter holds; lower maxCIDRs to at most ${l.fittingCidrs}, or raise maxObjectBytes to at least ${l.fittingBytes}`,
    ]);
  });

  it('point 5: the suggested values are exactly the limits', () => {
    expect(errors({ ...form, maxCIDRs: l.fittingCidrs, maxObjectBytes: 16384 })).toEqual([]);
    expect(errors({ ...form, maxCIDRs: l.fittingCidrs + 1, maxObjectBytes: 16384 })).toHaveLength(1);
    expect(errors({ ...form, maxCIDRs: 1000, maxObjectBytes: l.fittingBytes })).toEqual([]);
    expect(errors({ ...form, maxCIDRs: 1000, maxObjectBytes: l.fittingBytes - 1 })).toHaveLength(1);
    // The defaults fit even the smallest object size.
    expect(errors({ ...form, maxObjectBytes: 16384 })).toEqual([]);
    expect(errors({ ...form, maxCIDRs: 1000 })).toEqual([]);
  });

  it('point 5: bounds additionalAllowedCIDRs, which every shoot policy repeats', () => {
    const many = Array.from({ length: 101 }, (_, i) => `192.0.${i}.0/24`);
    expect(errors({ ...form, additionalAllowedCIDRs: many })).toEqual([
      "additionalAllowedCIDRs: lists more than 100 ranges; every one is repeated in every shoot's policy, so merge them into wider ranges",
    ]);
    const hundred = many.slice(0, 100);
    expect(errors({ ...form, additionalAllowedCIDRs: hundred })).toEqual([]);
    const fixes = [...(l.withHundred.fittingCidrs > 0 ? [`lower maxCIDRs to at most ${l.withHundred.fittingCidrs}`] : []), `raise maxObjectBytes to at least ${l.withHundred.fittingBytes}`, 'list fewer additionalAllowedCIDRs'];
    expect(errors({ ...form, additionalAllowedCIDRs: hundred, maxObjectBytes: 16384 })).toEqual([
      `maxCIDRs: maxCIDRs 50 does not fit maxObjectBytes 16384: one shoot with 50 CIDRs (plus 100 additionalAllowedCIDRs and 16 ranges of its own) needs up to ${l.withHundred.needs} bytes, ` +
        `more than the ${l.holds} bytes one combined CONNECT filter holds; ${fixes.join(', or ')}`,
    ]);
  });

  it('point 5: an accepted configuration places a real shoot at the CIDR limit, in either address family and action', () => {
    const operator = config({ ...form, maxCIDRs: l.fittingCidrs, maxObjectBytes: 16384, protectedHeaders: ['Reversed-VPN', 'X-Gardener-Destination'] });
    const always = ['10.250.0.0/16', '100.96.0.0/11', '10.180.0.0/16', ...Array.from({ length: 13 }, (_, i) => `198.51.${100 + i}.199/32`)].map(cidr);
    const v4 = Array.from({ length: l.fittingCidrs }, (_, i) => `203.${100 + i}.113.255/32`);
    const v6 = Array.from({ length: l.fittingCidrs }, (_, i) => `2001:db8:ffff:ffff:ffff:ffff:ffff:${(0xf000 + i).toString(16)}/128`);
    const gateways = [{ namespace: 'istio-ingress', selector: { istio: 'ingressgateway' } }];
    for (const cidrs of [v4, v6]) {
      for (const action of ['ALLOW', 'DENY']) {
        const shoot = { technicalID: 'shoot--abcdefghij--abcdefghijklmnopqrstu', rule: rule(action, 'direct_remote_ip', cidrs), alwaysAllowed: always, legacyProxyAllowed: [], sniChains: [] };
        const objects = buildSeedEnvoyFilters({ operator, gateways, observabilityWildcards: [], shoots: [shoot] }).combined;
        expect(objects.some((f) => JSON.stringify(f).includes(shoot.technicalID))).toBe(true);
        // The ECDS listener parts are fixed scaffolding, bounded by what one object may take (checked below).
        for (const f of objects) expect(JSON.stringify(f).length, f.metadata.name).toBeLessThanOrEqual(f.metadata.name.endsWith('-ecds') ? MAX_LISTENER_PART_BYTES : operator.maxObjectBytes);
      }
    }
  });
});

describe('operator configuration: combinedForm and ecdsBuckets', () => {
  it('ECDS listener parts name every bucket once per header: a count and header list they could not hold in one object is refused with the fix', () => {
    const headers = Array.from({ length: 8 }, (_, i) => `X-Route-${i}`);
    expect(errors({ ecdsBuckets: 256, protectedHeaders: headers })).toEqual([
      expect.stringMatching(/^ecdsBuckets: ecdsBuckets 256 with 8 protectedHeaders needs ECDS listener parts of about \d+ bytes \(each names every bucket once per header\), more than the 1048576 bytes one object may take; lower ecdsBuckets \(and raise maxObjectBytes to keep the capacity\) or list fewer protectedHeaders$/),
    ]);
    expect(errors({ ecdsBuckets: 256, protectedHeaders: headers.slice(0, 4) })).toEqual([]);
    expect(errors({ combinedForm: 'rules', ecdsBuckets: 256, protectedHeaders: headers })).toEqual([]);
  });

  it('numbers out of range are refused in words that name the limit and why, not in a schema library’s', () => {
    expect(errors({ maxCIDRs: 5000 })).toEqual(['maxCIDRs: must be at most 1000: one shoot at the limit must fit one combined CONNECT filter; merge ranges instead']);
    expect(errors({ maxCIDRs: 'fifty' })).toEqual(['maxCIDRs: must be a number from 1 to 1000, such as 50']);
    expect(errors({ maxObjectBytes: 1000 })).toEqual(['maxObjectBytes: must be at least 16384 (16 KiB): smaller objects hold too few shoots to be useful']);
    expect(errors({ sniPort: 70000 })).toEqual(['sniPort: must be 1 to 65535']);
    expect(errors({ protectedPorts: [] })).toEqual(['protectedPorts: must name at least one port, such as 8443']);
  });

  it('maxObjectBytes above 640 KiB is refused: a transitional write holds up to twice it, past etcd’s 1.5 MiB', () => {
    expect(errors({ maxObjectBytes: 1024 * 1024 })).toEqual([
      'maxObjectBytes: must be at most 655360 (640 KiB): a write that moves shoots between shards holds up to twice maxObjectBytes, and etcd refuses objects above 1.5 MiB; for more capacity raise ecdsBuckets',
    ]);
    expect(config({ maxObjectBytes: 640 * 1024 }).maxObjectBytes).toBe(655360);
  });

  it('a bad combinedForm or ecdsBuckets is refused with the field, the value and the fix', () => {
    expect(errors({ combinedForm: 'ecdss' })).toEqual(['combinedForm: must be rules, matcher or ecds']);
    expect(errors({ combinedForm: 'ecds', ecdsBuckets: 0 })).toEqual(['ecdsBuckets: must be at least 1: every listener names every bucket, and jump hashing into 0 buckets places no shoot']);
    expect(errors({ combinedForm: 'ecds', ecdsBuckets: 1000 })).toEqual([
      'ecdsBuckets: must be at most 256: every bucket adds one HTTP filter per protected header to every CONNECT request; raise maxObjectBytes instead',
    ]);
    expect(errors({ combinedForm: 'ecds', ecdsBuckets: 2.5 })).toEqual(['ecdsBuckets: must be a whole number from 1 to 256, such as 48']);
    expect(config({ combinedForm: 'ecds' }).ecdsBuckets).toBe(48);
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
