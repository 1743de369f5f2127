// The seed both real-Envoy conformance suites serve (enforce in conformance.test.ts, audit in
// audit-conformance.test.ts): the matrix shoots with this suite's always-allowed ranges, the
// Gardener gateway shaped for them, and Gardener's legacy filters with the webhook's patch.
import jsonpatch from 'fast-json-patch';
import type { SeedAcl } from '../../src/acl/model.js';
import { legacyProxyPatch } from '../../src/rbac/legacy-proxy-patch.js';
import { HA_SHOOT, MATRIX_SHOOTS } from '../support/conformance-matrix.js';
import type { TestShoot } from '../support/test-seed.js';
import type { GardenerGatewaySpec } from './gardener-gateway.js';
import { gardenerLegacyProxyEnvoyFilter, type GardenerEra } from './gardener-shapes.js';
import type { JsonObject } from './json.js';

export const DOMAIN = 'ingress.seed.example.test';
export const host = (id: string): string => `api.${id}.example.test`;
/** The ClusterIP of the i-th shoot's kube-apiserver, the PROXY destination of its legacy chain. */
export const apiserverIP = (i: number): string => `240.0.0.${10 + i}`;

// This suite's always-allowed ranges (the Istio suite derives its own from Gardener's objects).
const ALWAYS_ALLOWED: Readonly<Record<string, Pick<TestShoot, 'always' | 'legacyProxyAllowed'>>> = {
  'shoot--p--foo': { always: ['10.250.0.0/16'], legacyProxyAllowed: ['100.96.0.0/11'] },
  'shoot--bar--a': { always: ['10.250.0.0/16'] },
};
export const CONFORMANCE_SHOOTS: TestShoot[] = MATRIX_SHOOTS.map((s) => ({ ...s, ...ALWAYS_ALLOWED[s.id], hosts: [host(s.id)] }));

export function conformanceGatewaySpec(era: GardenerEra): GardenerGatewaySpec {
  return {
    era,
    family: 'dual',
    observabilityWildcardDomain: DOMAIN,
    shoots: CONFORMANCE_SHOOTS.map((s) => ({ technicalID: s.id, sniChains: [[host(s.id)]], ...(s.id === HA_SHOOT ? { haVpnServers: 5 } : {}) })),
  };
}

/** Gardener's legacy apiserver-proxy filter of every shoot, as stored after the webhook's patch. */
export function patchedLegacyFilters(seed: SeedAcl): JsonObject[] {
  const acls = new Map(seed.shoots.map((s) => [s.technicalID, s]));
  return CONFORMANCE_SHOOTS.map((s, i) => {
    const original = gardenerLegacyProxyEnvoyFilter({ technicalID: s.id, apiserverIP: apiserverIP(i), name: `${s.id}-apiserver-proxy` });
    const ops = legacyProxyPatch(original, (id) => acls.get(id), seed.operator.legacyProxyPort);
    return jsonpatch.applyPatch(structuredClone(original), ops).newDocument as JsonObject;
  });
}
