/**
 * Smoke test of the envtest-style harness: a real etcd + kube-apiserver, the
 * project's CRDs, CRUD, the status subresource, server-side apply through
 * client-node 1.4.0, RBAC, and persistence across an apiserver restart.
 * Needs the binaries from `bash scripts/setup-kube.sh` (fails, never skips, without them).
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  VersionApi,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startControlPlane, type ControlPlane } from './control-plane.js';

const NS = 'shoot--smoke--test';
const ISTIO = { group: 'networking.istio.io', version: 'v1alpha3', plural: 'envoyfilters' } as const;
const EXT = { group: 'extensions.gardener.cloud', version: 'v1alpha1', plural: 'extensions' } as const;

interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    generation?: number;
    resourceVersion?: string;
    managedFields?: { manager?: string; operation?: string }[];
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const timings: Record<string, number> = {};
async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const t = Date.now();
  try {
    return await fn();
  } finally {
    timings[label] = Date.now() - t;
  }
}

function envoyFilter(name: string, port: number): Obj & Record<string, unknown> {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace: NS },
    spec: {
      workloadSelector: { labels: { app: 'istio-ingressgateway' } },
      priority: 10,
      configPatches: [
        {
          applyTo: 'NETWORK_FILTER',
          match: {
            context: 'GATEWAY',
            listener: { portNumber: port, filterChain: { filter: { name: 'envoy.filters.network.tcp_proxy' } } },
          },
          patch: {
            operation: 'INSERT_BEFORE',
            value: {
              name: 'acl-rbac',
              typed_config: {
                '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC',
                stat_prefix: 'acl',
                rules: { action: 'ALLOW', policies: {} },
              },
            },
          },
        },
      ],
    },
  };
}

describe('real kube-apiserver + etcd (test/kube/control-plane.ts)', () => {
  let cp: ControlPlane;
  let custom: CustomObjectsApi;
  const suiteStart = Date.now();

  beforeAll(async () => {
    cp = await timed('start', () => startControlPlane());
    await timed('installCRDs', () => cp.installCRDs());
    custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
  }, 180_000);

  afterAll(async () => {
    await timed('stop', async () => cp?.stop());
    timings.total = Date.now() - suiteStart;
    console.info(`control-plane smoke timings (ms): ${JSON.stringify(timings)}`);
  });

  it('serves the pinned Kubernetes version', async () => {
    const info = await cp.kubeConfig.makeApiClient(VersionApi).getCode();
    expect(info.gitVersion).toBe(cp.kubernetesVersion);
    expect(cp.server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('creates and reads an EnvoyFilter; the typed match schema prunes unknown fields', async () => {
    const ef = envoyFilter('acl-smoke', 8443);
    const patches = (ef.spec as { configPatches: { match: Record<string, unknown> }[] }).configPatches;
    patches[0]!.match.listenr = { portNumber: 1 }; // a typo: not in the schema
    await custom.createNamespacedCustomObject({ ...ISTIO, namespace: NS, body: ef });
    const got = (await custom.getNamespacedCustomObject({ ...ISTIO, namespace: NS, name: 'acl-smoke' })) as Obj;
    const patch0 = (got.spec?.configPatches as Record<string, Record<string, unknown>>[])[0]!;
    expect(patch0.match).toEqual({
      context: 'GATEWAY',
      listener: { portNumber: 8443, filterChain: { filter: { name: 'envoy.filters.network.tcp_proxy' } } },
    });
    // patch.value is preserved verbatim (x-kubernetes-preserve-unknown-fields).
    expect(patch0.patch).toEqual((ef.spec as { configPatches: Record<string, unknown>[] }).configPatches[0]!.patch);
  });

  it('rejects an EnvoyFilter with an invalid enum (real OpenAPI validation)', async () => {
    const bad = envoyFilter('acl-bad', 8443);
    (bad.spec as { configPatches: { applyTo: string }[] }).configPatches[0]!.applyTo = 'NETWORK_FILTERS';
    const err = await custom.createNamespacedCustomObject({ ...ISTIO, namespace: NS, body: bad }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiException);
    expect((err as ApiException<string>).code).toBe(422);
  });

  it('updates Extension status through the status subresource only', async () => {
    await custom.createNamespacedCustomObject({
      ...EXT,
      namespace: NS,
      body: {
        apiVersion: 'extensions.gardener.cloud/v1alpha1',
        kind: 'Extension',
        metadata: { name: 'acl', namespace: NS },
        spec: { type: 'acl', providerConfig: { rule: { action: 'ALLOW', cidrs: ['10.0.0.0/8'], type: 'remote_ip' } } },
        status: { observedGeneration: 99 }, // ignored on create: status is a subresource
      },
    });
    const created = (await custom.getNamespacedCustomObject({ ...EXT, namespace: NS, name: 'acl' })) as Obj;
    expect(created.status).toBeUndefined();
    expect(created.metadata.generation).toBe(1);

    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const status = {
      observedGeneration: 1,
      lastOperation: { type: 'Create', state: 'Succeeded', progress: 100, description: 'ok', lastUpdateTime: now },
      state: { gatewayNamespaces: ['istio-ingress'] },
    };
    await custom.patchNamespacedCustomObjectStatus(
      { ...EXT, namespace: NS, name: 'acl', body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const updated = (await custom.getNamespacedCustomObject({ ...EXT, namespace: NS, name: 'acl' })) as Obj;
    expect(updated.status).toEqual(status);
    expect(updated.metadata.generation).toBe(1); // status writes do not bump the generation

    // The schema's required fields are enforced: lastOperation without progress is invalid.
    const err = await custom
      .patchNamespacedCustomObjectStatus(
        { ...EXT, namespace: NS, name: 'acl', body: { status: { lastOperation: { progress: null } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch((e: unknown) => e);
    expect((err as ApiException<string>).code).toBe(422);
  });

  it('enforces the immutability of Extension spec.class (CEL rule)', async () => {
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'garden' } } });
    await custom.createNamespacedCustomObject({
      ...EXT,
      namespace: 'garden',
      body: {
        apiVersion: 'extensions.gardener.cloud/v1alpha1',
        kind: 'Extension',
        metadata: { name: 'acl-seed', namespace: 'garden' },
        spec: { type: 'acl', class: 'seed' },
      },
    });
    const err = await custom
      .patchNamespacedCustomObject(
        { ...EXT, namespace: 'garden', name: 'acl-seed', body: { spec: { class: 'shoot' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch((e: unknown) => e);
    expect((err as ApiException<string>).code).toBe(422);
    expect(String((err as ApiException<string>).body)).toContain('Value is immutable');
  });

  it('server-side applies with a field manager and reports conflicts', async () => {
    const apply = (body: object, fieldManager: string, force?: boolean) =>
      custom.patchNamespacedCustomObject(
        { ...ISTIO, namespace: NS, name: 'acl-combined', body, fieldManager, ...(force === undefined ? {} : { force }) },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
    const desired = envoyFilter('acl-combined', 9443);
    const first = (await apply(desired, 'gardener-acl', true)) as Obj;
    expect(first.metadata.managedFields?.map((m) => [m.manager, m.operation])).toContainEqual(['gardener-acl', 'Apply']);

    // Re-applying the same content is a no-op.
    const again = (await apply(desired, 'gardener-acl', true)) as Obj;
    expect(again.metadata.resourceVersion).toBe(first.metadata.resourceVersion);

    // Another manager changing an owned field without force gets 409 Conflict...
    const other = { ...desired, spec: { ...desired.spec, priority: 20 } };
    const conflict = await apply(other, 'someone-else').catch((e: unknown) => e);
    expect((conflict as ApiException<string>).code).toBe(409);
    // ...and with force takes the field over.
    const forced = (await apply(other, 'someone-else', true)) as Obj;
    expect(forced.spec?.priority).toBe(20);
  });

  it('denies a user without RBAC permissions', async () => {
    const kc = await cp.kubeConfigForUser('nobody', ['some-group']);
    const err = await kc
      .makeApiClient(CustomObjectsApi)
      .listNamespacedCustomObject({ ...ISTIO, namespace: NS })
      .catch((e: unknown) => e);
    expect((err as ApiException<string>).code).toBe(403);
  });

  it('keeps objects across an apiserver restart (same port, same etcd)', async () => {
    await timed('restartApiServer', () => cp.restartApiServer());
    const ef = (await custom.getNamespacedCustomObject({ ...ISTIO, namespace: NS, name: 'acl-smoke' })) as Obj;
    expect(ef.metadata.name).toBe('acl-smoke');
    const ext = (await custom.getNamespacedCustomObject({ ...EXT, namespace: NS, name: 'acl' })) as Obj;
    expect(ext.status?.observedGeneration).toBe(1);
    const applied = (await custom.getNamespacedCustomObject({ ...ISTIO, namespace: NS, name: 'acl-combined' })) as Obj;
    expect(applied.spec?.priority).toBe(20);
  });
});
