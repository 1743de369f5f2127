// Switching a seed over from the reference extension (stackitcloud/gardener-extension-acl): its
// objects are created as its code creates them (Extension finalizer, ManagedResource acl-seed of
// class seed with keepObjects false applied by the real resource manager, the pre-v1.10
// MutatingWebhookConfiguration acl, a providerConfig with a field it ignored and a lower-case
// action it accepted), then this controller starts. It must protect every shoot first, then retire
// what the reference left, and never hang a deletion on the reference's finalizer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AclController } from '../../src/actuator/controller.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, type ObjectRef } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, createSeed, startTestController, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const REFERENCE_FINALIZER = 'extensions.gardener.cloud/acl-extension-service';
// As the reference's users wrote it: lower-case action (it validated case-insensitively) and a
// field it silently ignored.
const referenceProviderConfig = { rule: { action: 'allow', type: 'remote_ip', cidrs: ['203.0.113.0/24'] }, comment: 'office' };
const A: ShootFixture = { project: 'ref', name: 'a' };
const B: ShootFixture = { project: 'ref', name: 'b' };

const extRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
const referenceMrRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: 'acl-seed', namespace: technicalID(s) });
const referenceFilterRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: `acl-api-${technicalID(s)}`, namespace: DEFAULT_GW.namespace });
const ourFilterRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: `acl-${technicalID(s)}`, namespace: DEFAULT_GW.namespace });
const webhookRef: ObjectRef = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', name: 'acl' };

/** The reference's Extension after its own reconcile: its finalizer, Succeeded, status.state.istioNamespace. */
async function referenceExtension(cp: ControlPlane, s: ShootFixture): Promise<void> {
  await createObject(cp.kubeConfig, {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: 'acl', namespace: technicalID(s), finalizers: [REFERENCE_FINALIZER] },
    spec: { type: 'acl', providerConfig: referenceProviderConfig },
  });
}

/** The reference's ManagedResource: class seed, keepObjects false, its chart rendered into Secret key `seed`. */
async function referenceManagedResource(cp: ControlPlane, s: ShootFixture): Promise<void> {
  const id = technicalID(s);
  const filter = [
    'apiVersion: networking.istio.io/v1alpha3',
    'kind: EnvoyFilter',
    'metadata:',
    `  name: acl-api-${id}`,
    `  namespace: ${DEFAULT_GW.namespace}`,
    '  labels: {app.kubernetes.io/name: acl-seed, app.kubernetes.io/instance: seed, app.kubernetes.io/managed-by: Helm}',
    'spec:',
    '  workloadSelector: {labels: {app: istio-ingressgateway, istio: ingressgateway}}',
    '  configPatches: []',
    '',
  ].join('\n');
  await createObject(cp.kubeConfig, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'managedresource-acl-seed', namespace: id },
    data: { seed: Buffer.from(filter).toString('base64') },
  });
  await createObject(cp.kubeConfig, {
    apiVersion: 'resources.gardener.cloud/v1alpha1',
    kind: 'ManagedResource',
    metadata: { name: 'acl-seed', namespace: id },
    spec: { class: 'seed', keepObjects: false, secretRefs: [{ name: 'managedresource-acl-seed' }] },
  });
}

describe('switching over from the reference extension', () => {
  let cp: ControlPlane;
  let grm: ResourceManager;
  let controller: AclController | undefined;

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A, B]);
    grm = await startResourceManager(cp);
    for (const s of [A, B]) {
      await referenceExtension(cp, s);
      await referenceManagedResource(cp, s);
      await eventually(`${technicalID(s)}: the reference's filter applied by the resource manager`, () => getObject(cp.kubeConfig, referenceFilterRef(s)), 60_000);
    }
    // The pre-v1.10 webhook registration: Fail on every EnvoyFilter write, its server long gone.
    await createObject(cp.kubeConfig, {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'acl' },
      webhooks: [{
        name: 'acl.stackit.cloud',
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        failurePolicy: 'Fail',
        timeoutSeconds: 5,
        clientConfig: { service: { name: 'gardener-extension-acl', namespace: 'extension-acl', path: '/mutate', port: 443 } },
        rules: [{ apiGroups: ['networking.istio.io'], apiVersions: ['v1alpha3'], operations: ['CREATE', 'UPDATE'], resources: ['envoyfilters'] }],
      }],
    });
    // Shoot b is deleted before this controller ever saw it: only the reference's finalizer holds it.
    await deleteObject(cp.kubeConfig, extRef(B));
  }, 180_000);

  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('protects the shoot first, then retires the reference’s finalizer, ManagedResource, filters and webhook', async () => {
    controller = await startTestController(cp.kubeConfig);
    await eventually('the reference webhook registration deleted', async () => (await getObject(cp.kubeConfig, webhookRef)) === undefined, 30_000);
    const ext = await eventually('Extension a Succeeded under this controller', async () => {
      const e = await getObject(cp.kubeConfig, extRef(A));
      const status = e?.['status'] as { lastOperation?: { state?: string }; state?: { applied?: { rule?: { action?: string; cidrs?: string[] } } } } | undefined;
      return status?.lastOperation?.state === 'Succeeded' && e;
    }, 90_000);
    const status = ext['status'] as { state: { applied: { rule: { action: string; cidrs: string[] } } } };
    // The reference's lenient input means the same here.
    expect(status.state.applied.rule).toMatchObject({ action: 'ALLOW', cidrs: ['203.0.113.0/24'] });
    expect(await getObject(cp.kubeConfig, ourFilterRef(A))).toBeDefined();
    const finalizers = await eventually('the reference finalizer taken off', async () => {
      const f = ((await getObject(cp.kubeConfig, extRef(A)))?.['metadata'] as { finalizers?: string[] }).finalizers ?? [];
      return !f.includes(REFERENCE_FINALIZER) && f;
    }, 30_000);
    expect(finalizers).toEqual(['extensions.gardener.cloud/acl']);
    await eventually('the reference ManagedResource deleted', async () => (await getObject(cp.kubeConfig, referenceMrRef(A))) === undefined, 60_000);
    await eventually('its filter deleted by the resource manager', async () => (await getObject(cp.kubeConfig, referenceFilterRef(A))) === undefined, 60_000);
    // The ignored field is named to the owner, not refused.
    const events = await eventually('warning Event', async () => {
      const list = (await listAll(cp.kubeConfig, `/api/v1/namespaces/${technicalID(A)}/events`)).items as { reason?: string; message?: string }[];
      return list.filter((e) => e.reason === 'ACLWarning').length > 0 && list.filter((e) => e.reason === 'ACLWarning');
    }, 30_000);
    expect(events[0]?.message).toContain('spec.providerConfig: unknown field(s) "comment" ignored; remove them or check the spelling');
  }, 180_000);

  it('a shoot deleted before the switch is not held by the reference’s finalizer: its objects go and the Extension with them', async () => {
    await eventually('Extension b gone', async () => (await getObject(cp.kubeConfig, extRef(B))) === undefined, 90_000);
    expect(await getObject(cp.kubeConfig, referenceMrRef(B))).toBeUndefined();
    await eventually('its filter deleted by the resource manager', async () => (await getObject(cp.kubeConfig, referenceFilterRef(B))) === undefined, 60_000);
  }, 120_000);

  it('deleting the adopted Extension completes', async () => {
    await deleteObject(cp.kubeConfig, extRef(A));
    await eventually('Extension a gone', async () => (await getObject(cp.kubeConfig, extRef(A))) === undefined, 90_000);
    expect(await getObject(cp.kubeConfig, ourFilterRef(A))).toBeUndefined();
  }, 120_000);
});
