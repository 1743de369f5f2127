// One shoot whose combined policy is larger than a shard must not make the webhook fail for
// every other EnvoyFilter; and the index follows a changed Extension without reading the others again.
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import { extensionSchema, type Extension } from '../../src/gardener/objects.js';
import { AclIndex, staticCacheSource } from '../../src/webhook/acl-index.js';
import { mutateEnvoyFilter } from '../../src/webhook/envoy-filter-mutator.js';
import { legacyFilter } from './webhook-fixtures.js';

const operator: OperatorConfig = { ...defaultOperatorConfig(), maxObjectBytes: 16 * 1024 };

function aclExtension(namespace: string, cidrs: readonly string[], alwaysAllowed: readonly string[]): Extension {
  return extensionSchema.parse({
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: 'acl', namespace, finalizers: ['extensions.gardener.cloud/acl'] },
    spec: { type: 'acl' },
    status: { state: { gatewayNamespaces: ['istio-ingress'], applied: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs }, alwaysAllowed, legacyProxyAllowed: [] } } },
  });
}


/** The recorded ACL the index answers with (not KEEP_AS_STORED). */
const recorded = (acl: ReturnType<AclIndex['legacyAcl']>) => (typeof acl === 'object' ? acl : undefined);

describe('webhook index with an oversized shoot', () => {
  const huge = aclExtension('shoot--p--huge', ['203.0.113.0/24'], Array.from({ length: 200 }, (_, i) => `198.18.${i}.7/32`));
  const small = aclExtension('shoot--p--small', ['192.0.2.0/24'], ['10.250.0.0/16']);
  const index = new AclIndex(staticCacheSource([huge, small]));

  it('point 5: answers the legacy filter of another shoot', () => {
    const verdict = mutateEnvoyFilter({ uid: 'u1', operation: 'CREATE', name: 'shoot--p--small', namespace: 'istio-ingress', object: legacyFilter('shoot--p--small', 'istio-ingress') } as Parameters<typeof mutateEnvoyFilter>[0], index, operator);
    expect(verdict.allowed).toBe(true);
    expect(recorded(index.legacyAcl('shoot--p--small'))?.rule.cidrs.length).toBe(1);
    // The oversized shoot keeps its legacy-path protection too: that filter is per shoot.
    expect(recorded(index.legacyAcl('shoot--p--huge'))?.alwaysAllowed.length).toBe(200);
  });

  it('a changed Extension is read again; unchanged ones are not (the cache keeps them as the same objects)', () => {
    const reads: string[] = [];
    // Records every read of status.state, the recorded ACL.
    const watch = (e: Extension): Extension =>
      new Proxy(e, {
        get: (target, key) => {
          const value: unknown = Reflect.get(target, key);
          if (key !== 'status' || typeof value !== 'object' || value === null) return value;
          return new Proxy(value, { get: (status, field) => (field === 'state' && reads.push(e.metadata.namespace), Reflect.get(status, field)) });
        },
      });
    const [watchedHuge, watchedSmall] = [watch(huge), watch(small)];
    let extensions = [watchedHuge, watchedSmall];
    let revision = 0;
    const incremental = new AclIndex({ extensions: () => extensions, revision: () => revision, synced: () => true });
    expect(recorded(incremental.legacyAcl('shoot--p--small'))?.rule.cidrs.length).toBe(1);
    expect(reads.sort()).toEqual(['shoot--p--huge', 'shoot--p--small']);
    reads.length = 0;
    extensions = [watchedHuge, watch(aclExtension('shoot--p--small', ['192.0.2.0/24', '198.51.100.0/24'], ['10.250.0.0/16']))];
    revision++;
    expect(recorded(incremental.legacyAcl('shoot--p--small'))?.rule.cidrs.length).toBe(2);
    expect(recorded(incremental.legacyAcl('shoot--p--huge'))?.alwaysAllowed.length).toBe(200);
    expect(reads).toEqual(['shoot--p--small']);
  });
});
