import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { findLegacyChains, legacyProxyPatch, type LegacyProxyAcl } from '../../src/rbac/legacy-proxy-patch.js';
import { cidr, rule } from '../support/test-seed.js';

/** Gardener's per-shoot EnvoyFilter for the legacy apiserver-proxy port (Gardener <= 1.113 shape). */
function gardenerLegacyFilter(id: string, name = id, cluster = `outbound|443||kube-apiserver.${id}.svc.cluster.local`): Record<string, unknown> {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace: 'istio-ingress' },
    spec: {
      workloadSelector: { labels: { app: 'istio-ingressgateway', istio: 'ingressgateway' } },
      configPatches: [
        {
          applyTo: 'FILTER_CHAIN',
          match: { context: 'ANY', listener: { portNumber: 8443 } },
          patch: {
            operation: 'ADD',
            value: {
              filter_chain_match: { destination_port: 443, prefix_ranges: [{ address_prefix: '240.0.0.10', prefix_len: 32 }] },
              filters: [
                {
                  name: 'envoy.filters.network.tcp_proxy',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
                    stat_prefix: cluster,
                    cluster,
                  },
                },
              ],
            },
          },
        },
      ],
    },
  };
}

const ACL: LegacyProxyAcl = { rule: rule('ALLOW', 'remote_ip', ['203.0.113.0/24']), alwaysAllowed: [cidr('10.250.0.0/16')], legacyProxyAllowed: [cidr('100.96.0.0/11')] };

function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, sortKeysDeep(v)]));
  return value;
}

describe('legacy apiserver-proxy patch', () => {
  it('inserts the RBAC filter before tcp_proxy, and asking again yields no operations', () => {
    const original = gardenerLegacyFilter('shoot--p--a');
    const ops = legacyProxyPatch(original, () => ACL, 8443);
    expect(ops).toHaveLength(1);
    expect(ops[0]).toMatchObject({ op: 'replace', path: '/spec/configPatches/0/patch/value/filters' });
    const patched = jsonpatch.applyPatch(structuredClone(original), ops).newDocument as { spec: { configPatches: { patch: { value: { filters: { name: string }[] } } }[] } };
    expect(patched.spec.configPatches[0]?.patch.value.filters.map((f) => f.name)).toEqual(['gardener-acl-legacy-proxy', 'envoy.filters.network.tcp_proxy']);
    expect(legacyProxyPatch(patched, () => ACL, 8443)).toEqual([]);
    // The API server hands objects back with sorted keys: still nothing to do.
    expect(legacyProxyPatch(sortKeysDeep(patched), () => ACL, 8443)).toEqual([]);
  });

  it('admits the shoot’s pods on this path and follows rule changes', () => {
    const patched = jsonpatch.applyPatch(gardenerLegacyFilter('shoot--p--a'), legacyProxyPatch(gardenerLegacyFilter('shoot--p--a'), () => ACL, 8443)).newDocument;
    expect(JSON.stringify(patched)).toContain('"100.96.0.0"');
    const changed: LegacyProxyAcl = { ...ACL, rule: rule('DENY', 'remote_ip', ['0.0.0.0/0']) };
    const ops = legacyProxyPatch(patched, () => changed, 8443);
    expect(ops).toHaveLength(1);
    expect(JSON.stringify(ops)).toContain('"action":"DENY"');
  });

  it('removes the filter when the shoot has no ACL any more, and leaves unrelated filters alone', () => {
    const patched = jsonpatch.applyPatch(gardenerLegacyFilter('shoot--p--a'), legacyProxyPatch(gardenerLegacyFilter('shoot--p--a'), () => ACL, 8443)).newDocument;
    const ops = legacyProxyPatch(patched, () => undefined, 8443);
    const restored = jsonpatch.applyPatch(structuredClone(patched), ops).newDocument;
    expect(restored).toEqual(gardenerLegacyFilter('shoot--p--a'));
    expect(legacyProxyPatch(gardenerLegacyFilter('shoot--p--a'), () => undefined, 8443)).toEqual([]);
  });

  it('reads the shoot from the chain’s destination cluster, legacy IDs included, and ignores other objects', () => {
    expect(findLegacyChains(gardenerLegacyFilter('shoot-legacy--old'), 8443)).toEqual([{ patchIndex: 0, technicalID: 'shoot-legacy--old' }]);
    expect(findLegacyChains(gardenerLegacyFilter('shoot--p--a', 'shoot--p--a-apiserver-proxy'), 8443)).toEqual([{ patchIndex: 0, technicalID: 'shoot--p--a' }]);
    expect(findLegacyChains(gardenerLegacyFilter('shoot--p--a'), 9443)).toEqual([]);
    // With Istio TLS termination (1.114-1.122) the chain forwards to the shoot's socket listener.
    const socketChain = gardenerLegacyFilter('shoot--p--a', 'shoot--p--a-apiserver-proxy', 'shoot--p--a--kube-apiserver-socket');
    expect(findLegacyChains(socketChain, 8443)).toEqual([{ patchIndex: 0, technicalID: 'shoot--p--a' }]);
    expect(legacyProxyPatch(socketChain, () => ACL, 8443)).toHaveLength(1);
    for (const junk of [null, 42, 'x', {}, { spec: { configPatches: 'no' } }, { spec: { configPatches: [null, { applyTo: 'FILTER_CHAIN' }] } }]) {
      expect(legacyProxyPatch(junk, () => ACL, 8443)).toEqual([]);
    }
  });
});
