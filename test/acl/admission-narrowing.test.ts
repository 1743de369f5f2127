// admitsFewer decides whether a shoot's tunnels are closed: a wrong "no" leaves a revoked tunnel
// open, a wrong "yes" costs one reconnect. Each case names the edit an owner makes; the
// exhaustive check compares it with the admitted sets computed address by address.
import { describe, expect, it } from 'vitest';
import { admitsFewer, type ConnectAdmission } from '../../src/acl/admission-narrowing.js';
import { formatCidr, parseCidr, type Cidr } from '../../src/acl/cidr.js';
import type { AclAction, PrincipalType, RuleMode } from '../../src/acl/acl-rule.js';

function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(text);
  return parsed.cidr;
}

function admission(action: AclAction, cidrs: string[], options: { type?: PrincipalType; mode?: RuleMode; always?: string[] } = {}): ConnectAdmission {
  return { rule: { action, type: options.type ?? 'remote_ip', cidrs: cidrs.map(cidr), mode: options.mode ?? 'enforce' }, alwaysAllowed: (options.always ?? ['10.250.0.0/16']).map(cidr) };
}

describe('admitsFewer: the edits owners make', () => {
  it.each([
    ['ALLOW: a range removed', admission('ALLOW', ['203.0.113.0/24', '198.51.100.0/24']), admission('ALLOW', ['203.0.113.0/24']), true],
    ['ALLOW: a range narrowed', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/25']), true],
    ['ALLOW: a range added', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/24', '198.51.100.0/24']), false],
    ['ALLOW: two halves merged into their /24', admission('ALLOW', ['203.0.113.0/25', '203.0.113.128/25']), admission('ALLOW', ['203.0.113.0/24']), false],
    ['ALLOW: a /24 split into its halves', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/25', '203.0.113.128/25']), false],
    ['ALLOW: unchanged', admission('ALLOW', ['203.0.113.0/24', '2001:db8::/48']), admission('ALLOW', ['203.0.113.0/24', '2001:db8::/48']), false],
    ['ALLOW: the IPv4-mapped spelling of the same range', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['::ffff:203.0.113.0/120']), false],
    ['ALLOW: the IPv6 range removed', admission('ALLOW', ['203.0.113.0/24', '2001:db8::/48']), admission('ALLOW', ['203.0.113.0/24']), true],
    ['DENY: a range added', admission('DENY', ['203.0.113.0/24']), admission('DENY', ['203.0.113.0/24', '198.51.100.0/24']), true],
    ['DENY: a range widened', admission('DENY', ['203.0.113.0/25']), admission('DENY', ['203.0.113.0/24']), true],
    ['DENY: a range removed', admission('DENY', ['203.0.113.0/24', '198.51.100.0/24']), admission('DENY', ['203.0.113.0/24']), false],
    ['ALLOW to DENY of ranges it did not allow', admission('ALLOW', ['203.0.113.0/24']), admission('DENY', ['198.51.100.0/24']), false],
    ['ALLOW to DENY of a range it allowed', admission('ALLOW', ['203.0.113.0/24']), admission('DENY', ['203.0.113.7/32']), true],
    ['DENY to ALLOW (never claimed to admit as many)', admission('DENY', ['203.0.113.0/24']), admission('ALLOW', ['0.0.0.0/0', '::/0']), true],
    ['another address type', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/24'], { type: 'source_ip' }), true],
    ['audit to enforce', admission('ALLOW', ['203.0.113.0/24'], { mode: 'audit' }), admission('ALLOW', ['203.0.113.0/24']), true],
    ['enforce to audit', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/24'], { mode: 'audit' }), false],
    ['an always-allowed range gone (a seed node range changed)', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/24'], { always: [] }), true],
    ['an always-allowed range added', admission('ALLOW', ['203.0.113.0/24']), admission('ALLOW', ['203.0.113.0/24'], { always: ['10.250.0.0/16', '10.251.0.0/16'] }), false],
    ['ALLOW ::/0 (reaching over the IPv4-mapped block) narrowed to 2000::/3', admission('ALLOW', ['::/0']), admission('ALLOW', ['2000::/3']), true],
    ['ALLOW of an IPv4 range to DENY ::/0 (undecidable per family: yes)', admission('ALLOW', ['203.0.113.0/24']), admission('DENY', ['::/0']), true],
  ] as const)('%s', (_name, before, after, expected) => {
    expect(admitsFewer(before, after)).toBe(expected);
  });
});

describe('admitsFewer never says no when a client lost admission (every address of a small space)', () => {
  // Ranges inside 203.0.113.0/28 and the matching mapped space: every client of the space is tried.
  const ranges = ['203.0.113.0/29', '203.0.113.8/29', '203.0.113.4/30', '203.0.113.0/28', '203.0.113.12/32', '::ffff:203.0.113.0/125'];
  const clients = Array.from({ length: 16 }, (_u, i) => cidr(`203.0.113.${i}/32`));
  const inside = (c: Cidr, set: readonly Cidr[]) => set.some((r) => {
    const v4 = r.family === 6 ? { family: 4 as const, address: r.address & 0xffffffffn, prefixLen: r.prefixLen - 96 } : r;
    const mask = ((1n << 32n) - 1n) ^ ((1n << BigInt(32 - v4.prefixLen)) - 1n);
    return (c.address & mask) === v4.address;
  });
  const admits = (a: ConnectAdmission, c: Cidr) => inside(c, a.alwaysAllowed) || (a.rule.action === 'ALLOW' ? inside(c, a.rule.cidrs) : !inside(c, a.rule.cidrs));
  const subsets = ranges.flatMap((a, i) => ranges.slice(i).map((b) => [a, b]));
  const show = (a: ConnectAdmission) => `${a.rule.action} ${a.rule.cidrs.map(formatCidr).join(',')}`;
  const admissions = subsets.flatMap((set) => (['ALLOW', 'DENY'] as const).map((action) => admission(action, set, { always: [] })));
  it(`${admissions.length}² pairs`, () => {
    for (const before of admissions) {
      for (const after of admissions) {
        const lost = clients.some((c) => admits(before, c) && !admits(after, c));
        if (lost) expect(admitsFewer(before, after), `${show(before)} -> ${show(after)}`).toBe(true);
      }
    }
  });
});
