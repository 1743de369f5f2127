// Every combined object the controller writes or the render builds stays within the operator's
// maxObjectBytes, for every form, with enforced and audited shoots mixed (both matchers and their
// guards present), several protected headers, and a gateway whose namespace and selector are
// longer than the ones the scaffolding is measured with. The shards are also filled close to the
// limit, so the reserve is not simply made huge.
import { describe, expect, it } from 'vitest';
import type { GatewayWorkload } from '../../src/acl/model.js';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import type { AppliedAcl } from '../../src/gardener/applied-state.js';
import { combinedForm, isShardName } from '../../src/actuator/combined-forms.js';
import { planCombinedWrites } from '../../src/actuator/combined-syncer.js';
import { buildMatcherConnectFilters } from '../../src/rbac/connect-matcher.js';
import { buildEcdsConnectObjects } from '../../src/rbac/connect-matcher-ecds.js';
import { cidr, rule } from '../support/test-seed.js';

const HANDLER_GATEWAY: GatewayWorkload = {
  namespace: 'istio-ingress-handler-internet-facing-restricted--europe-west1-b',
  selector: { app: 'istio-ingressgateway', istio: 'ingressgateway--zone--europe-west1-b', 'handler.exposureclass.gardener.cloud/name': 'internet-facing-restricted', 'istio-role': 'seed' },
};
const ALWAYS = ['10.96.0.0/11', '10.180.0.0/16', '10.250.0.0/16', '198.51.100.1/32'].map(cidr);

/** Shoots of every size up to `most` CIDRs, half of them audited, ALLOW and DENY, remote and direct addresses. */
function mixedShoots(count: number, most: number): AppliedAcl[] {
  return Array.from({ length: count }, (_, i) => {
    const cidrs = Array.from({ length: 1 + ((i * 7) % most) }, (_, k) => (k % 3 === 2 ? `2001:db8:${i}:${k}::/64` : `100.${64 + (i % 64)}.${k}.${(i * 13) % 256}/32`));
    const action = i % 4 === 3 ? 'DENY' : 'ALLOW';
    const type = i % 5 === 4 ? 'direct_remote_ip' : 'remote_ip';
    return { technicalID: `shoot--budget--s${String(i).padStart(4, '0')}`, rule: rule(action, type, cidrs, i % 2 === 0 ? 'audit' : 'enforce'), alwaysAllowed: ALWAYS, legacyProxyAllowed: [] };
  });
}

const sizes = (objects: readonly unknown[]) => objects.map((o) => JSON.stringify(o).length);

describe('combined objects within maxObjectBytes', () => {
  const headerSets = [['reversed-vpn'], ['reversed-vpn', 'x-gardener-destination'], ['reversed-vpn', 'x-gardener-destination', 'x-extra-destination']];
  for (const combined of ['rules', 'matcher', 'ecds'] as const) {
    for (const protectedHeaders of headerSets) {
      it(`${combined} form, ${protectedHeaders.length} protected header(s): every written shard is at most maxObjectBytes and the fullest is close to it`, () => {
        const operator: OperatorConfig = { ...defaultOperatorConfig(), combinedForm: combined, protectedHeaders, maxObjectBytes: 32 * 1024, ecdsBuckets: 2 };
        const shoots = mixedShoots(240, 12);
        const plan = planCombinedWrites({ operator, gateways: [HANDLER_GATEWAY], shoots, stored: [] });
        const shards = [...plan.grow, ...plan.settle].filter((w) => isShardName(w.metadata.name));
        expect(shards.length).toBeGreaterThan(0);
        const written = sizes(shards);
        expect(Math.max(...written)).toBeLessThanOrEqual(operator.maxObjectBytes);
        // Within one largest entry of the limit (plus the gateway room the measured scaffolding leaves): shards are filled.
        const form = combinedForm(operator);
        const largest = Math.max(...shoots.map((s) => form.bytes(s.technicalID, form.entry(s))));
        expect(Math.max(...written)).toBeGreaterThan(operator.maxObjectBytes - Math.max(4096, 2 * 2048) - largest);
      });
    }
  }

  it('the render builds the same bounds: matcher shards and ECDS buckets of audited and enforced shoots', () => {
    const base: OperatorConfig = { ...defaultOperatorConfig(), maxObjectBytes: 32 * 1024 };
    const shoots = mixedShoots(60, 12).map((s) => ({ ...s, sniChains: [] }));
    const matcher = buildMatcherConnectFilters({ operator: { ...base, combinedForm: 'matcher' }, gateways: [HANDLER_GATEWAY], shoots });
    const ecds = buildEcdsConnectObjects({ operator: { ...base, combinedForm: 'ecds', ecdsBuckets: 8 }, gateways: [HANDLER_GATEWAY], shoots });
    for (const object of [...matcher, ...ecds]) expect(JSON.stringify(object).length).toBeLessThanOrEqual(base.maxObjectBytes);
  });

  it('a shoot exactly filling a shard alone is placed, and its object is still within maxObjectBytes', () => {
    for (const combined of ['matcher', 'ecds'] as const) {
      const operator: OperatorConfig = { ...defaultOperatorConfig(), combinedForm: combined, maxObjectBytes: 16 * 1024, ecdsBuckets: 1 };
      const form = combinedForm(operator);
      const sized = (n: number): AppliedAcl => ({ ...mixedShoots(1, 1)[0]!, rule: rule('ALLOW', 'remote_ip', Array.from({ length: n }, (_, k) => `100.64.${k >> 8}.${k & 255}/32`), 'audit') });
      // The most CIDRs that still fit: one more does not.
      const n = Array.from({ length: 400 }, (_, i) => i + 1).filter((k) => !planCombinedWrites({ operator, gateways: [HANDLER_GATEWAY], shoots: [sized(k)], stored: [] }).unplaced.size).pop()!;
      const fitting = sized(n);
      const plan = planCombinedWrites({ operator, gateways: [HANDLER_GATEWAY], shoots: [fitting, { ...mixedShoots(2, 1)[1]!, rule: rule('ALLOW', 'remote_ip', ['100.65.0.0/24'], 'enforce') }], stored: [] });
      const holding = [...plan.grow, ...plan.settle].filter((w) => isShardName(w.metadata.name) && JSON.stringify(w).includes(fitting.technicalID));
      expect(holding.length).toBeGreaterThan(0);
      for (const w of holding) expect(JSON.stringify(w).length).toBeLessThanOrEqual(operator.maxObjectBytes);
      expect(planCombinedWrites({ operator, gateways: [HANDLER_GATEWAY], shoots: [sized(n + 1)], stored: [] }).unplaced.get(fitting.technicalID)).toMatch(
        new RegExp(`^the combined CONNECT policy of ${fitting.technicalID} needs \\d+ bytes, more than the ${operator.maxObjectBytes - form.scaffoldingBytes - 2048} bytes one combined filter may hold \\(operator maxObjectBytes 16384 minus ${form.scaffoldingBytes + 2048} for the object around it\\); list fewer or wider CIDRs, or raise maxObjectBytes$`),
      );
    }
  });
});
