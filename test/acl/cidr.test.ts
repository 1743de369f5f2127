import { describe, expect, it } from 'vitest';
import { formatCidr, normalizeCidrSet, parseCidr } from '../../src/acl/cidr.js';
import { cidr } from '../support/test-seed.js';

describe('parseCidr', () => {
  it.each([
    ['10.0.0.0/8', '10.0.0.0/8', false],
    ['10.1.2.3/8', '10.0.0.0/8', true],
    ['203.0.113.7', '203.0.113.7/32', false],
    ['0.0.0.0/0', '0.0.0.0/0', false],
    ['2001:DB8::1/48', '2001:db8::/48', true],
    ['::/0', '::/0', false],
    ['::1', '::1/128', false],
    ['2001:db8:0:0:1:0:0:1/128', '2001:db8::1:0:0:1/128', false],
    ['::ffff:203.0.113.0/120', '::ffff:203.0.113.0/120', false],
    ['fe80::1:2:3:4/64', 'fe80::/64', true],
  ])('%s -> %s', (input, expected, hostBits) => {
    const parsed = parseCidr(input);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(formatCidr(parsed.cidr)).toBe(expected);
    expect(parsed.hostBitsCleared).toBe(hostBits);
  });

  it.each([
    ['10.0.0.300/8', '"10.0.0.300" is not an IPv4 address'],
    ['10.0.0.0/33', 'prefix length "33" must be a number from 0 to 32'],
    ['10.0.0.0/', 'prefix length "" must be a number from 0 to 32'],
    ['010.0.0.0/8', '"010.0.0.0" is not an IPv4 address'],
    ['2001:db8::/129', 'prefix length "129" must be a number from 0 to 128'],
    ['2001:db8:::1/64', '"2001:db8:::1" is not an IPv6 address'],
    ['1:2:3:4:5:6:7:8:9/64', '"1:2:3:4:5:6:7:8:9" is not an IPv6 address'],
    ['fe80::1%eth0/64', '"fe80::1%eth0" is not an IPv6 address'],
    ['tikka masala', '"tikka masala" is not an IPv4 address'],
    ['', 'it is empty'],
  ])('rejects %j', (input, reason) => {
    expect(parseCidr(input)).toEqual({ ok: false, reason });
  });
});

describe('normalizeCidrSet', () => {
  it('sorts, deduplicates, folds IPv4-mapped ranges into IPv4 and drops covered ranges', () => {
    const set = normalizeCidrSet(['2001:db8::/32', '10.1.0.0/16', '10.0.0.0/8', '::ffff:192.0.2.0/120', '192.0.2.0/24', '2001:db8:1::/48', '1.2.3.4/32'].map(cidr));
    expect(set.map(formatCidr)).toEqual(['1.2.3.4/32', '10.0.0.0/8', '192.0.2.0/24', '2001:db8::/32']);
  });
});
