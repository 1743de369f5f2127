// Determinism and sharding of the combined CONNECT filters, in every form. Tests that read a form's
// contents (shards' `rules.policies`, buckets' lookup maps) or count the objects one change rewrites
// say which form they are about; how the objects decide is the oracle's (Decider).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { COMBINED_FORMS, type CombinedFormName } from '../../src/config/operator-config.js';
import type { OperatorConfig } from '../../src/config/operator-config.js';
import { buildCombinedConnectFilters, combinedConnectFilterStream, planCombinedConnectFilters } from '../../src/rbac/combined-connect-filters.js';
import { buildSeedEnvoyFilters, allEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { fnv1a64, jumpHash, shardByHash } from '../../src/rbac/sharding.js';
import { isRecord } from '../oracle/placement.js';
import { Decider, vpn } from '../support/decide.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, testSeed, type TestShoot } from '../support/test-seed.js';
import { rulesFormOnly } from '../support/rules-form.js';

function manyShoots(count: number, cidrsPerShoot: number, salt = 0): TestShoot[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `shoot--proj${i % 37}--s${i}`,
    rule: {
      action: i % 5 === 0 ? 'DENY' : 'ALLOW',
      type: 'remote_ip',
      cidrs: Array.from({ length: cidrsPerShoot }, (_, j) => (j % 4 === 3 ? `2001:db8:${(i + salt) % 65536}:${j}::/64` : `${(i * 7 + j + salt) % 224}.${j}.${i % 256}.0/24`)),
    },
    always: ['10.250.0.0/16', `10.${i % 256}.0.0/24`],
  }));
}

function render(shoots: TestShoot[], operator: Partial<OperatorConfig>): string {
  const { seed } = testSeed(shoots, { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator });
  return allEnvoyFilters(buildSeedEnvoyFilters(seed)).map((f) => stringify(f)).join('---\n');
}

/** The shoots an object's lookups hold (the keys `=<id>` of every exact-match map in its RBAC matchers), once per lookup. */
function lookupIds(object: unknown): string[] {
  const ids: string[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) for (const item of node as unknown[]) walk(item);
    if (!isRecord(node)) return;
    const map = isRecord(node['exact_match_map']) ? node['exact_match_map']['map'] : undefined;
    if (isRecord(map)) ids.push(...Object.keys(map).map((key) => key.slice(1)));
    for (const value of Object.values(node)) walk(value);
  };
  walk(object);
  return ids;
}

describe.each(COMBINED_FORMS)('deterministic output (combinedForm %s)', (form) => {
  it('the order of shoots, CIDRs and headers in the input does not change a byte', () => {
    const shoots = manyShoots(40, 5);
    const render = (input: TestShoot[]): string => renderIn(input, form);
    const reference = render(shoots);
    fc.assert(
      fc.property(fc.shuffledSubarray(shoots, { minLength: shoots.length }), fc.integer(), (shuffled, seed) => {
        const withShuffledCidrs = shuffled.map((s, i) => ({ ...s, rule: s.rule && { ...s.rule, cidrs: [...s.rule.cidrs].sort(() => ((seed ^ i) & 1 ? 1 : -1)) } }));
        expect(render(withShuffledCidrs)).toBe(reference);
      }),
      { numRuns: 20 },
    );
  });
});

function renderIn(shoots: TestShoot[], form: CombinedFormName): string {
  return render(shoots, { combinedForm: form });
}

describe('sharding of the combined CONNECT filters', () => {
  // Reads the shards' `rules.policies`, which only the rules form has.
  it('rules form: keeps every object under the size budget and every shoot in exactly one shard per gateway', () => {
    const shoots = manyShoots(600, 50);
    const { seed } = testSeed(shoots, { operator: { maxObjectBytes: 200 * 1024, combinedForm: 'rules' } });
    const combined = rulesFormOnly(buildSeedEnvoyFilters(seed).combined);
    expect(combined.length).toBeGreaterThan(1);
    for (const f of combined) expect(JSON.stringify(f).length).toBeLessThanOrEqual(200 * 1024);
    for (const port of seed.operator.protectedPorts) {
      const ids = combined.filter((f) => f.metadata.name.startsWith(`acl-connect-${port}-`)).flatMap((f) => Object.keys(f.spec.configPatches[0]?.patch.value.typed_config.rules?.policies ?? {}));
      expect(ids.sort()).toEqual(shoots.map((s) => s.id).sort());
    }
  });

  // Reads the lookups' maps: a matcher shard looks each shoot up once per protected header and port, an ECDS bucket once.
  it.each(['matcher', 'ecds'] as const)('%s form: keeps every object under the size budget and every shoot in exactly one lookup (ecds: per gateway; matcher: per header, port and gateway)', (form) => {
    const shoots = manyShoots(600, 50);
    const { seed } = testSeed(shoots, { operator: { maxObjectBytes: 200 * 1024, combinedForm: form } });
    const combined = buildSeedEnvoyFilters(seed).combined;
    const holding = combined.filter((f) => lookupIds(f).length > 0);
    expect(holding.length).toBeGreaterThan(1);
    for (const f of combined) expect(JSON.stringify(f).length, f.metadata.name).toBeLessThanOrEqual(200 * 1024);
    const ids = holding.flatMap(lookupIds).sort();
    const perShoot = form === 'ecds' ? 1 : seed.operator.protectedPorts.length * seed.operator.protectedHeaders.length;
    expect(ids).toEqual(shoots.flatMap((s) => Array.from({ length: perShoot }, () => s.id)).sort());
  });

  it('the plan, the stream and the whole build give the same objects; an oversized shoot is left out of the plan and refused by the others with the same text', () => {
    const shoots = Array.from({ length: 30 }, (_, i): TestShoot => ({ id: `shoot--p--s${i}`, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [`203.0.${i}.0/24`] } }));
    const seed = testSeed(shoots, { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator: { maxObjectBytes: 16 * 1024 } }).seed;
    const planned = planCombinedConnectFilters(seed);
    expect(planned.unplaced.size).toBe(0);
    expect([...combinedConnectFilterStream(seed)]).toEqual(planned.filters);
    expect(buildCombinedConnectFilters(seed)).toEqual(planned.filters);
    expect(planned.filters.length).toBeGreaterThan(4);

    const huge: TestShoot = { id: 'shoot--p--huge', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: Array.from({ length: 400 }, (_, i) => `100.${64 + (i >> 8)}.${i & 255}.1/32`) } };
    const withHuge = testSeed([...shoots, huge], { gateways: [DEFAULT_GATEWAY, ZONAL_GATEWAY], operator: { maxObjectBytes: 16 * 1024 } }).seed;
    const leftOut = planCombinedConnectFilters(withHuge);
    expect([...leftOut.unplaced.keys()]).toEqual(['shoot--p--huge']);
    expect(leftOut.filters).toEqual(planned.filters);
    const message = `cannot shard: ${leftOut.unplaced.get('shoot--p--huge')}`;
    expect(() => combinedConnectFilterStream(withHuge)).toThrow(message);
    expect(() => buildCombinedConnectFilters(withHuge)).toThrow(message);
  });

  it.each(COMBINED_FORMS)('a change to one shoot rewrites only its own shard or bucket (combinedForm %s)', (form) => {
    const shoots = manyShoots(600, 50);
    const operator = { maxObjectBytes: 200 * 1024, combinedForm: form };
    const before = buildSeedEnvoyFilters(testSeed(shoots, { operator }).seed).combined;
    const changed = shoots.map((s, i) => (i === 123 && s.rule ? { ...s, rule: { ...s.rule, cidrs: ['192.0.2.0/24'] } } : s));
    const after = buildSeedEnvoyFilters(testSeed(changed, { operator }).seed).combined;
    expect(after.map((f) => f.metadata.name)).toEqual(before.map((f) => f.metadata.name));
    const differing = after.filter((f, i) => JSON.stringify(f) !== JSON.stringify(before[i])).map((f) => f.metadata.name);
    if (form === 'ecds') {
      // One bucket, which no listener part changes with (the listeners name every bucket).
      expect(differing).toEqual([expect.stringMatching(/^acl-connect-ecds-b\d{3}$/)]);
      expect(lookupIds(after.find((f) => f.metadata.name === differing[0]))).toContain(shoots[123]?.id);
    } else {
      // The same shard index on each protected port.
      expect(differing).toHaveLength(2);
      expect(differing[0]?.slice(-3)).toBe(differing[1]?.slice(-3));
    }
  });

  it.each(COMBINED_FORMS)('sharded filters still enforce every shoot (combinedForm %s)', (form) => {
    const shoots = manyShoots(300, 20);
    const d = new Decider(testSeed(shoots, { operator: { maxObjectBytes: 64 * 1024, combinedForm: form } }).seed);
    expect(d.form).toBe(form);
    expect(d.filters.filter((f) => f.metadata.name.startsWith('acl-connect-') && (form === 'rules' || lookupIds(f).length > 0)).length).toBeGreaterThan(4);
    for (const s of shoots.slice(0, 30)) {
      const inRule = s.rule?.cidrs[0]?.replace(/0\/24$/, '9') ?? '';
      expect(d.connect([['X-Gardener-Destination', vpn(s.id)]], inRule), s.id).toBe(s.rule?.action === 'ALLOW');
    }
  });

  it('uses fixed hashes, few buckets that all fit, and moves few keys when the count grows', () => {
    expect(fnv1a64('')).toBe(0xcbf29ce484222325n);
    expect(fnv1a64('a')).toBe(0xaf63dc4c8601ec8cn);
    const items = Array.from({ length: 64 }, (_, i) => ({ key: `k${i}`, bytes: 10, item: i }));
    expect(shardByHash(items, 10_000)).toHaveLength(1);
    const sharded = shardByHash(items, 100);
    expect(sharded.length).toBeGreaterThanOrEqual(7);
    expect(sharded.flat().length).toBe(64);
    for (const bucket of sharded) expect(bucket.reduce((s, x) => s + x.bytes, 0)).toBeLessThanOrEqual(100);
    expect(() => shardByHash([{ key: 'huge', bytes: 1000, item: 0 }], 10)).toThrow(/"huge" alone needs 1000 bytes/);
    const keys = Array.from({ length: 10_000 }, (_, i) => fnv1a64(`shoot--p--s${i}`));
    const moved = keys.filter((k) => jumpHash(k, 100) !== jumpHash(k, 101)).length;
    expect(moved / keys.length).toBeLessThan(0.02);
    expect(keys.every((k) => jumpHash(k, 101) < 101)).toBe(true);
  });
});
