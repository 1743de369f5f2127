// The matcher form in the controller's write plan, replayed write by write against a simulated
// store: growing and shrinking keeps every active shoot protected after every write, a switch
// between the forms writes the new form completely before the old objects go (so every shoot is
// protected by one form or the other at every instant), and a stored matcher object changed by
// another writer counts as not protecting.
import { describe, expect, it } from 'vitest';
import type { GatewayWorkload } from '../../src/acl/model.js';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/acl/operator-config.js';
import type { AppliedAcl } from '../../src/actuator/applied-state.js';
import { storedCoverage, uncoveredPaths } from '../../src/actuator/combined-coverage.js';
import { combinedForm } from '../../src/actuator/combined-forms.js';
import { planCombinedWrites } from '../../src/actuator/combined-syncer.js';
import { keyOf, replayPlan, type Store } from '../support/write-plan-replay.js';
import type { EnvoyFilterObject } from '../../src/gardener/objects.js';
import { extractedHeaders, extractionObjectName } from '../../src/rbac/connect-matcher.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, cidr, rule } from '../support/test-seed.js';

const base = { ...defaultOperatorConfig(), maxObjectBytes: 16 * 1024 };
const RULES: OperatorConfig = { ...base, combinedForm: 'rules' };
const MATCHER: OperatorConfig = { ...base, combinedForm: 'matcher' };
const GATEWAYS: GatewayWorkload[] = [DEFAULT_GATEWAY, ZONAL_GATEWAY];
const ALWAYS = ['10.96.0.0/11', '10.180.0.0/16', '10.250.0.0/16', '198.51.100.1/32'].map(cidr);
const shoot = (i: number): AppliedAcl => ({
  technicalID: `shoot--grow--s${String(i).padStart(2, '0')}`,
  rule: rule('ALLOW', 'remote_ip', [`203.0.${i}.0/24`, `2001:db8:${i}::/48`]),
  alwaysAllowed: ALWAYS,
  legacyProxyAllowed: [],
});
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => shoot(from + i));

const selectors = new Map(GATEWAYS.map((g) => [g.namespace, g.selector]));
const namespaces = GATEWAYS.map((g) => g.namespace);

/** Paths where `s` is protected by neither form as stored. */
function unprotected(store: Store, s: AppliedAcl): string[] {
  const perForm = [RULES, MATCHER].map((op) => {
    const form = combinedForm(op);
    return uncoveredPaths(storedCoverage([...store.values()], selectors, form), s.technicalID, form.entry(s), namespaces, op.protectedPorts);
  });
  return (perForm[0] ?? []).filter((path) => perForm.every((p) => p.includes(path)));
}

function replay(store: Store, operator: OperatorConfig, shoots: readonly AppliedAcl[], mustStay: readonly AppliedAcl[]): { gaps: string[]; steps: number } {
  const plan = planCombinedWrites({ operator, gateways: GATEWAYS, shoots, stored: [...store.values()] });
  return replayPlan(store, plan, () => mustStay.flatMap((s) => unprotected(store, s).map((path) => `${s.technicalID} on ${path}`)));
}

function converged(store: Store, operator: OperatorConfig, shoots: readonly AppliedAcl[]): boolean {
  const again = planCombinedWrites({ operator, gateways: GATEWAYS, shoots, stored: [...store.values()] });
  return again.grow.length + again.settle.length + again.deletions.length === 0;
}

function coveredIn(store: Store, operator: OperatorConfig, s: AppliedAcl): boolean {
  const form = combinedForm(operator);
  return uncoveredPaths(storedCoverage([...store.values()], selectors, form), s.technicalID, form.entry(s), namespaces, operator.protectedPorts).length === 0;
}

describe('the matcher form in the write plan', () => {
  it('grows and shrinks with every active shoot protected after every write; the extraction objects come first and go last', () => {
    const store: Store = new Map();
    const first = planCombinedWrites({ operator: MATCHER, gateways: GATEWAYS, shoots: range(0, 10), stored: [] });
    expect(first.grow.slice(0, GATEWAYS.length * MATCHER.protectedPorts.length).map((w) => w.metadata.name).sort()).toEqual(
      GATEWAYS.flatMap(() => MATCHER.protectedPorts.map(extractionObjectName)).sort(),
    );
    replay(store, MATCHER, range(0, 10), []);
    const shards = () => [...store.keys()].filter((k) => /^istio-ingress\/acl-connect-8443-m\d+$/.test(k)).length;
    const before = shards();
    expect(before).toBeGreaterThan(1);
    const grow = replay(store, MATCHER, range(0, 30), range(0, 10));
    expect(grow.gaps).toEqual([]);
    expect(shards()).toBeGreaterThan(before);
    expect(converged(store, MATCHER, range(0, 30))).toBe(true);
    for (const s of range(0, 30)) expect(coveredIn(store, MATCHER, s)).toBe(true);
    const shrink = replay(store, MATCHER, range(0, 10), range(0, 10));
    expect(shrink.gaps).toEqual([]);
    expect(shards()).toBe(before);
    // The last shoot gone: shards are deleted before the extraction they rely on.
    const empty = planCombinedWrites({ operator: MATCHER, gateways: GATEWAYS, shoots: [], stored: [...store.values()] });
    const names = empty.deletions.map((d) => d.metadata.name);
    expect(names.slice(-GATEWAYS.length * MATCHER.protectedPorts.length).every((n) => n.endsWith('-extract'))).toBe(true);
    expect(names.filter((n) => n.endsWith('-extract'))).toHaveLength(GATEWAYS.length * MATCHER.protectedPorts.length);
  });

  it.each([
    ['rules', 'matcher', RULES, MATCHER],
    ['matcher', 'rules', MATCHER, RULES],
  ] as const)('a switch from %s to %s: every shoot is protected by one form or the other after every write, then only the new form is stored', (_from, _to, from, to) => {
    const store: Store = new Map();
    const shoots = range(0, 20);
    replay(store, from, shoots, []);
    for (const s of shoots) expect(coveredIn(store, from, s)).toBe(true);
    const run = replay(store, to, shoots, shoots);
    expect(run.gaps).toEqual([]);
    expect(run.steps).toBeGreaterThan(4);
    for (const s of shoots) {
      expect(coveredIn(store, to, s)).toBe(true);
      expect(coveredIn(store, from, s)).toBe(false);
    }
    expect(converged(store, to, shoots)).toBe(true);
    const otherForm = to.combinedForm === 'matcher' ? /acl-connect-\d+-\d{3}$/ : /acl-connect-\d+-(m\d{3}|extract)$/;
    expect([...store.keys()].filter((k) => otherForm.test(k))).toEqual([]);
  });

  it('a matcher shard or extraction object changed by another writer protects nobody as recorded, and the next plan rewrites it', () => {
    const store: Store = new Map();
    const shoots = range(0, 6);
    replay(store, MATCHER, shoots, []);
    const shardKey = [...store.keys()].find((k) => k.startsWith('istio-ingress/acl-connect-8443-m'))!;
    const held = shoots.filter((s) => JSON.stringify(store.get(shardKey)?.spec).includes(`"${s.technicalID}"`));
    expect(held.length).toBeGreaterThan(0);

    // The guard against a missing extraction removed from one header's filter.
    const edited = JSON.parse(JSON.stringify(store.get(shardKey))) as EnvoyFilterObject & { spec: { configPatches: { patch: { value: { typed_config: { matcher: { matcher_list?: unknown } } } } }[] } };
    delete edited.spec.configPatches[0]!.patch.value.typed_config.matcher.matcher_list;
    const withEditedShard = new Map(store).set(shardKey, edited);
    for (const s of held) expect(coveredIn(withEditedShard, MATCHER, s)).toBe(false);
    const repair = planCombinedWrites({ operator: MATCHER, gateways: GATEWAYS, shoots, stored: [...withEditedShard.values()] });
    expect(repair.grow.map(keyOf)).toEqual([shardKey]);

    // The extraction's regex changed: no shoot is protected as recorded on that gateway and port.
    const extractionKey = `istio-ingress/${extractionObjectName(8443)}`;
    const extraction = JSON.parse(JSON.stringify(store.get(extractionKey)).replace('kube-apiserver-socket', 'kube-apiserver-sockets')) as EnvoyFilterObject;
    const withEditedExtraction = new Map(store).set(extractionKey, extraction);
    for (const s of shoots) expect(coveredIn(withEditedExtraction, MATCHER, s)).toBe(false);
    expect(planCombinedWrites({ operator: MATCHER, gateways: GATEWAYS, shoots, stored: [...withEditedExtraction.values()] }).grow.map(keyOf)).toEqual([extractionKey]);
  });

  it('a shoot that fits a shard of the old form but none of the new keeps its old-form shard (and its extraction) after a switch', () => {
    const budget = 16 * 1024 - 4096;
    const sized = (n: number): AppliedAcl => ({ ...shoot(99), rule: rule('ALLOW', 'remote_ip', Array.from({ length: n }, (_, i) => `100.${64 + (i >> 8)}.${i & 255}.1/32`)) });
    let switches = 0;
    for (const [from, to] of [
      [RULES, MATCHER],
      [MATCHER, RULES],
    ] as const) {
      const fits = (op: OperatorConfig, s: AppliedAcl) => combinedForm(op).bytes(s.technicalID, combinedForm(op).entry(s)) <= budget;
      const n = Array.from({ length: 400 }, (_, i) => i + 1).find((k) => fits(from, sized(k)) && !fits(to, sized(k)));
      if (n === undefined) continue;
      const big = sized(n);
      const shoots = [big, ...range(0, 5)];
      const store: Store = new Map();
      replay(store, from, shoots, []);
      expect(coveredIn(store, from, big)).toBe(true);
      const plan = planCombinedWrites({ operator: to, gateways: GATEWAYS, shoots, stored: [...store.values()] });
      expect([...plan.unplaced.keys()]).toEqual([big.technicalID]);
      const run = replay(store, to, shoots, shoots.filter((s) => s !== big));
      expect(run.gaps).toEqual([]);
      // The big shoot is still protected as before by the old form; the others by the new one.
      expect(coveredIn(store, from, big)).toBe(true);
      for (const s of range(0, 5)) expect(coveredIn(store, to, s)).toBe(true);
      switches++;
    }
    expect(switches).toBeGreaterThan(0);
  });

  it('a protected header removed: the extraction reads both header sets until every shard is rewritten; one added: it is extracted before any shard needs it', () => {
    const store: Store = new Map();
    const shoots = range(0, 8);
    replay(store, MATCHER, shoots, []);
    const extraction = `istio-ingress/${extractionObjectName(8443)}`;
    const headersOf = (w: { spec: unknown }) => extractedHeaders(w.spec).sort();

    const narrowed: OperatorConfig = { ...MATCHER, protectedHeaders: ['x-gardener-destination'] };
    const removal = planCombinedWrites({ operator: narrowed, gateways: GATEWAYS, shoots, stored: [...store.values()] });
    const writes = [...removal.grow, ...removal.settle];
    const extractionWrites = writes.map((w, i) => ({ w, i })).filter(({ w }) => keyOf(w) === extraction);
    expect(extractionWrites.map(({ w }) => headersOf(w))).toEqual([
      ['reversed-vpn', 'x-gardener-destination'],
      ['x-gardener-destination'],
    ]);
    // The union is written before, the narrowed extraction after every shard of that gateway and port.
    const shardIndexes = writes.map((w, i) => ({ w, i })).filter(({ w }) => keyOf(w).startsWith('istio-ingress/acl-connect-8443-m')).map(({ i }) => i);
    expect(shardIndexes.length).toBeGreaterThan(0);
    expect(Math.max(...shardIndexes)).toBeLessThan(extractionWrites[1]!.i);
    replay(store, narrowed, shoots, []);
    expect(converged(store, narrowed, shoots)).toBe(true);
    for (const s of shoots) expect(coveredIn(store, narrowed, s)).toBe(true);

    const addition = planCombinedWrites({ operator: MATCHER, gateways: GATEWAYS, shoots, stored: [...store.values()] });
    const added = [...addition.grow, ...addition.settle].filter((w) => keyOf(w) === extraction);
    expect(added.map((w) => headersOf(w))).toEqual([['reversed-vpn', 'x-gardener-destination']]);
    expect(keyOf(addition.grow[0]!)).toMatch(/-extract$/);
  });
});
