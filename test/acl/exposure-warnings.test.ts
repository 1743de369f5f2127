// Issue 14 point 3: an ALLOW rule that opens a whole address family, or names only one family, is
// admitted with a warning naming the field, the ranges and what to do.
import { describe, expect, it } from 'vitest';
import { parseProviderConfig } from '../../src/acl/provider-config.js';

const P = 'spec.extensions[0].providerConfig';
const warningsOf = (action: string, cidrs: string[]) => {
  const result = parseProviderConfig({ rule: { action, type: 'remote_ip', cidrs } }, 50, P);
  if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('; '));
  return result.warnings.map((w) => `${w.path}: ${w.message}`);
};
const OPEN = (ranges: string, family: string, together = false) =>
  `${P}.rule.cidrs: ${ranges} ${together ? 'together admit' : 'admits'} every ${family} client: the control plane is open to the whole ${family} internet on every path; list only the ranges that need access`;
const ONLY = (listed: string, other: string) =>
  `${P}.rule.cidrs: lists only ${listed} ranges: every ${other} client is refused on every path (only the seed's always-allowed ranges pass); add ${other} ranges if ${other} clients must reach the control plane`;

describe('exposure warnings', () => {
  it('ALLOW of a whole family, written as /0, as its IPv4-mapped twin, or as ranges that add up to it', () => {
    expect(warningsOf('ALLOW', ['0.0.0.0/0', '2001:db8::/32'])).toEqual([OPEN('0.0.0.0/0', 'IPv4')]);
    expect(warningsOf('ALLOW', ['::/0', '10.0.0.0/8'])).toEqual([OPEN('::/0', 'IPv6')]);
    expect(warningsOf('ALLOW', ['0.0.0.0/0', '::/0'])).toEqual([OPEN('0.0.0.0/0', 'IPv4'), OPEN('::/0', 'IPv6')]);
    expect(warningsOf('ALLOW', ['::ffff:0:0/96', '2001:db8::/32'])).toEqual([OPEN('0.0.0.0/0', 'IPv4')]);
    expect(warningsOf('ALLOW', ['0.0.0.0/1', '128.0.0.0/1', '2001:db8::/32'])).toEqual([OPEN('0.0.0.0/1, 128.0.0.0/1', 'IPv4', true)]);
  });

  it('ALLOW that names one family only', () => {
    expect(warningsOf('ALLOW', ['203.0.113.0/24'])).toEqual([ONLY('IPv4', 'IPv6')]);
    expect(warningsOf('ALLOW', ['2001:db8::/32'])).toEqual([ONLY('IPv6', 'IPv4')]);
    expect(warningsOf('ALLOW', ['0.0.0.0/0'])).toEqual([OPEN('0.0.0.0/0', 'IPv4'), ONLY('IPv4', 'IPv6')]);
  });

  it('nothing for ALLOW of some ranges of both families, or for a DENY of some ranges', () => {
    expect(warningsOf('ALLOW', ['0.0.0.0/1', '2001:db8::/32'])).toEqual([]);
    expect(warningsOf('DENY', ['203.0.113.0/24'])).toEqual([]);
    expect(warningsOf('DENY', ['0.0.0.0/1'])).toEqual([]);
  });

  it('DENY of a whole family (everyone refused but the always-allowed ranges)', () => {
    const REFUSED = (ranges: string, family: string, together = false) =>
      `${P}.rule.cidrs: ${ranges} ${together ? 'together refuse' : 'refuses'} every ${family} client on every path (only the seed's always-allowed ranges pass), the shoot's own users too; list only the ranges to refuse, or use ALLOW with the ranges that need access`;
    expect(warningsOf('DENY', ['0.0.0.0/0'])).toEqual([REFUSED('0.0.0.0/0', 'IPv4')]);
    expect(warningsOf('DENY', ['0.0.0.0/0', '::/0'])).toEqual([REFUSED('0.0.0.0/0', 'IPv4'), REFUSED('::/0', 'IPv6')]);
    expect(warningsOf('DENY', ['0.0.0.0/1', '128.0.0.0/1'])).toEqual([REFUSED('0.0.0.0/1, 128.0.0.0/1', 'IPv4', true)]);
  });

  it('an entry with host bits under a short prefix is named with the network it admits and both ways to write what was meant', () => {
    expect(warningsOf('ALLOW', ['10.1.2.3/8', '2001:db8::/32'])).toEqual([
      `${P}.rule.cidrs[0]: "10.1.2.3/8" has host bits set: it admits the whole network 10.0.0.0/8 (16,777,216 addresses); write 10.1.2.3/32 for the one host, or 10.0.0.0/8 if the network is meant`,
    ]);
    expect(warningsOf('ALLOW', ['203.0.113.0/24', '2001:db8::1/64'])).toEqual([
      `${P}.rule.cidrs[1]: "2001:db8::1/64" has host bits set: it admits the whole network 2001:db8::/64 (18,446,744,073,709,551,616 addresses); write 2001:db8::1/128 for the one host, or 2001:db8::/64 if the network is meant`,
    ]);
    expect(warningsOf('DENY', ['::ffff:10.0.0.0/100'])[0]).toMatch(/^spec\.extensions\[0\]\.providerConfig\.rule\.cidrs\[0\]: "::ffff:10\.0\.0\.0\/100" has host bits set: it refuses the whole network /);
    // Written as the network, or as a host: nothing to say.
    expect(warningsOf('ALLOW', ['10.0.0.0/8', '10.1.2.3', '10.1.2.3/32', '2001:db8::/32'])).toEqual([]);
  });

  it('audit mode: admitted with a warning that nothing is refused; the family warnings still apply', () => {
    const result = parseProviderConfig({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'], mode: 'Audit' } }, 50, P);
    if (!result.ok) throw new Error('refused');
    expect(result.rule.mode).toBe('audit');
    expect(result.warnings.map((w) => `${w.path}: ${w.message}`)).toEqual([
      `${P}.rule.mode: is audit: this ACL refuses no connection, Envoy only counts the ones it would refuse (docs/owners/trying-an-acl-safely.md); set mode enforce, or remove it, to enforce the rule`,
      ONLY('IPv4', 'IPv6'),
    ]);
  });
});
