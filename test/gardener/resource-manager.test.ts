// The real gardener-resource-manager judges the ManagedResources the controller writes: it applies
// them, reports their conditions (read by gardenlet's own health check), collects garbage with its
// own garbage collector, and the controller repairs what the resource manager reports broken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AclController } from '../../src/actuator/controller.js';
import { MANAGED_RESOURCE_NAME } from '../../src/actuator/managed-resource.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, mergePatch, type ObjectRef } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, ZONAL_GW, allowRule, createSeed, denyRule, startTestController, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { garbageCollectOnce, gardenletHealth } from '../support/gardener-contract.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const A: ShootFixture = { project: 'grm', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const B: ShootFixture = { project: 'grm', name: 'b', providerConfig: denyRule('198.51.100.0/24'), gateway: ZONAL_GW };

const mrRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace: technicalID(s) });
const extRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
const filterRef = (s: ShootFixture, gatewayNamespace: string): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: `acl-${technicalID(s)}`, namespace: gatewayNamespace });

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
const conditions = async (cp: ControlPlane, s: ShootFixture): Promise<Record<string, Condition>> => {
  const mr = await getObject(cp.kubeConfig, mrRef(s));
  const list = ((mr?.['status'] as { conditions?: Condition[] } | undefined)?.conditions ?? []);
  return Object.fromEntries(list.map((c) => [c.type, c]));
};
const secretOf = async (cp: ControlPlane, s: ShootFixture): Promise<ObjectRef> => {
  const mr = await getObject(cp.kubeConfig, mrRef(s));
  const name = (mr?.['spec'] as { secretRefs: { name: string }[] }).secretRefs[0]?.name ?? '';
  return { apiVersion: 'v1', kind: 'Secret', name, namespace: technicalID(s) };
};

describe('the real gardener-resource-manager applies and checks what the controller writes', () => {
  let cp: ControlPlane;
  let grm: ResourceManager;
  let controller: AclController;

  const applied = (s: ShootFixture) =>
    eventually(`${technicalID(s)}: ResourcesApplied=True from the resource manager`, async () => {
      const c = await conditions(cp, s);
      return c['ResourcesApplied']?.status === 'True' && c;
    }, 60_000);

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW, ZONAL_GW], [A, B]);
    grm = await startResourceManager(cp);
    controller = await startTestController(cp.kubeConfig);
  }, 120_000);

  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('applies each shoot’s filters into its gateway namespace and reports the ManagedResource applied and healthy', async () => {
    for (const [s, gw] of [[A, DEFAULT_GW], [B, ZONAL_GW]] as const) {
      const c = await applied(s);
      expect(c['ResourcesApplied']?.reason).toBe('ApplySucceeded');
      const filter = await eventually('filter stored', () => getObject(cp.kubeConfig, filterRef(s, gw.namespace)));
      // The resource manager marks what it applied with its origin annotation.
      expect((filter['metadata'] as { annotations?: Record<string, string> }).annotations?.['resources.gardener.cloud/origin']).toContain(`${technicalID(s)}/${MANAGED_RESOURCE_NAME}`);
      await eventually(`${technicalID(s)}: ResourcesHealthy=True`, async () => (await conditions(cp, s))['ResourcesHealthy']?.status === 'True', 60_000);
      // Succeeded comes once the combined CONNECT filters hold the shoot too (their sync is paced), as gardenlet waits for it.
      await eventually(`${technicalID(s)}: Extension Succeeded`, async () => ((await getObject(cp.kubeConfig, extRef(s)))?.['status'] as { lastOperation?: { state?: string } } | undefined)?.lastOperation?.state === 'Succeeded', 60_000);
      // gardenlet's own checks (pkg/utils/kubernetes/health) on the Extension and the ManagedResource.
      const health = await gardenletHealth(cp.kubeconfigPath, technicalID(s), MANAGED_RESOURCE_NAME);
      expect(health.steps).toEqual([
        expect.objectContaining({ step: 'connect', ok: true }),
        expect.objectContaining({ step: 'extension', ok: true }),
        expect.objectContaining({ step: 'managed-resource', ok: true }),
      ]);
    }
    expect(await getObject(cp.kubeConfig, filterRef(A, ZONAL_GW.namespace))).toBeUndefined();
  }, 120_000);

  it('the resource manager’s garbage collector keeps the Secret of a live ManagedResource and deletes one orphaned by a crash', async () => {
    const live = await secretOf(cp, A);
    // What a crash between "apply the new ManagedResource" and "delete the old Secret" leaves behind.
    const orphan: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'managedresource-extension-acl-0rphan00', namespace: technicalID(A) };
    await createObject(cp.kubeConfig, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: orphan.name, namespace: orphan.namespace, labels: { 'resources.gardener.cloud/garbage-collectable-reference': 'true', 'app.kubernetes.io/managed-by': 'gardener-acl' } },
      data: { 'envoyfilters.yaml': Buffer.from('# old\n').toString('base64') },
    });
    const gc = await garbageCollectOnce(cp.kubeconfigPath);
    expect(gc.step('gc')).toMatchObject({ ok: true });
    expect(await getObject(cp.kubeConfig, orphan)).toBeUndefined();
    expect(await getObject(cp.kubeConfig, live)).toBeDefined();
    expect(await getObject(cp.kubeConfig, await secretOf(cp, B))).toBeDefined();
    expect((await conditions(cp, A))['ResourcesApplied']?.status).toBe('True');
  }, 60_000);

  it('a deleted Secret: the resource manager reports it, the controller recreates it, the resource manager applies again', async () => {
    const secret = await secretOf(cp, A);
    await deleteObject(cp.kubeConfig, secret);
    const broken = await eventually('the resource manager reports the missing Secret', async () => {
      const c = await conditions(cp, A);
      return c['ResourcesApplied']?.status === 'False' && c['ResourcesApplied'];
    }, 60_000).catch(() => undefined);
    // The controller may repair faster than the resource manager's report becomes visible; either
    // way the Secret must come back and the resource manager must apply it again.
    await eventually('Secret recreated', () => getObject(cp.kubeConfig, secret), 60_000);
    await eventually('applied again', async () => (await conditions(cp, A))['ResourcesApplied']?.status === 'True', 60_000);
    if (broken) expect(broken.message).toContain(secret.name);
    const health = await gardenletHealth(cp.kubeconfigPath, technicalID(A), MANAGED_RESOURCE_NAME);
    expect(health.ok).toBe(true);
  }, 120_000);

  it('a foreign delete of an applied filter is put back by the resource manager', async () => {
    await deleteObject(cp.kubeConfig, filterRef(B, ZONAL_GW.namespace));
    await eventually('filter re-applied', () => getObject(cp.kubeConfig, filterRef(B, ZONAL_GW.namespace)), 60_000);
  }, 90_000);

  it('deleting the Extension: the resource manager deletes the filters before the controller lets the Extension go', async () => {
    await deleteObject(cp.kubeConfig, extRef(B));
    const seen: string[] = [];
    await eventually('Extension gone', async () => {
      // Read in the reverse of the order they must go (filter, ManagedResource, Extension), so that
      // a later read never sees an object that an earlier read already found gone legitimately.
      const ext = await getObject(cp.kubeConfig, extRef(B));
      const mr = await getObject(cp.kubeConfig, mrRef(B));
      const filter = await getObject(cp.kubeConfig, filterRef(B, ZONAL_GW.namespace));
      seen.push(`${ext ? 'ext' : '-'} ${mr ? 'mr' : '-'} ${filter ? 'filter' : '-'}`);
      return ext === undefined;
    }, 60_000);
    // The Extension outlives its ManagedResource, which outlives the filters it applied.
    for (const state of seen) expect(['ext mr filter', 'ext mr -', 'ext - -', '- - -']).toContain(state);
    expect(await getObject(cp.kubeConfig, filterRef(B, ZONAL_GW.namespace))).toBeUndefined();
    expect(await getObject(cp.kubeConfig, mrRef(B))).toBeUndefined();
    // The controller deletes no Secret: the resource manager's garbage collector takes the one nothing references now.
    const gc = await garbageCollectOnce(cp.kubeconfigPath);
    expect(gc.step('gc')).toMatchObject({ ok: true });
    const secrets = (await listAll(cp.kubeConfig, `/api/v1/namespaces/${technicalID(B)}/secrets`)).items;
    expect(secrets).toEqual([]);
  }, 90_000);

  it('the shoot left alone is untouched by all this', async () => {
    await mergePatch(cp.kubeConfig, extRef(A), { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } } });
    await applied(A);
    expect(await getObject(cp.kubeConfig, filterRef(A, DEFAULT_GW.namespace))).toBeDefined();
  }, 60_000);

  it('with the resource manager stopped, a changed ACL stays Processing and the reference’s ManagedResource stays, until it runs again', async () => {
    await grm.stop();
    await mergePatch(cp.kubeConfig, extRef(A), { spec: { providerConfig: allowRule('203.0.113.0/24', '192.0.2.0/24') } });
    const generation = ((await getObject(cp.kubeConfig, extRef(A)))?.['metadata'] as { generation?: number } | undefined)?.generation;
    if (generation === undefined) throw new Error('the API server gave the Extension no metadata.generation');
    // The controller stores the new ManagedResource at once; nothing applies it.
    const secret = await eventually('the new ManagedResource stored', async () => {
      const s = await secretOf(cp, A);
      const data = ((await getObject(cp.kubeConfig, s))?.['data'] as Record<string, string> | undefined)?.['envoyfilters.yaml'];
      return data !== undefined && Buffer.from(data, 'base64').toString('utf8').includes('192.0.2.0') && s;
    }, 30_000);
    // What the reference extension leaves in a shoot namespace (made now: ours was applied before the
    // change, which retires it); it may go only once ours is applied again.
    const referenceMr: ObjectRef = { ...mrRef(A), name: 'acl-seed' };
    await createObject(cp.kubeConfig, { apiVersion: referenceMr.apiVersion, kind: referenceMr.kind, metadata: { name: referenceMr.name, namespace: referenceMr.namespace }, spec: { class: 'seed', keepObjects: false, secretRefs: [] } });
    // The combined CONNECT filters (paced, outside any ManagedResource) take the new ACL without the
    // resource manager; from then on only the resource manager is missing.
    await eventually('the combined filters hold the new ACL on both gateways', async () => {
      for (const gw of [DEFAULT_GW, ZONAL_GW]) {
        const filters = (await listAll(cp.kubeConfig, `/apis/networking.istio.io/v1alpha3/namespaces/${gw.namespace}/envoyfilters`)).items;
        const combined = filters.filter((f) => String((f as { metadata?: { name?: string } }).metadata?.name).startsWith('acl-connect-'));
        if (!combined.some((f) => JSON.stringify(f).includes('192.0.2.0'))) return false;
      }
      return true;
    }, 120_000);
    const until = Date.now() + 15_000;
    const states = new Set<string>();
    while (Date.now() < until) {
      const status = (await getObject(cp.kubeConfig, extRef(A)))?.['status'] as { observedGeneration?: number; lastOperation?: { state?: string }; conditions?: Condition[] } | undefined;
      if (status?.observedGeneration === generation) {
        states.add(status.lastOperation?.state ?? '');
        expect(status.conditions?.find((c) => c.type === 'ControlPlaneHealthy')).toMatchObject({ status: 'Progressing', reason: 'ACLConverging' });
      }
      expect(await getObject(cp.kubeConfig, referenceMr)).toBeDefined();
      await new Promise((r) => setTimeout(r, 500));
    }
    expect([...states]).toEqual(['Processing']);
    // The applied filter still holds the earlier ACL: nothing has served the new one.
    expect(JSON.stringify(await getObject(cp.kubeConfig, filterRef(A, DEFAULT_GW.namespace)))).not.toContain('192.0.2.0');

    grm = await startResourceManager(cp);
    await eventually('Succeeded once the resource manager applied it', async () => {
      const status = (await getObject(cp.kubeConfig, extRef(A)))?.['status'] as { observedGeneration?: number; lastOperation?: { state?: string } } | undefined;
      return status?.observedGeneration === generation && status.lastOperation?.state === 'Succeeded';
    }, 90_000);
    expect(JSON.stringify(await getObject(cp.kubeConfig, filterRef(A, DEFAULT_GW.namespace)))).toContain('192.0.2.0');
    expect((await conditions(cp, A))['ResourcesApplied']?.status).toBe('True');
    expect((await secretOf(cp, A)).name).toBe(secret.name);
    await eventually('the reference’s ManagedResource retired after ours is applied', async () => (await getObject(cp.kubeConfig, referenceMr)) === undefined, 60_000);
  }, 180_000);
});
