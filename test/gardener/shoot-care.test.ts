// What gardenlet's shoot care shows when a shoot's combined CONNECT policies are missing from a
// gateway: they live outside any ManagedResource, so the resource manager's conditions cannot say
// it. The controller reports ControlPlaneHealthy on the Extension and renews Gardener's extension
// heartbeat; Gardener's own HealthChecker.CheckExtensionCondition (gardener-contract care) turns
// that into the Shoot's condition.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AclController } from '../../src/actuator/controller.js';
import { ExtensionHeartbeat } from '../../src/actuator/heartbeat.js';
import { KubeClusterClient } from '../../src/actuator/kube-cluster-client.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, type ObjectRef } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, allowRule, createSeed, startTestController, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs, testLogger } from '../kube/kube-test-helpers.js';
import { gardenletCare } from '../support/gardener-contract.js';
import { refuseWrites } from '../support/refusing-policy.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const A: ShootFixture = { project: 'care', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const HEARTBEAT_NAMESPACE = DEFAULT_GW.namespace;

const extRef: ObjectRef = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(A) };

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}
const controlPlaneHealthy = async (cp: ControlPlane): Promise<Condition | undefined> => {
  const ext = await getObject(cp.kubeConfig, extRef);
  return ((ext?.['status'] as { conditions?: Condition[] } | undefined)?.conditions ?? []).find((c) => c.type === 'ControlPlaneHealthy');
};

describe('gardenlet’s shoot care sees whether the combined CONNECT policies are stored on every gateway', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  let controller: AclController;
  let heartbeat: ExtensionHeartbeat;

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A]);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
    controller = await startTestController(cp.kubeConfig);
    heartbeat = new ExtensionHeartbeat(new KubeClusterClient(cp.kubeConfig), HEARTBEAT_NAMESPACE, 'test', testLogger());
  }, 120_000);

  afterAll(async () => {
    heartbeat?.stop();
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('protected: ControlPlaneHealthy True; without the heartbeat gardenlet calls the report outdated, with it the report holds', async () => {
    const condition = await eventually('ControlPlaneHealthy True', async () => {
      const c = await controlPlaneHealthy(cp);
      return c?.status === 'True' && c;
    }, 60_000);
    expect(condition.reason).toBe('ACLInForce');
    const stale = await gardenletCare(cp.kubeconfigPath, technicalID(A), HEARTBEAT_NAMESPACE);
    expect(stale.step('care-control-plane').error).toMatch(/^Unknown ExtensionOutdatedHealthCheckReport: Extension extension \(shoot--care--a\/acl\) reports an outdated health status/);
    heartbeat.start();
    await eventually('heartbeat Lease', () => getObject(cp.kubeConfig, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: 'gardener-extension-heartbeat', namespace: HEARTBEAT_NAMESPACE }));
    const care = await gardenletCare(cp.kubeconfigPath, technicalID(A), HEARTBEAT_NAMESPACE);
    expect(care.step('care-control-plane')).toMatchObject({ ok: true });
  }, 90_000);

  it('combined filters deleted by someone while the API server refuses to store them again: the Shoot shows it, and recovers', async () => {
    const removePolicy = await refuseWrites(
      cp.kubeConfig,
      'refuse-combined',
      { apiGroup: 'networking.istio.io', resource: 'envoyfilters', expression: "!object.metadata.name.startsWith('acl-connect')", message: 'combined filters are refused by the test' },
      async () => {
        await createObject(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', metadata: { name: 'acl-connect-probe', namespace: DEFAULT_GW.namespace }, spec: {} });
        await deleteObject(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: 'acl-connect-probe', namespace: DEFAULT_GW.namespace });
      },
    );
    try {
      const combined = await listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' });
      expect(combined.items.length).toBeGreaterThan(0);
      for (const f of combined.items as { metadata: { name: string; namespace: string } }[]) {
        await deleteObject(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: f.metadata.name, namespace: f.metadata.namespace });
      }
      const condition = await eventually('ControlPlaneHealthy False', async () => {
        const c = await controlPlaneHealthy(cp);
        return c?.status === 'False' && c;
      }, 60_000);
      expect(condition.reason).toBe('ACLNotInForce');
      const care = await gardenletCare(cp.kubeconfigPath, technicalID(A), HEARTBEAT_NAMESPACE);
      const error = care.step('care-control-plane').error ?? '';
      expect(error).toMatch(/^False ExtensionUnhealthyReport: Extension extension \(shoot--care--a\/acl\) reports failing health check: /);
      expect(error).toContain('the combined CONNECT filters do not protect this shoot as recorded on istio-ingress:8132, istio-ingress:8443');
      expect(error).toContain('combined filters are refused by the test');
    } finally {
      await removePolicy();
    }
    await eventually('ControlPlaneHealthy True again', async () => (await controlPlaneHealthy(cp))?.status === 'True', 120_000);
    const care = await gardenletCare(cp.kubeconfigPath, technicalID(A), HEARTBEAT_NAMESPACE);
    expect(care.step('care-control-plane')).toMatchObject({ ok: true });
  }, 240_000);
});
