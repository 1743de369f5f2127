// A missing input never removes protection: an active acl Extension whose status.state another
// writer emptied or corrupted still has an ACL in force, so Gardener's next write of its legacy
// apiserver-proxy filter keeps the RBAC filter the stored object carries instead of losing it.
import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { extensionSchema, type Extension } from '../../src/gardener/objects.js';
import { FILTER_NAMES } from '../../src/rbac/filter-values.js';
import { AclIndex, staticCacheSource } from '../../src/webhook/acl-index.js';
import { mutateEnvoyFilter } from '../../src/webhook/envoy-filter-mutator.js';
import type { AdmissionRequest } from '../../src/webhook/admission-review.js';
import { appliedState, legacyFilter } from './webhook-fixtures.js';

const operator = defaultOperatorConfig();
const ID = 'shoot--p--lost';
const NAMESPACE = 'istio-ingress';

const extension = (state: unknown): Extension =>
  extensionSchema.parse({
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: 'acl', namespace: ID, finalizers: ['extensions.gardener.cloud/acl'] },
    spec: { type: 'acl' },
    ...(state === undefined ? {} : { status: { state } }),
  });


/** What the API server stores after the webhook answered `request`, a review of the stored filter (admitEnvoyFilter checked its uid). */
function admitted(index: AclIndex, operation: 'CREATE' | 'UPDATE', object: Record<string, unknown>, oldObject?: Record<string, unknown>): Record<string, unknown> {
  const request = { uid: 'u', operation, name: ID, namespace: NAMESPACE, object, ...(oldObject ? { oldObject } : {}) } as AdmissionRequest;
  const verdict = mutateEnvoyFilter(request, index, operator, undefined, true);
  if (!verdict.allowed) throw new Error(`refused: ${verdict.message}`);
  return fastJsonPatch.applyPatch(structuredClone(object), verdict.patch ?? []).newDocument;
}

/** The filter names of the legacy chain, in order, and the RBAC filter itself. */
function chain(filter: Record<string, unknown>): { names: string[]; rbac: unknown } {
  const patches = (filter['spec'] as { configPatches: { applyTo: string; patch: { value: { filters?: { name: string }[] } } }[] }).configPatches;
  const filters = patches.find((p) => p.applyTo === 'FILTER_CHAIN')?.patch.value.filters ?? [];
  return { names: filters.map((f) => f.name), rbac: filters.find((f) => f.name === FILTER_NAMES.legacyProxy) };
}

describe('an active shoot whose recorded ACL is unreadable (legacy apiserver-proxy filter)', () => {
  const protectedFilter = admitted(new AclIndex(staticCacheSource([extension(appliedState(['203.0.113.0/24']))])), 'CREATE', legacyFilter(ID, NAMESPACE));

  it('the filter was protected while the ACL was readable', () => {
    expect(chain(protectedFilter).names[0]).toBe(FILTER_NAMES.legacyProxy);
    expect(JSON.stringify(chain(protectedFilter).rbac)).toContain('203.0.113.0');
  });

  for (const [what, state] of [
    ['emptied', {}],
    ['corrupted', { applied: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['not-a-cidr'] } } }],
    ['removed', undefined],
  ] as const) {
    it(`status.state ${what}: Gardener's rewrite of the filter (its chain without ours) keeps the stored RBAC filter`, () => {
      const index = new AclIndex(staticCacheSource([extension(state)]));
      const rewritten = admitted(index, 'UPDATE', legacyFilter(ID, NAMESPACE), protectedFilter);
      expect(chain(rewritten).names[0]).toBe(FILTER_NAMES.legacyProxy);
      expect(chain(rewritten).rbac).toEqual(chain(protectedFilter).rbac);
      // A write that already carries it changes nothing.
      expect(admitted(index, 'UPDATE', rewritten, rewritten)).toEqual(rewritten);
    });
  }

  it('an active shoot that never had an ACL stays open (nothing to keep); a shoot with no Extension loses the filter', () => {
    const fresh = new AclIndex(staticCacheSource([extension(undefined)]));
    expect(chain(admitted(fresh, 'CREATE', legacyFilter(ID, NAMESPACE))).rbac).toBeUndefined();
    const gone = new AclIndex(staticCacheSource([]));
    expect(chain(admitted(gone, 'UPDATE', protectedFilter, protectedFilter)).rbac).toBeUndefined();
  });
});
