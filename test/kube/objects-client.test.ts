/**
 * src/kube/objects-client.ts against a real kube-apiserver: server-side apply (create, update,
 * no-op), merge and JSON patches, the status subresource, create/delete/get and 404 handling.
 */
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { apiStatusCode, isConflict, isNotFound } from '../../src/kube/errors.js';
import { createApiWriteCounter } from '../../src/kube/metrics.js';
import {
  createObject,
  deleteObject,
  getObject,
  jsonPatch,
  mergePatch,
  patchStatus,
  refOf,
  serverSideApply,
  type KubeClient,
  type ObjectToWrite,
} from '../../src/kube/objects-client.js';
import type { ControlPlane } from './control-plane.js';
import { extension, startWithCRDs } from './kube-test-helpers.js';

const NS = 'shoot--objects--test';
const MANAGER = 'gardener-acl';

function envoyFilter(name: string, port: number): ObjectToWrite {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace: NS, labels: { 'app.kubernetes.io/managed-by': MANAGER } },
    spec: {
      workloadSelector: { labels: { app: 'istio-ingressgateway' } },
      configPatches: [
        {
          applyTo: 'NETWORK_FILTER',
          match: { context: 'GATEWAY', listener: { portNumber: port } },
          patch: { operation: 'INSERT_FIRST', value: { name: 'acl-rbac' } },
        },
      ],
    },
  };
}

const withEnvoyFilterSpec = z.looseObject({ spec: z.looseObject({ configPatches: z.array(z.unknown()) }) });
function specOf(obj: unknown): z.infer<typeof withEnvoyFilterSpec>['spec'] {
  return withEnvoyFilterSpec.parse(obj).spec;
}

describe('objects-client against a real kube-apiserver', () => {
  let cp: ControlPlane;
  let client: KubeClient;
  let registry: Registry;

  beforeAll(async () => {
    cp = await startWithCRDs([NS]);
    registry = new Registry();
    client = { kubeConfig: cp.kubeConfig, onWrite: createApiWriteCounter(registry) };
  }, 120_000);

  afterAll(async () => {
    await cp?.stop();
  });

  it('server-side apply creates, updates, and leaves an identical object untouched', async () => {
    const created = await serverSideApply(client, envoyFilter('ssa', 8443), MANAGER);
    expect(created.metadata.resourceVersion).toBeDefined();
    // Plain JSON: timestamps are strings, not Date objects.
    expect(typeof created.metadata.creationTimestamp).toBe('string');
    const managers = created.metadata.managedFields as { manager: string; operation: string }[];
    expect(managers.map((m) => [m.manager, m.operation])).toEqual([[MANAGER, 'Apply']]);

    const again = await serverSideApply(client, envoyFilter('ssa', 8443), MANAGER);
    expect(again.metadata.resourceVersion).toBe(created.metadata.resourceVersion);

    const changed = await serverSideApply(client, envoyFilter('ssa', 9443), MANAGER);
    expect(changed.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);
    expect(specOf(changed).configPatches).toEqual(specOf(envoyFilter('ssa', 9443)).configPatches);

    // Re-applying an object as read (with managedFields and resourceVersion) is accepted too.
    const fromServer = { ...changed, metadata: { ...changed.metadata } };
    const reapplied = await serverSideApply(client, fromServer, MANAGER);
    expect(reapplied.metadata.resourceVersion).toBe(changed.metadata.resourceVersion);
  });

  it('apply without force fails on fields another manager owns; with force it takes them over', async () => {
    await serverSideApply(client, envoyFilter('contested', 8443), 'someone-else');
    const err = await serverSideApply(client, envoyFilter('contested', 9443), MANAGER, false).catch((e: unknown) => e);
    expect(isConflict(err)).toBe(true);
    const forced = await serverSideApply(client, envoyFilter('contested', 9443), MANAGER, true);
    const managers = (forced.metadata.managedFields as { manager: string }[]).map((m) => m.manager);
    expect(managers).toContain(MANAGER);
  });

  it('applies built-in kinds as plain JSON too (kind resolved by discovery)', async () => {
    const secret = await serverSideApply(
      client,
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'mr-acl', namespace: NS }, type: 'Opaque', stringData: { 'a.yaml': 'x: 1' } },
      MANAGER,
    );
    expect(secret.kind).toBe('Secret');
    expect(secret.data).toEqual({ 'a.yaml': Buffer.from('x: 1').toString('base64') });
    expect(typeof secret.metadata.creationTimestamp).toBe('string');
  });

  it('JSON patch edits an EnvoyFilter; a failing test operation rejects the whole patch', async () => {
    const base = await serverSideApply(client, envoyFilter('jp', 8443), MANAGER);
    const ref = refOf(base);
    const extra = { applyTo: 'NETWORK_FILTER', match: { context: 'GATEWAY', listener: { portNumber: 443 } }, patch: { operation: 'INSERT_FIRST', value: { name: 'acl-443' } } };
    const patched = await jsonPatch(client, ref, [
      { op: 'test', path: '/metadata/resourceVersion', value: base.metadata.resourceVersion },
      { op: 'add', path: '/spec/configPatches/-', value: extra },
      { op: 'replace', path: '/spec/configPatches/0/match/listener/portNumber', value: 8132 },
    ]);
    const patches = specOf(patched).configPatches as { match: { listener: { portNumber: number } } }[];
    expect(patches.map((p) => p.match.listener.portNumber)).toEqual([8132, 443]);

    const stale = await jsonPatch(client, ref, [
      { op: 'test', path: '/metadata/resourceVersion', value: base.metadata.resourceVersion },
      { op: 'remove', path: '/spec/configPatches/1' },
    ]).catch((e: unknown) => e);
    expect(apiStatusCode(stale)).toBe(422);
    expect(specOf(await getObject(client, ref)).configPatches).toHaveLength(2);
  });

  it('merge patch changes labels; an empty merge patch changes nothing', async () => {
    const base = await serverSideApply(client, envoyFilter('mp', 8443), MANAGER);
    const ref = refOf(base);
    const noop = await mergePatch(client, ref, {});
    expect(noop.metadata.resourceVersion).toBe(base.metadata.resourceVersion);
    const labelled = await mergePatch(client, ref, { metadata: { labels: { touched: 'yes' } } });
    expect(labelled.metadata.labels).toMatchObject({ touched: 'yes', 'app.kubernetes.io/managed-by': MANAGER });
  });

  it('patches the status subresource of an Extension, with optional optimistic locking', async () => {
    const ext = await serverSideApply(client, extension(NS, 'acl'), MANAGER);
    const ref = refOf(ext);
    const lastOperation = {
      type: 'Reconcile',
      state: 'Succeeded',
      progress: 100,
      description: 'done',
      lastUpdateTime: '2026-01-01T00:00:00Z',
    };
    const updated = await patchStatus(client, ref, { observedGeneration: 1, lastOperation });
    expect(updated.status).toEqual({ observedGeneration: 1, lastOperation });
    expect(updated.spec).toEqual(ext.spec);
    expect(updated.metadata.generation).toBe(ext.metadata.generation); // status writes do not bump generation

    const stale = await patchStatus(client, ref, { observedGeneration: 2 }, { resourceVersion: ext.metadata.resourceVersion ?? '' }).catch(
      (e: unknown) => e,
    );
    expect(isConflict(stale)).toBe(true);
    const fresh = await patchStatus(client, ref, { lastError: null }, { resourceVersion: updated.metadata.resourceVersion ?? '' });
    expect(fresh.status).toEqual({ observedGeneration: 1, lastOperation });

    // A status in the main resource is ignored (status is a subresource).
    const viaMain = await mergePatch(client, ref, { status: { observedGeneration: 42 } });
    expect(viaMain.status).toEqual({ observedGeneration: 1, lastOperation });
  });

  it('handles 404: get → undefined, delete ignores it unless asked not to, patches throw NotFound', async () => {
    const missing = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: 'nope', namespace: NS };
    expect(await getObject(client, missing)).toBeUndefined();
    expect(await deleteObject(client, missing)).toBe(false);
    expect(isNotFound(await deleteObject(client, missing, false).catch((e: unknown) => e))).toBe(true);
    expect(isNotFound(await mergePatch(client, missing, {}).catch((e: unknown) => e))).toBe(true);
    expect(isNotFound(await patchStatus(client, missing, {}).catch((e: unknown) => e))).toBe(true);
    // A namespace that does not exist is a 404 as well.
    expect(await getObject(client, { ...missing, namespace: 'no-such-namespace' })).toBeUndefined();
  });

  it('creates (optionally tolerating AlreadyExists) and deletes', async () => {
    const obj = envoyFilter('created', 8443);
    const created = await createObject(client, obj);
    expect(created?.metadata.name).toBe('created');
    expect(isConflict(await createObject(client, obj).catch((e: unknown) => e))).toBe(true);
    expect(await createObject(client, obj, { ignoreAlreadyExists: true })).toBeUndefined();
    expect(await deleteObject(client, refOf(obj))).toBe(true);
    expect(await getObject(client, refOf(obj))).toBeUndefined();
  });

  it('rejects kinds the server does not serve and namespaced kinds without a namespace', async () => {
    await expect(getObject(client, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'Nope', name: 'x', namespace: NS })).rejects.toThrow(
      /does not serve kind Nope/,
    );
    await expect(getObject(client, { apiVersion: 'v1', kind: 'ConfigMap', name: 'x' })).rejects.toThrow(/namespace is required/);
  });

  it('counts every write request by verb and kind', async () => {
    const text = await registry.metrics();
    expect(text).toMatch(/gardener_acl_api_writes_total\{verb="apply",kind="EnvoyFilter"\} \d+/);
    expect(text).toContain('gardener_acl_api_writes_total{verb="patch-status",kind="Extension"} 3');
    expect(text).toContain('gardener_acl_api_writes_total{verb="apply",kind="Secret"} 1');
    expect(text).not.toMatch(/verb="get"/);
  });
});
