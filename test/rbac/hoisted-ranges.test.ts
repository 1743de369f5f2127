// The ranges every shoot of a lookup admits are checked once before the lookup: the stored leaves
// lose them (unless a leaf would keep nothing else), reading a stored object gives back exactly
// the leaves it was built from, and rebuilding from what was read gives the same object. That a
// hoisted lookup decides as docs/design.md says is the conformance matrix's part (its shoots share the
// seed's ranges).
import { describe, expect, it } from 'vitest';
import { ADMITTED_BY_EVERY_SHOOT, lookupOf, lookupRbacFilter, shootAclLeaf, storedMatcherEntries, type MatcherEntry } from '../../src/rbac/connect-matcher.js';
import { parseCidr, type Cidr } from '../../src/acl/cidr.js';
import type { ShootPolicy } from '../../src/acl/model.js';

const cidr = (text: string): Cidr => {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.cidr;
};
const SEED = ['10.250.0.0/16', '100.96.0.0/11'];
const shoot = (id: string, rule: ShootPolicy['rule'], always: readonly string[]): ShootPolicy => ({ technicalID: id, rule, alwaysAllowed: always.map(cidr) });
const SHOOTS: ShootPolicy[] = [
  shoot('shoot--p--allow', { action: 'ALLOW', type: 'remote_ip', cidrs: [cidr('203.0.113.0/24'), cidr('2001:db8::/32')], mode: 'enforce' }, [...SEED, '198.51.100.1/32']),
  shoot('shoot--p--direct', { action: 'ALLOW', type: 'direct_remote_ip', cidrs: [cidr('192.0.2.0/24')], mode: 'enforce' }, [...SEED, '10.180.0.0/16']),
  shoot('shoot--p--deny', { action: 'DENY', type: 'remote_ip', cidrs: [cidr('198.18.0.0/15')], mode: 'enforce' }, SEED),
  shoot('shoot--p--audit', { action: 'ALLOW', type: 'source_ip', cidrs: [cidr('192.0.2.77/32')], mode: 'audit' }, [...SEED, '10.180.0.0/16']),
  shoot('shoot-legacy--x', { action: 'ALLOW', type: 'remote_ip', cidrs: [cidr('198.51.100.0/24')], mode: 'enforce' }, SEED),
  // Enough shoots that checking the seed ranges once makes the object smaller.
  ...Array.from({ length: 6 }, (_, i) => shoot(`shoot--q--s${i}`, { action: 'ALLOW', type: 'remote_ip', cidrs: [cidr(`203.0.${i}.0/24`)], mode: 'enforce' }, SEED)),
];
const entries = (shoots: readonly ShootPolicy[]) => new Map(shoots.map((s): [string, MatcherEntry] => [s.technicalID, { mode: s.rule.mode, policy: shootAclLeaf(s) }]));
const filterOf = (shoots: readonly ShootPolicy[]) => lookupRbacFilter('f', ['x-gardener-destination'], 'x-gardener-acl-target', entries(shoots));
const asStored = (f: ReturnType<typeof filterOf>) => ({ configPatches: [{ patch: { value: JSON.parse(JSON.stringify(f)) as unknown } }] });
const rangesIn = (value: unknown): string[] => JSON.stringify(value).match(/"address_prefix":"[^"]+","prefix_len":\d+/g) ?? [];

describe('ranges every shoot admits, checked once before the lookup', () => {
  it('reading a stored lookup gives back exactly the leaves it was built from, and rebuilding gives the same object', () => {
    const built = filterOf(SHOOTS);
    const read = storedMatcherEntries(asStored(built));
    expect(read).toEqual(entries(SHOOTS));
    expect(filterOf(SHOOTS)).toEqual(lookupRbacFilter('f', ['x-gardener-destination'], 'x-gardener-acl-target', read));
  });

  it('the seed ranges are checked once, before the lookup; leaves with ranges of their own no longer hold them', () => {
    const matcher = filterOf(SHOOTS).typed_config['matcher'];
    const found = lookupOf(matcher);
    expect(found?.hoisted.map((r) => `${r.address_prefix}/${r.prefix_len}`)).toEqual(SEED);
    expect(JSON.stringify(matcher)).toContain(ADMITTED_BY_EVERY_SHOOT);
    const holdsSeed = (id: string) => SEED.some((range) => rangesIn(found?.map[`=${id}`]).join().includes(`"${range.split('/')[0]}"`));
    expect(['shoot--p--allow', 'shoot--p--direct', 'shoot-legacy--x'].filter(holdsSeed)).toEqual([]);
    // The DENY shoot's first node holds only the seed ranges: emptied it would change the leaf's shape, so it keeps them.
    expect(holdsSeed('shoot--p--deny')).toBe(true);
    // The audited shoot is in the shadow matcher, whose own common ranges are its (single) leaf's: nothing is hoisted there.
    expect(lookupOf(filterOf(SHOOTS).typed_config['shadow_matcher'])?.hoisted).toEqual([]);
  });

  it('a leaf that would keep no range of its own keeps them all (and still reads back as built)', () => {
    const only = [shoot('shoot--p--a', { action: 'ALLOW', type: 'remote_ip', cidrs: [cidr('10.250.0.0/16')], mode: 'enforce' }, SEED), ...SHOOTS];
    const found = lookupOf(filterOf(only).typed_config['matcher']);
    expect(found?.hoisted.length).toBe(2);
    expect(rangesIn(found?.map['=shoot--p--a'])).toHaveLength(2);
    expect(storedMatcherEntries(asStored(filterOf(only)))).toEqual(entries(only));
  });

  it('nothing is hoisted where the check would make the object larger (few shoots)', () => {
    const few = SHOOTS.slice(0, 2);
    expect(lookupOf(filterOf(few).typed_config['matcher'])?.hoisted).toEqual([]);
    expect(JSON.stringify(filterOf(few))).not.toContain(ADMITTED_BY_EVERY_SHOOT);
    expect(storedMatcherEntries(asStored(filterOf(few)))).toEqual(entries(few));
  });

  it('nothing is hoisted when some leaf admits nothing first by the remote address (a DENY rule without always-allowed ranges)', () => {
    const bare = [...SHOOTS, shoot('shoot--p--bare', { action: 'DENY', type: 'remote_ip', cidrs: [cidr('198.18.0.0/15')], mode: 'enforce' }, [])];
    expect(lookupOf(filterOf(bare).typed_config['matcher'])?.hoisted).toEqual([]);
    expect(storedMatcherEntries(asStored(filterOf(bare)))).toEqual(entries(bare));
  });
});
