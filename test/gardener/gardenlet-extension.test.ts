// gardenlet's side of the Extension contract, played by gardenlet's own code: gardener-contract
// drives the `acl` Extension through pkg/component/extensions/extension (Deploy, Wait, Destroy,
// WaitCleanup, Migrate, WaitMigrate, Restore) with gardenlet's interval, severe-error threshold and
// timeout, against the running controller and the real gardener-resource-manager.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AclController } from '../../src/actuator/controller.js';
import { MANAGED_RESOURCE_NAME } from '../../src/actuator/managed-resource.js';
import { createObject, deleteObject, getObject, mergePatch, type ObjectRef } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, allowRule, createSeed, shootObjects, startTestController, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs } from '../kube/kube-test-helpers.js';
import { gardenletExtension, gardenletHealth } from '../support/gardener-contract.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import { refuseWrites } from '../support/refusing-policy.js';

// Shoots without an Extension: gardenlet's deployer creates it.
const S: ShootFixture = { project: 'gl', name: 's' };
const F: ShootFixture = { project: 'gl', name: 'f' };

const ns = technicalID(S);
const extRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
const mrRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace: technicalID(s) });
const filterRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: `acl-${technicalID(s)}`, namespace: DEFAULT_GW.namespace });
const appliedCidrs = async (cp: ControlPlane, s: ShootFixture) =>
  ((await getObject(cp.kubeConfig, extRef(s)))?.['status'] as { state?: { applied?: { rule: { cidrs: string[] } } } } | undefined)?.state?.applied?.rule.cidrs;

describe("gardenlet's Extension deployer drives the controller", () => {
  let cp: ControlPlane;
  let grm: ResourceManager;
  let controller: AclController;
  const deployer = (s: ShootFixture, steps: Parameters<typeof gardenletExtension>[0]['steps'], providerConfig?: unknown, timeout?: string) =>
    gardenletExtension({ kubeconfig: cp.kubeconfigPath, namespace: technicalID(s), steps, ...(providerConfig === undefined ? {} : { providerConfig }), ...(timeout ? { timeout } : {}) });

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [S, F]);
    grm = await startResourceManager(cp);
    controller = await startTestController(cp.kubeConfig);
  }, 120_000);

  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('create: Deploy then Wait succeed, and the shoot is protected as written', async () => {
    const run = await deployer(S, ['deploy', 'wait'], allowRule('203.0.113.0/24'));
    expect(run.steps.map((s) => [s.step, s.ok, s.error])).toEqual([['connect', true, undefined], ['deploy', true, undefined], ['wait', true, undefined]]);
    expect(await appliedCidrs(cp, S)).toEqual(['203.0.113.0/24']);
    await eventually('filter applied by the resource manager', () => getObject(cp.kubeConfig, filterRef(S)), 60_000);
    const health = await gardenletHealth(cp.kubeconfigPath, ns, MANAGED_RESOURCE_NAME);
    expect(health.ok).toBe(true);
  }, 240_000);

  it('an ACL change: Wait returns only once the new ACL is recorded', async () => {
    const run = await deployer(S, ['deploy', 'wait'], allowRule('203.0.113.0/24', '2001:db8::/32'));
    expect(run.ok).toBe(true);
    expect(await appliedCidrs(cp, S)).toEqual(['203.0.113.0/24', '2001:db8::/32']);
  }, 240_000);

  it('an invalid providerConfig: Wait fails at once with our message (not retryable), the old ACL stays; fixed, it succeeds', async () => {
    // gardenlet waits out its timeout on any lastError (shortened here), then fails the shoot's
    // operation with the error's codes: ERR_CONFIGURATION_PROBLEM stops it retrying the shoot.
    const bad = await deployer(S, ['deploy', 'wait'], allowRule('203.0.113.0/24', '10.0.0.300/8'), '20s');
    expect(bad.ok).toBe(false);
    const wait = bad.step('wait');
    expect(wait.error).toContain('Error while waiting for Extension shoot--gl--s/acl to become ready: error during reconciliation: ');
    expect(wait.error).toContain('spec.providerConfig.rule.cidrs[1]: "10.0.0.300/8" is not a valid CIDR');
    expect(wait.codes).toEqual(['ERR_CONFIGURATION_PROBLEM']);
    expect(await appliedCidrs(cp, S)).toEqual(['203.0.113.0/24', '2001:db8::/32']);
    expect(await getObject(cp.kubeConfig, filterRef(S))).toBeDefined();
    const fixed = await deployer(S, ['deploy', 'wait'], allowRule('192.0.2.0/24'));
    expect(fixed.ok).toBe(true);
    expect(await appliedCidrs(cp, S)).toEqual(['192.0.2.0/24']);
  }, 300_000);

  it('a transient API failure (ManagedResource writes refused for a while): Wait still succeeds within gardenlet’s timeout', async () => {
    // A probe ManagedResource is refused once the policy is enforced.
    const probe: ObjectRef = { apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: 'probe', namespace: ns };
    const removePolicy = await refuseWrites(
      cp.kubeConfig,
      'refuse-mr',
      { apiGroup: 'resources.gardener.cloud', resource: 'managedresources', expression: 'false', message: 'the seed is having a bad day' },
      async () => {
        await createObject(cp.kubeConfig, { apiVersion: probe.apiVersion, kind: probe.kind, metadata: { name: probe.name, namespace: ns }, spec: { secretRefs: [] } });
        await deleteObject(cp.kubeConfig, probe);
      },
    );
    const running = deployer(S, ['deploy', 'wait'], allowRule('192.0.2.0/25'));
    try {
      // The Extension shows the failure while it lasts.
      await eventually('the failure reaches the status', async () => {
        const status = (await getObject(cp.kubeConfig, extRef(S)))?.['status'] as { lastError?: { description?: string } } | undefined;
        return status?.lastError?.description?.includes('the seed is having a bad day');
      }, 60_000);
      await sleep(2_000);
    } finally {
      await removePolicy();
    }
    const run = await running;
    expect(run.steps.map((s) => [s.step, s.ok])).toEqual([['connect', true], ['deploy', true], ['wait', true]]);
    expect(await appliedCidrs(cp, S)).toEqual(['192.0.2.0/25']);
  }, 300_000);

  it('hibernation (no Gateway): Deploy and Wait succeed and the filters stay', async () => {
    const gateway = shootObjects(S).find((o) => o.kind === 'Gateway');
    if (!gateway) throw new Error('fixture without Gateway');
    const gatewayRef: ObjectRef = { apiVersion: gateway.apiVersion, kind: 'Gateway', name: gateway.metadata.name, namespace: ns };
    await deleteObject(cp.kubeConfig, gatewayRef);
    const run = await deployer(S, ['deploy', 'wait'], allowRule('192.0.2.0/25'));
    expect(run.ok).toBe(true);
    expect(await getObject(cp.kubeConfig, filterRef(S))).toBeDefined();
    await createObject(cp.kubeConfig, gateway);
    const woken = await deployer(S, ['deploy', 'wait'], allowRule('192.0.2.0/25'));
    expect(woken.ok).toBe(true);
  }, 300_000);

  it('migrate: Migrate and WaitMigrate succeed, the filters leave this seed and every finalizer goes; Restore brings them back', async () => {
    // Another controller's finalizer: Gardener's migrate removes all of them (RemoveAllFinalizers),
    // so that the Extension can be deleted on this seed.
    await mergePatch(cp.kubeConfig, extRef(S), { metadata: { finalizers: ['extensions.gardener.cloud/acl', 'example.com/other'] } });
    const run = await deployer(S, ['migrate', 'wait-migrate']);
    expect(run.ok).toBe(true);
    expect(await getObject(cp.kubeConfig, mrRef(S))).toBeUndefined();
    expect(await getObject(cp.kubeConfig, filterRef(S))).toBeUndefined();
    await eventually('every finalizer gone, the migrate annotation too', async () => {
      const metadata = (await getObject(cp.kubeConfig, extRef(S)))?.['metadata'] as { finalizers?: string[]; annotations?: Record<string, string> };
      return (metadata.finalizers ?? []).length === 0 && metadata.annotations?.['gardener.cloud/operation'] === undefined;
    }, 30_000);
    const restored = await deployer(S, ['restore', 'wait'], allowRule('192.0.2.0/25'));
    expect(restored.ok).toBe(true);
    await eventually('filter applied again', () => getObject(cp.kubeConfig, filterRef(S)), 60_000);
  }, 300_000);

  it('delete: Destroy and WaitCleanup succeed only after the resource manager removed the filters', async () => {
    const run = await deployer(S, ['destroy', 'wait-cleanup']);
    expect(run.ok).toBe(true);
    expect(await getObject(cp.kubeConfig, extRef(S))).toBeUndefined();
    expect(await getObject(cp.kubeConfig, mrRef(S))).toBeUndefined();
    expect(await getObject(cp.kubeConfig, filterRef(S))).toBeUndefined();
  }, 300_000);

  it('force-delete: with the shoot’s force-deletion confirmation, delete completes although the resource manager is gone', async () => {
    const created = await deployer(F, ['deploy', 'wait'], allowRule('198.51.100.0/24'));
    expect(created.ok).toBe(true);
    await eventually('F filter applied', () => getObject(cp.kubeConfig, { ...filterRef(F) }), 60_000);
    await grm.stop();
    await mergePatch(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster', name: technicalID(F) }, {
      spec: { shoot: { metadata: { annotations: { 'confirmation.gardener.cloud/force-deletion': 'true' } } } },
    });
    const run = await deployer(F, ['destroy', 'wait-cleanup'], undefined, '60s');
    expect(run.ok).toBe(true);
    expect(await getObject(cp.kubeConfig, extRef(F))).toBeUndefined();
    expect(await getObject(cp.kubeConfig, filterRef(F))).toBeUndefined();
  }, 300_000);
});
