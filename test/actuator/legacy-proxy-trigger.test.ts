// The controller's nudge for Gardener's legacy apiserver-proxy EnvoyFilters: an empty merge
// patch to each that exists, so the mutating webhook re-admits it with the current ACL.
import { ApiException } from '@kubernetes/client-node';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import type { ClusterClient, ObjectRef } from '../../src/actuator/cluster-client.js';
import type { AclActuator } from '../../src/actuator/acl-actuator.js';
import { testActuator } from './actuator-deps.js';
import type { Extension } from '../../src/gardener/objects.js';
import { legacyProxyPatch, type LegacyProxyAcl } from '../../src/rbac/legacy-proxy-patch.js';
import { cidrs } from '../continuity/protection-oracle.js';
import { rule } from '../support/test-seed.js';
import { legacyFilter } from '../webhook/webhook-fixtures.js';

const ID = 'shoot--p--a';
const key = (r: ObjectRef) => `${r.kind} ${r.namespace ?? ''}/${r.name}`;

/** Gardener's legacy filter `namespace/name` as stored after the webhook admitted it with `stored` (undefined: without our filter). */
function storedLegacyFilter(namespace: string, name: string, stored: LegacyProxyAcl | undefined): Record<string, unknown> {
  const filter = legacyFilter(ID, namespace, name);
  return jsonpatch.applyPatch(filter, legacyProxyPatch(filter, () => stored, defaultOperatorConfig().legacyProxyPort)).newDocument;
}

/** Objects by key, each holding `stored`; records every call; `vanishing` objects are deleted between get and patch. */
function fakeClient(existing: readonly string[], vanishing: readonly string[] = [], stored: LegacyProxyAcl | undefined = acl('192.0.2.0/24')) {
  const calls: string[] = [];
  const client: ClusterClient = {
    get: async (ref) => (existing.includes(key(ref)) ? storedLegacyFilter(ref.namespace ?? '', ref.name, stored) : undefined),
    createIfAbsent: async () => undefined,
    apply: async () => ({}),
    mergePatch: async (ref, patch) => {
      if (vanishing.includes(key(ref))) throw new ApiException(404, 'not found', {}, {});
      calls.push(`merge ${key(ref)} ${JSON.stringify(patch)}`);
    },
    jsonPatch: async (ref) => void calls.push(`json ${key(ref)}`),
    patchStatus: async (ref) => void calls.push(`status ${key(ref)}`),
    delete: async (ref) => void calls.push(`delete ${key(ref)}`),
  };
  return { client, calls };
}

function reconciler(client: ClusterClient): AclActuator {
  return testActuator(client, defaultOperatorConfig());
}

/** A legacy filter stored by "the API server", re-admitted on each write by "a webhook" whose cache holds `webhookAcl()`. */
function admittingClient(webhookAcl: () => LegacyProxyAcl | undefined) {
  let stored: unknown = legacyFilter(ID, 'istio-ingress');
  const client: ClusterClient = {
    get: async (ref) => (ref.name === ID ? (structuredClone(stored) as Record<string, unknown>) : undefined),
    createIfAbsent: async () => undefined,
    apply: async () => ({}),
    mergePatch: async () => {
      const patch = legacyProxyPatch(stored, (id) => (id === ID ? webhookAcl() : undefined), defaultOperatorConfig().legacyProxyPort);
      stored = jsonpatch.applyPatch(structuredClone(stored), patch).newDocument;
    },
    jsonPatch: async () => undefined,
    patchStatus: async () => undefined,
    delete: async () => undefined,
  };
  return client;
}

const acl = (cidr: string): LegacyProxyAcl => ({ rule: rule('ALLOW', 'remote_ip', [cidr]), alwaysAllowed: cidrs(['10.250.0.0/16']), legacyProxyAllowed: [] });

describe('legacy apiserver-proxy trigger', () => {
  it('reads the admitted object back: a webhook whose cache still holds the old ACL is caught, and passes once it caught up', async () => {
    const recorded = acl('203.0.113.0/24');
    let webhookSees: LegacyProxyAcl | undefined = acl('198.51.100.0/24');
    const r = reconciler(admittingClient(() => webhookSees));
    expect(await r.triggerLegacyProxyFilters(ID, ['istio-ingress'], recorded)).toEqual([`istio-ingress/${ID}`]);
    webhookSees = undefined; // a cache that has not seen the Extension at all
    expect(await r.triggerLegacyProxyFilters(ID, ['istio-ingress'], recorded)).toEqual([`istio-ingress/${ID}`]);
    webhookSees = recorded;
    expect(await r.triggerLegacyProxyFilters(ID, ['istio-ingress'], recorded)).toEqual([]);
  });

  it('sends {} to each existing legacy filter of the shoot in its gateway namespaces, skipping missing and vanished ones', async () => {
    const { client, calls } = fakeClient(
      [`EnvoyFilter istio-ingress/${ID}`, `EnvoyFilter istio-ingress--z1/${ID}-apiserver-proxy`, `EnvoyFilter istio-ingress--z1/${ID}`],
      [`EnvoyFilter istio-ingress--z1/${ID}`],
    );
    await reconciler(client).triggerLegacyProxyFilters(ID, ['istio-ingress', 'istio-ingress--z1'], undefined);
    expect(calls).toEqual([`merge EnvoyFilter istio-ingress/${ID} {}`, `merge EnvoyFilter istio-ingress--z1/${ID}-apiserver-proxy {}`]);
  });

  it('writes nothing to a filter that already carries the recorded ACL (its watch would bring the shoot back for nothing)', async () => {
    const recorded = acl('203.0.113.0/24');
    const { client, calls } = fakeClient([`EnvoyFilter istio-ingress/${ID}`], [], recorded);
    expect(await reconciler(client).triggerLegacyProxyFilters(ID, ['istio-ingress'], recorded)).toEqual([]);
    expect(calls).toEqual([]);
  });

  it('nudges them on delete too, so the webhook takes the RBAC filter out', async () => {
    const { client, calls } = fakeClient([`EnvoyFilter istio-ingress/${ID}`]);
    const ext: Extension = {
      apiVersion: 'extensions.gardener.cloud/v1alpha1',
      kind: 'Extension',
      metadata: { name: 'acl', namespace: ID, deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: ['extensions.gardener.cloud/acl'] } as Extension['metadata'],
      spec: { type: 'acl' },
      status: { state: { gatewayNamespaces: ['istio-ingress'] } },
    };
    // The actuator's delete resolves before the generic reconciler takes the finalizer off, so the
    // webhook still sees the Extension in deletion when it re-admits the filter.
    expect(await reconciler(client).delete(ext)).toEqual({ kind: 'done' });
    expect(calls).toContain(`merge EnvoyFilter istio-ingress/${ID} {}`);
    expect(calls.some((c) => c.startsWith('json Extension'))).toBe(false);
  });
});
