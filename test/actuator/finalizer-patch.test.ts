// Adding our finalizer from a stale cache must never drop another controller's finalizer
// (real kube-apiserver: the patch the reconciler sends, applied to what the server stores).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { addFinalizer, removeReconcileAnnotation } from '../../src/actuator/extension-reconciler.js';
import { extensionSchema, type Extension } from '../../src/gardener/objects.js';
import { createObject, getObject, jsonPatch, mergePatch, type JsonPatchOperation } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { startWithCRDs } from '../kube/kube-test-helpers.js';
import { aclExtension } from './seed-fixture.js';

const NS = 'shoot--p--fin';
const NS2 = 'shoot--p--take-up';
const ref = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: NS };

describe('finalizer add (point 10)', () => {
  let cp: ControlPlane;
  beforeAll(async () => {
    cp = await startWithCRDs([NS, NS2]);
  }, 120_000);
  afterAll(async () => {
    await cp?.stop();
  });

  it('a cache that has not seen another finalizer gets a refusal, and the other finalizer stays', async () => {
    await createObject(cp.kubeConfig, aclExtension(NS, { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['192.0.2.0/24'] } }));
    const stale = extensionSchema.parse(await getObject(cp.kubeConfig, ref)) as Extension;
    // Meanwhile another controller adds its finalizer.
    await mergePatch(cp.kubeConfig, ref, { metadata: { finalizers: ['example.com/other'] } });
    await expect(jsonPatch(cp.kubeConfig, ref, addFinalizer(stale) as unknown as JsonPatchOperation[])).rejects.toMatchObject({ code: 422 });
    expect((await getObject(cp.kubeConfig, ref))?.['metadata']).toMatchObject({ finalizers: ['example.com/other'] });
    // With the current object the finalizer is appended.
    const fresh = extensionSchema.parse(await getObject(cp.kubeConfig, ref)) as Extension;
    await jsonPatch(cp.kubeConfig, ref, addFinalizer(fresh) as unknown as JsonPatchOperation[]);
    expect((await getObject(cp.kubeConfig, ref))?.['metadata']).toMatchObject({ finalizers: ['example.com/other', 'extensions.gardener.cloud/acl'] });
  });

  it('one patch adds the finalizer and takes up gardenlet\'s reconcile; an operation changed meanwhile refuses it whole', async () => {
    const ref2 = { ...ref, namespace: NS2 };
    await createObject(cp.kubeConfig, aclExtension(NS2, { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['192.0.2.0/24'] } }));
    // gardenlet asks for another operation before the patch lands: neither step may happen.
    await mergePatch(cp.kubeConfig, ref2, { metadata: { annotations: { 'gardener.cloud/operation': 'migrate' } } });
    const afterMigrate = extensionSchema.parse(await getObject(cp.kubeConfig, ref2)) as Extension;
    await expect(jsonPatch(cp.kubeConfig, ref2, [...addFinalizer(afterMigrate), ...removeReconcileAnnotation()] as unknown as JsonPatchOperation[])).rejects.toMatchObject({ code: 422 });
    expect((await getObject(cp.kubeConfig, ref2))?.['metadata']).toMatchObject({ annotations: { 'gardener.cloud/operation': 'migrate' } });
    expect((await getObject(cp.kubeConfig, ref2))?.['metadata']).not.toHaveProperty('finalizers');
    // As gardenlet wrote it: both in one write.
    await mergePatch(cp.kubeConfig, ref2, { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } } });
    const current = extensionSchema.parse(await getObject(cp.kubeConfig, ref2)) as Extension;
    await jsonPatch(cp.kubeConfig, ref2, [...addFinalizer(current), ...removeReconcileAnnotation()] as unknown as JsonPatchOperation[]);
    const metadata = (await getObject(cp.kubeConfig, ref2))?.['metadata'] as { finalizers?: string[]; annotations?: Record<string, string> };
    expect(metadata.finalizers).toEqual(['extensions.gardener.cloud/acl']);
    expect(metadata.annotations?.['gardener.cloud/operation']).toBeUndefined();
  });
});
