// The extension controller against a real kube-apiserver, as the chart ships it (the default form
// and pace): everything is asserted through objects the API server stored, and every write the
// controller sends is counted.
import { createHash } from 'node:crypto';

import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AclController } from '../../src/actuator/controller.js';
import { KubeClusterClient } from '../../src/actuator/kube-cluster-client.js';
import { MANAGED_RESOURCE_NAME } from '../../src/actuator/managed-resource.js';
import { storedEntriesAnyForm } from '../../src/actuator/combined-forms.js';
import type { EnvoyFilterObject } from '../../src/gardener/objects.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, mergePatch, patchStatus, type ObjectRef } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs } from '../kube/kube-test-helpers.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import { DEFAULT_GW, ZONAL_GW, aclExtension, allowRule, createSeed, denyRule, shootObjects, startTestController, technicalID, type ShootFixture } from './seed-fixture.js';
import { refuseWrites } from '../support/refusing-policy.js';

function shootGateway(s: ShootFixture): { apiVersion: string; kind: string; metadata: { name: string; namespace: string }; spec: Record<string, unknown> } {
  const gateway = shootObjects(s).find((o) => o.kind === 'Gateway');
  if (!gateway) throw new Error('fixture without Gateway');
  return gateway as unknown as { apiVersion: string; kind: string; metadata: { name: string; namespace: string }; spec: Record<string, unknown> };
}

const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const B: ShootFixture = { project: 'p', name: 'b', providerConfig: denyRule('198.51.100.0/24'), gateway: ZONAL_GW };
const OPEN: ShootFixture = { project: 'p', name: 'open' };
const C: ShootFixture = { project: 'q', name: 'c', providerConfig: allowRule('192.0.2.0/24') };

const extRef = (ns: string): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: ns });
const mrRef = (ns: string): ObjectRef => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace: ns });

interface ExtensionView {
  metadata: { annotations?: Record<string, string>; finalizers?: string[]; generation?: number; resourceVersion: string };
  status?: { lastOperation?: { type: string; state: string }; lastError?: { description: string; codes?: string[] }; observedGeneration?: number; state?: { applied?: { rule: { cidrs: string[]; mode?: string } } } };
}

/** The controller's client, with every live GET noted (the caches should answer everything else). */
class ReadCountingClient extends KubeClusterClient {
  constructor(kubeConfig: ConstructorParameters<typeof KubeClusterClient>[0], options: ConstructorParameters<typeof KubeClusterClient>[1], private readonly reads: string[]) {
    super(kubeConfig, options);
  }

  override async get(ref: ObjectRef): Promise<Record<string, unknown> | undefined> {
    this.reads.push(`${ref.kind} ${ref.namespace ?? ''}/${ref.name}`);
    return super.get(ref);
  }
}

describe('extension controller on a real kube-apiserver', () => {
  let cp: ControlPlane;
  let controller: AclController;
  let grm: ResourceManager;
  const writes: string[] = [];
  const reads: string[] = [];
  const registry = new Registry();
  const filterRef = (s: ShootFixture, namespace: string): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: `acl-${technicalID(s)}`, namespace });

  const ext = async (s: ShootFixture) => (await getObject(cp.kubeConfig, extRef(technicalID(s)))) as unknown as ExtensionView | undefined;
  const combined = async () =>
    (await listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' })).items as unknown as EnvoyFilterObject[];
  /** What the combined objects of a gateway hold, per shoot: the default form keeps each shoot once per gateway, in its bucket (for both ports). */
  const entriesIn = async (namespace: string) => (await combined()).filter((f) => f.metadata.namespace === namespace).map((f) => storedEntriesAnyForm(f)).filter((e) => e.size > 0);
  const policiesIn = async (namespace: string) => (await entriesIn(namespace)).flatMap((entries) => [...entries.keys()]);

  /** The controller has nothing queued or running, steadily. */
  const settled = async (what: string) => {
    await eventually(what, async () => {
      if (!controller.idle()) return false;
      await sleep(300);
      return controller.idle();
    }, 30_000);
  };
  const succeeded = (s: ShootFixture) =>
    eventually(`${technicalID(s)} reconciled`, async () => {
      const e = await ext(s);
      return e?.status?.lastOperation?.state === 'Succeeded' && e.status.observedGeneration === e.metadata.generation && !e.metadata.annotations?.['gardener.cloud/operation'] && e;
    }, 30_000);

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW, ZONAL_GW], [A, B, OPEN]);
    // The real gardener-resource-manager applies the ManagedResources (test/gardener has its own checks).
    grm = await startResourceManager(cp);
    controller = await startTestController(cp.kubeConfig, {
      client: new ReadCountingClient(cp.kubeConfig, { onWrite: (verb, kind) => writes.push(`${verb} ${kind}`) }, reads),
      registry,
    });
  }, 120_000);

  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('a new ACL shoot gets its ManagedResource and appears in the combined filter of every gateway', async () => {
    for (const s of [A, B]) {
      const e = await succeeded(s);
      expect(e.metadata.finalizers).toContain('extensions.gardener.cloud/acl');
      expect(e.status?.state?.applied?.rule.cidrs).toEqual(s === A ? ['203.0.113.0/24'] : ['198.51.100.0/24']);
      expect(await getObject(cp.kubeConfig, mrRef(technicalID(s)))).toBeDefined();
    }
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(OPEN)))).toBeUndefined();
    await settled('initial convergence');
    for (const gw of [DEFAULT_GW, ZONAL_GW]) {
      expect((await policiesIn(gw.namespace)).sort()).toEqual(['shoot--p--a', 'shoot--p--b']);
    }
    // The resource manager puts each shoot's filters into its gateway's namespace, and only there.
    await eventually('A filter applied', () => getObject(cp.kubeConfig, filterRef(A, DEFAULT_GW.namespace)), 60_000);
    await eventually('B filter applied', () => getObject(cp.kubeConfig, filterRef(B, ZONAL_GW.namespace)), 60_000);
    expect(await getObject(cp.kubeConfig, filterRef(A, ZONAL_GW.namespace))).toBeUndefined();
    expect(await getObject(cp.kubeConfig, filterRef(B, DEFAULT_GW.namespace))).toBeUndefined();
  }, 90_000);

  it('an unchanged resync performs zero writes and zero live reads (issue 31 point 2)', async () => {
    await settled('before resync');
    writes.length = 0;
    reads.length = 0;
    controller.resync();
    await settled('resync');
    expect(writes).toEqual([]);
    // The ManagedResources come from their informer; no legacy apiserver-proxy filter and no
    // reference ManagedResource exists here, and the caches say so.
    expect(reads).toEqual([]);
  });

  it('a status-only update of a gateway Deployment or Service requeues no shoot; a change of what is read requeues once each ACL shoot on that gateway, and no other (issue 31 point 1)', async () => {
    const deployment: ObjectRef = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'istio-ingressgateway', namespace: DEFAULT_GW.namespace };
    const service: ObjectRef = { apiVersion: 'v1', kind: 'Service', name: 'istio-ingressgateway', namespace: DEFAULT_GW.namespace };
    await createObject(cp.kubeConfig, { ...service, metadata: { name: service.name, namespace: service.namespace, labels: { app: 'istio-ingressgateway' } }, spec: { type: 'LoadBalancer', ports: [{ name: 'tls', port: 443, targetPort: 9443 }] } });
    await patchStatus(cp.kubeConfig, service, { loadBalancer: { ingress: [{ ip: '198.51.100.10', ipMode: 'VIP' }] } });
    await settled('the Service is seen');
    const adds = async () => (await registry.getSingleMetric('workqueue_adds_total')?.get())?.values.find((v) => v.labels['name'] === 'acl')?.value ?? 0;
    const aclExtensions = (await listAll(cp.kubeConfig, '/apis/extensions.gardener.cloud/v1alpha1/extensions')).items.filter((e) => (e['spec'] as { type?: string }).type === 'acl');
    // Every fixture shoot has its Gateway; the zonal gateway's shoots are not on the default one.
    const aclShoots = aclExtensions.filter((e) => ((e['status'] as { state?: { gatewayNamespaces?: string[] } } | undefined)?.state?.gatewayNamespaces ?? []).includes(DEFAULT_GW.namespace)).length;
    expect(aclShoots).toBeGreaterThan(0);
    expect(aclShoots).toBeLessThan(aclExtensions.length);
    // Idle is not quiet: a key parked by an earlier test's backoff may still come due. Count from a
    // moment no add has come for 2 s (on a loaded machine one landed in the window now and then).
    let last = await adds();
    await eventually('no queue add for 2 s', async () => {
      await sleep(2_000);
      const now = await adds();
      const quiet = now === last;
      last = now;
      return quiet;
    }, 60_000);
    const before = await adds();
    writes.length = 0;
    // What the Deployment controller, an HPA and the cloud provider write all day.
    await patchStatus(cp.kubeConfig, deployment, { replicas: 3, readyReplicas: 2, updatedReplicas: 3, availableReplicas: 2 });
    await patchStatus(cp.kubeConfig, deployment, { replicas: 3, readyReplicas: 3, updatedReplicas: 3, availableReplicas: 3 });
    await mergePatch(cp.kubeConfig, deployment, { metadata: { annotations: { 'deployment.kubernetes.io/revision': '7' } } });
    await patchStatus(cp.kubeConfig, service, { loadBalancer: { ingress: [{ ip: '198.51.100.11', ipMode: 'VIP' }] } });
    // Then a change of what is read, on the same objects: once it has been handled, so have the updates before it (one watch each, in order).
    await mergePatch(cp.kubeConfig, deployment, { spec: { template: { metadata: { labels: { 'issue-31': 'read' } } } } });
    await deleteObject(cp.kubeConfig, service);
    await eventually('the two changes requeued', async () => (await adds()) >= before + 2 * aclShoots, 30_000);
    await settled('after the changes');
    // Each change requeues each ACL shoot on that gateway once. The combined sync the changes
    // trigger ends in a health recheck that may add such a shoot once more when its key is no
    // longer queued then (a timing of the machine: CI saw 3 for 2 now and then, one shoot, after a
    // quiet window). Any other shoot requeued by both changes would exceed the bound.
    const requeued = (await adds()) - before;
    expect(requeued).toBeGreaterThanOrEqual(2 * aclShoots);
    expect(requeued).toBeLessThanOrEqual(3 * aclShoots);
    expect(writes).toEqual([]);
    await mergePatch(cp.kubeConfig, deployment, { spec: { template: { metadata: { labels: { 'issue-31': null } } } } });
    await settled('restored');
  });

  it('the ManagedResource names its Secret in the reference annotation the resource manager’s garbage collector honours', async () => {
    const mr = await getObject(cp.kubeConfig, mrRef(technicalID(A)));
    const secret = ((mr?.['spec'] as { secretRefs: { name: string }[] }).secretRefs[0] ?? { name: '' }).name;
    const key = `reference.resources.gardener.cloud/secret-${createHash('sha256').update(secret).digest('hex').slice(0, 8)}`;
    expect((mr?.['metadata'] as { annotations?: Record<string, string> }).annotations?.[key]).toBe(secret);
  });

  it('a foreign delete or edit of a ManagedResource is repaired without a resync', async () => {
    await settled('before foreign writes');
    const before = await getObject(cp.kubeConfig, mrRef(technicalID(A)));
    const spec = (o: Record<string, unknown> | undefined) => JSON.stringify(o?.['spec']);
    const meta = (o: Record<string, unknown> | undefined) => o?.['metadata'] as { uid?: string; deletionTimestamp?: string } | undefined;
    await deleteObject(cp.kubeConfig, mrRef(technicalID(A)));
    // The resource manager's finalizer holds the deleted one for a moment; a new one must follow.
    await eventually('ManagedResource recreated', async () => {
      const mr = await getObject(cp.kubeConfig, mrRef(technicalID(A)));
      return meta(mr)?.uid !== meta(before)?.uid && !meta(mr)?.deletionTimestamp && spec(mr) === spec(before);
    }, 30_000);
    await mergePatch(cp.kubeConfig, mrRef(technicalID(A)), { spec: { secretRefs: [{ name: 'someone-elses' }] }, metadata: { labels: { 'app.kubernetes.io/managed-by': null } } });
    await eventually('ManagedResource edit reverted', async () => {
      const mr = await getObject(cp.kubeConfig, mrRef(technicalID(A)));
      return spec(mr) === spec(before) && (mr?.['metadata'] as { labels?: Record<string, string> }).labels?.['app.kubernetes.io/managed-by'] === 'gardener-acl';
    }, 10_000);
  });

  it('a deleted ManagedResource Secret is created again once the real resource manager reports it could not apply', async () => {
    await settled('before secret delete');
    const mr = await getObject(cp.kubeConfig, mrRef(technicalID(A)));
    const secret: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: ((mr?.['spec'] as { secretRefs: { name: string }[] }).secretRefs[0] ?? { name: '' }).name, namespace: technicalID(A) };
    const data = (await getObject(cp.kubeConfig, secret))?.['data'];
    await deleteObject(cp.kubeConfig, secret);
    // The resource manager reports that it cannot read the Secret; the controller writes it again.
    await eventually('Secret recreated', async () => JSON.stringify((await getObject(cp.kubeConfig, secret))?.['data']) === JSON.stringify(data), 60_000);
    await eventually('applied again', async () => {
      const conditions = ((await getObject(cp.kubeConfig, mrRef(technicalID(A))))?.['status'] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? [];
      return conditions.some((c) => c.type === 'ResourcesApplied' && c.status === 'True');
    }, 60_000);
    await settled('after the resource manager applied again');
    writes.length = 0;
    controller.resync();
    await settled('resync after repair');
    expect(writes).toEqual([]);
  }, 150_000);

  it('a rule change rewrites only that shoot’s objects and the combined bucket holding it', async () => {
    await settled('before change');
    const bManagedResource = await getObject(cp.kubeConfig, mrRef(technicalID(B)));
    writes.length = 0;
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.113.0/24', '2001:db8::/32') },
    });
    await eventually('new rule recorded', async () => (await ext(A))?.status?.state?.applied?.rule.cidrs.length === 2);
    // Idle is not done: while it waits for the combined filters the key is parked, not queued.
    await succeeded(A);
    await settled('after change');
    expect(writes.sort()).toEqual(
      [
        'apply EnvoyFilter', 'apply EnvoyFilter', // A's bucket on each of the 2 gateways (it serves both ports); no listener part
        'apply ManagedResource',
        'create Secret', // the previous one is left to the resource manager's garbage collector
        'patch Extension', // reconcile annotation removed
        'patch-status Extension', // Processing: gardenlet's request taken up with the new ACL recorded, the combined filters built from it
        'patch-status Extension', // Succeeded once the stored combined filters hold it everywhere
      ].sort(),
    );
    expect((await getObject(cp.kubeConfig, mrRef(technicalID(B))))?.['metadata']).toEqual(bManagedResource?.['metadata']);
  });

  it('an ALLOW that opens the control plane to all of IPv4 is applied, and the owner is told by an Event with the webhook’s text (issue 14 point 3)', async () => {
    await settled('before the open rule');
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('0.0.0.0/0', '2001:db8::/32') },
    });
    await succeeded(A);
    const events = await eventually('ACLWarning Event', async () => {
      const list = (await listAll(cp.kubeConfig, `/api/v1/namespaces/${technicalID(A)}/events`)).items as { reason: string; message: string }[];
      const found = list.filter((ev) => ev.reason === 'ACLWarning' && ev.message.includes('0.0.0.0/0'));
      return found.length > 0 && found;
    }, 30_000);
    expect(events[0]?.message).toBe('warning: Extension shoot--p--a/acl: spec.providerConfig.rule.cidrs: 0.0.0.0/0 admits every IPv4 client: the control plane is open to the whole IPv4 internet on every path; list only the ranges that need access');
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.113.0/24') },
    });
    await succeeded(A);
  });

  it('audit mode end to end: recorded in the state, a shadow leaf in the combined buckets and shadow rules in the shoot’s own filter, an Event says nothing is refused; back to enforce restores the rules (issue 14 point 1)', async () => {
    await settled('before audit');
    const withMode = (mode: string) => ({ rule: { ...allowRule('203.0.113.0/24').rule, mode } });
    // In how many combined objects A is held, enforced (`matcher`) or counted only (`shadow_matcher`).
    const sections = async () => {
      const held = [...(await entriesIn(DEFAULT_GW.namespace)), ...(await entriesIn(ZONAL_GW.namespace))].flatMap((entries) => entries.get(technicalID(A)) ?? []);
      return { count: held.length, enforced: held.filter((e) => e.mode === 'enforce').length, audited: held.filter((e) => e.mode === 'audit').length };
    };
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } }, spec: { providerConfig: withMode('Audit') } });
    await eventually('audit recorded', async () => (await ext(A))?.status?.state?.applied?.rule.mode === 'audit');
    await succeeded(A);
    await settled('after audit');
    expect(await sections()).toEqual({ count: 2, enforced: 0, audited: 2 });
    // The bucket holds A's leaf in shadow_matcher only.
    const bucket = (await combined()).find((f) => f.metadata.namespace === DEFAULT_GW.namespace && storedEntriesAnyForm(f).has(technicalID(A)));
    const config = (bucket?.spec as { configPatches: { patch: { value: { typed_config: Record<string, unknown> } } }[] }).configPatches[0]?.patch.value.typed_config;
    expect(JSON.stringify(config?.['shadow_matcher'])).toContain(`=${technicalID(A)}`);
    expect(JSON.stringify(config?.['matcher'])).not.toContain(`=${technicalID(A)}`);
    const own = await eventually('own filter in audit', async () => {
      const f = (await getObject(cp.kubeConfig, filterRef(A, DEFAULT_GW.namespace))) as { spec: { configPatches: { patch: { value: { typed_config: Record<string, unknown> } } }[] } } | undefined;
      const config = f?.spec.configPatches[0]?.patch.value.typed_config;
      return config && 'shadow_rules' in config && config;
    }, 60_000);
    expect(own['rules']).toBeUndefined();
    await eventually('audit Event', async () => {
      const list = (await listAll(cp.kubeConfig, `/api/v1/namespaces/${technicalID(A)}/events`)).items as { reason: string; message: string }[];
      return list.some((ev) => ev.reason === 'ACLWarning' && ev.message.includes('spec.providerConfig.rule.mode: is audit: this ACL refuses no connection'));
    }, 30_000);
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } }, spec: { providerConfig: withMode('enforce') } });
    await eventually('enforce recorded', async () => (await ext(A))?.status?.state?.applied?.rule.mode === 'enforce');
    await succeeded(A);
    await settled('after enforce');
    expect(await sections()).toEqual({ count: 2, enforced: 2, audited: 0 });
  }, 90_000);

  it('an invalid providerConfig sets lastError and keeps the previous protection', async () => {
    await settled('before invalid change');
    const mrBefore = await getObject(cp.kubeConfig, mrRef(technicalID(A)));
    const combinedBefore = JSON.stringify(await combined());
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.113.0/24', '10.0.0.300/8') },
    });
    const e = await eventually('lastError', async () => (await ext(A))?.status?.lastError && (await ext(A)), 30_000);
    expect(e.status?.lastOperation?.state).toBe('Error');
    expect(e.status?.lastError?.codes).toEqual(['ERR_CONFIGURATION_PROBLEM']);
    expect(e.status?.lastError?.description).toContain(
      'spec.providerConfig.rule.cidrs[1]: "10.0.0.300/8" is not a valid CIDR ("10.0.0.300" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48',
    );
    await settled('after invalid change');
    expect((await getObject(cp.kubeConfig, mrRef(technicalID(A))))?.['spec']).toEqual(mrBefore?.['spec']);
    expect(JSON.stringify(await combined())).toBe(combinedBefore);
    const events = (await listAll(cp.kubeConfig, `/api/v1/namespaces/${technicalID(A)}/events`)).items as { reason: string; message: string }[];
    expect(events.map((ev) => ev.reason)).toContain('InvalidACL');
    // Fixing the rule clears the error.
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.113.0/24') },
    });
    const fixed = await succeeded(A);
    expect(fixed.status?.lastError).toBeUndefined();
  }, 120_000);

  it('49 junk CIDR entries of 20 KB each give a short lastError (not a 2 MB status patch that fails forever)', async () => {
    await settled('before junk');
    const junk = Array.from({ length: 49 }, (_, i) => `${String(i).padStart(2, '0')}${'x'.repeat(20_000)}`);
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.113.0/24', ...junk) },
    });
    const e = await eventually('lastError', async () => (await ext(A))?.status?.lastError && (await ext(A)), 30_000);
    const description = e.status?.lastError?.description ?? '';
    expect(description.length).toBeLessThan(4096);
    expect(description).toContain(`spec.providerConfig.rule.cidrs[1]: "00${'x'.repeat(62)}…" (20002 characters) is not a valid CIDR`);
    expect(description).toContain('… and 39 more problem(s) like these');
    await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.113.0/24') },
    });
    await succeeded(A);
  }, 120_000);

  it('delete removes exactly that shoot: its ManagedResource, its combined policies, then the finalizer', async () => {
    await createSeed(cp.kubeConfig, [], [C]);
    await succeeded(C);
    await settled('C added');
    expect(await policiesIn(DEFAULT_GW.namespace)).toContain('shoot--q--c');
    await deleteObject(cp.kubeConfig, extRef(technicalID(C)));
    await eventually('C gone', async () => (await ext(C)) === undefined, 30_000);
    await settled('C deleted');
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(C)))).toBeUndefined();
    for (const gw of [DEFAULT_GW, ZONAL_GW]) expect(await policiesIn(gw.namespace)).not.toContain('shoot--q--c');
    expect((await policiesIn(DEFAULT_GW.namespace)).sort()).toEqual(['shoot--p--a', 'shoot--p--b']);
  });

  it('migrate removes the shoot from this seed but keeps its state; restore rebuilds it', async () => {
    await settled('before migrate');
    await mergePatch(cp.kubeConfig, extRef(technicalID(B)), { metadata: { annotations: { 'gardener.cloud/operation': 'migrate' } } });
    const migrated = await eventually('migrated', async () => {
      const e = await ext(B);
      const finalizerGone = !(e?.metadata.finalizers ?? []).includes('extensions.gardener.cloud/acl');
      return e?.status?.lastOperation?.type === 'Migrate' && e.status.lastOperation.state === 'Succeeded' && !e.metadata.annotations?.['gardener.cloud/operation'] && finalizerGone && e;
    }, 30_000);
    expect(migrated.status?.state?.applied?.rule.cidrs).toEqual(['198.51.100.0/24']);
    await settled('after migrate');
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(B)))).toBeUndefined();
    for (const gw of [DEFAULT_GW, ZONAL_GW]) expect(await policiesIn(gw.namespace)).not.toContain('shoot--p--b');
    expect(await getObject(cp.kubeConfig, filterRef(B, ZONAL_GW.namespace))).toBeUndefined();

    await mergePatch(cp.kubeConfig, extRef(technicalID(B)), { metadata: { annotations: { 'gardener.cloud/operation': 'restore' } } });
    const restored = await eventually('restored', async () => {
      const e = await ext(B);
      return e?.status?.lastOperation?.type === 'Restore' && e.status.lastOperation.state === 'Succeeded' && !e.metadata.annotations?.['gardener.cloud/operation'] && e;
    }, 30_000);
    expect(restored.metadata.finalizers).toContain('extensions.gardener.cloud/acl');
    await settled('after restore');
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(B)))).toBeDefined();
    for (const gw of [DEFAULT_GW, ZONAL_GW]) expect(await policiesIn(gw.namespace)).toContain('shoot--p--b');
  });

  it('recovers after the API server restarts mid-run, with no lost or duplicated effect', async () => {
    await settled('before restart');
    await cp.stopApiServer();
    await sleep(1_000);
    await cp.startApiServer();
    const D: ShootFixture = { project: 'q', name: 'd', providerConfig: allowRule('192.0.2.0/24') };
    await createSeed(cp.kubeConfig, [], [D]);
    await succeeded(D);
    // Informers reconnect at their own pace; the ManagedResource follows once the Gateway is seen.
    await eventually('D ManagedResource', () => getObject(cp.kubeConfig, mrRef(technicalID(D))), 60_000);
    await settled('after restart');
    // D's ManagedResource references one Secret, and it exists. A reconcile that ran before the
    // Gateway informer listed again wrote D's filters ahead on every gateway, and the next one for
    // its own gateway: the earlier Secret is then unreferenced and left to the resource manager's
    // garbage collector (off here), so it must carry the label that collector honours.
    const mr = (await getObject(cp.kubeConfig, mrRef(technicalID(D)))) as { spec?: { secretRefs?: { name: string }[] } } | undefined;
    const referenced = (mr?.spec?.secretRefs ?? []).map((r) => r.name);
    expect(referenced).toHaveLength(1);
    const secrets = (await listAll(cp.kubeConfig, `/api/v1/namespaces/${technicalID(D)}/secrets`)).items as { metadata: { name: string; labels?: Record<string, string> } }[];
    expect(secrets.map((s) => s.metadata.name)).toContain(referenced[0]);
    for (const s of secrets) expect(s.metadata.labels?.['resources.gardener.cloud/garbage-collectable-reference']).toBe('true');
    expect(await policiesIn(ZONAL_GW.namespace)).toContain('shoot--q--d');
    // Until every watch is open again a cache may lag what is stored; the controller then re-applies
    // what it cannot see (no-ops on the server). Unchanged input means no write once caches follow.
    await eventually('every cache watching again', () => controller.cachesWatching(), 60_000);
    await settled('caches caught up');
    // A served-check pass that ran while the API server was down put "cannot list its pods" into
    // every ACL shoot's ControlPlaneHealthy condition; the next pass (every 20 s) takes it out again,
    // a status write per shoot that is not the resync's. Wait for that pass before the resync.
    await eventually('the served check reads the gateways again', async () => {
      const extensions = (await listAll(cp.kubeConfig, '/apis/extensions.gardener.cloud/v1alpha1/extensions')).items;
      return extensions.every((e) => !JSON.stringify((e['status'] as { conditions?: unknown } | undefined)?.conditions ?? []).includes('cannot list its pods'));
    }, 90_000);
    await settled('served check caught up');
    writes.length = 0;
    controller.resync();
    await settled('resync after restart');
    expect(writes).toEqual([]);
  }, 120_000);

  it('re-reconciles when Infrastructure egressCIDRs change, without any operation annotation', async () => {
    await settled('before egress change');
    await patchStatus(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure', name: A.name, namespace: technicalID(A) }, { egressCIDRs: ['198.51.100.99/32'] });
    await eventually('new egress recorded', async () => {
      const applied = (await ext(A))?.status?.state?.applied as { alwaysAllowed?: string[] } | undefined;
      return applied?.alwaysAllowed?.includes('198.51.100.99/32');
    });
    await settled('after egress change');
    expect(JSON.stringify(await combined())).toContain('198.51.100.99');
  });

  const gatewayRef: ObjectRef = { apiVersion: 'networking.istio.io/v1beta1', kind: 'Gateway', name: 'kube-apiserver', namespace: technicalID(A) };

  /** The SNI names the per-shoot filter in `namespace` matches, as the API server stores it. */
  const sniMatches = async (s: ShootFixture, namespace: string) => {
    const filter = (await getObject(cp.kubeConfig, filterRef(s, namespace))) as { spec?: { configPatches?: { match?: { listener?: { filterChain?: { sni?: string } } } }[] } } | undefined;
    return (filter?.spec?.configPatches ?? []).map((p) => p.match?.listener?.filterChain?.sni).filter((sni) => sni !== undefined && !sni.startsWith('*.'));
  };

  it('without its Gateway a shoot keeps the hosts it had and gets the predicted ones, on every gateway; its combined policies stay', async () => {
    await settled('before the Gateway goes');
    expect(await sniMatches(A, DEFAULT_GW.namespace)).toEqual(['api.a.p.internal.example.com']);
    await deleteObject(cp.kubeConfig, gatewayRef);
    await eventually('Gateway gone', async () => (await getObject(cp.kubeConfig, gatewayRef)) === undefined);
    // The host it had, and the wildcard endpoint the seed's ingress domain predicts, on both gateways.
    const ahead = ['api-p--a.ingress.seed.example.com', 'api.a.p.internal.example.com'];
    for (const gw of [DEFAULT_GW, ZONAL_GW]) {
      await eventually(`filter ahead in ${gw.namespace}`, async () => JSON.stringify(await sniMatches(A, gw.namespace)) === JSON.stringify(ahead), 60_000);
    }
    await succeeded(A);
    expect(await policiesIn(DEFAULT_GW.namespace)).toContain('shoot--p--a');
    await settled('without Gateway');
    writes.length = 0;
    controller.resync();
    await settled('resync without Gateway');
    expect(writes).toEqual([]);
  });

  it('a shoot moving to another gateway gets its filters there, and loses the old ones', async () => {
    const moved = { ...shootGateway(A), spec: { ...shootGateway(A).spec, selector: { app: 'istio-ingressgateway', istio: ZONAL_GW.istioLabel } } };
    await createObject(cp.kubeConfig, moved);
    await eventually('moved', async () => {
      const state = (await ext(A))?.status?.state as { gatewayNamespaces?: string[] } | undefined;
      return JSON.stringify(state?.gatewayNamespaces) === JSON.stringify([ZONAL_GW.namespace]);
    });
    await settled('after move');
    await eventually('filter on the new gateway', () => getObject(cp.kubeConfig, filterRef(A, ZONAL_GW.namespace)), 60_000);
    await eventually('filter gone from the old gateway', async () => (await getObject(cp.kubeConfig, filterRef(A, DEFAULT_GW.namespace))) === undefined, 60_000);
  });

  it('a gateway Deployment recreated with another selector: while a pod with the old labels may still serve, every filter on that gateway selects it too; then the new selector', async () => {
    await settled('before the Deployment is recreated');
    const ns = ZONAL_GW.namespace;
    const oldLabels = { app: 'istio-ingressgateway', istio: ZONAL_GW.istioLabel };
    // The new selector has a label the old pods lack (the shoots' Gateways keep selecting both).
    const newLabels = { app: 'istio-ingressgateway', 'gateway.gardener.cloud/generation': '2', istio: ZONAL_GW.istioLabel };
    const pod = (name: string, labels: Record<string, string>) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, labels: { ...labels, 'istio-role': 'seed' } },
      spec: { containers: [{ name: 'istio-proxy', image: 'istio/proxyv2' }] },
    });
    const podRef = (name: string): ObjectRef => ({ apiVersion: 'v1', kind: 'Pod', name, namespace: ns });
    const deploymentRef: ObjectRef = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'istio-ingressgateway', namespace: ns };
    /** The workload selectors of every filter of ours on the gateway (combined and per-shoot). */
    const selectors = async () => {
      const filters = (await listAll(cp.kubeConfig, `/apis/networking.istio.io/v1alpha3/namespaces/${ns}/envoyfilters`, { labelSelector: 'app.kubernetes.io/managed-by=gardener-acl' })).items as unknown as EnvoyFilterObject[];
      return [...new Set(filters.map((f) => JSON.stringify((f.spec as { workloadSelector?: { labels?: unknown } }).workloadSelector?.labels ?? {})))];
    };
    await createObject(cp.kubeConfig, pod('istio-ingressgateway-old-1', oldLabels));
    const deployment = (await getObject(cp.kubeConfig, deploymentRef)) as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } };
    await deleteObject(cp.kubeConfig, deploymentRef);
    await eventually('Deployment gone', async () => (await getObject(cp.kubeConfig, deploymentRef)) === undefined);
    await createObject(cp.kubeConfig, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'istio-ingressgateway', namespace: ns, labels: newLabels },
      spec: {
        selector: { matchLabels: newLabels },
        template: { metadata: { labels: { ...deployment.spec.template.metadata.labels, ...newLabels } }, spec: { containers: [{ name: 'istio-proxy', image: 'istio/proxyv2' }] } },
      },
    });
    await createObject(cp.kubeConfig, pod('istio-ingressgateway-new-1', newLabels));
    // The labels both pods carry: the old pod keeps every filter while it may serve.
    await sleep(2_000);
    await settled('recreated, the old pod still there');
    expect(await selectors()).toEqual([JSON.stringify(oldLabels)]);
    await deleteObject(cp.kubeConfig, podRef('istio-ingressgateway-old-1'));
    await eventually('the new selector once the old pod is gone', async () => JSON.stringify(await selectors()) === JSON.stringify([JSON.stringify(newLabels)]), 60_000);
    await deleteObject(cp.kubeConfig, podRef('istio-ingressgateway-new-1'));
  }, 180_000);

  it('an acl Extension of class seed or garden is left to other controllers: no finalizer, no status, no filter', async () => {
    const F: ShootFixture = { project: 'q', name: 'k' };
    await createSeed(cp.kubeConfig, [], [F]);
    const seedClass = aclExtension(technicalID(F), allowRule('192.0.2.0/24'));
    await createObject(cp.kubeConfig, { ...seedClass, spec: { ...(seedClass['spec'] as object), class: 'seed' } });
    await sleep(500);
    await settled('class seed seen');
    const e = await ext(F);
    expect(e?.metadata.finalizers ?? []).toEqual([]);
    expect(e?.status).toBeUndefined();
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(F)))).toBeUndefined();
    expect(await policiesIn(DEFAULT_GW.namespace)).not.toContain(technicalID(F));
  });

  it('a shoot whose last operation Failed is left alone (Gardener\'s ShootNotFailedPredicate); it is handled again once Gardener retries', async () => {
    const G: ShootFixture = { project: 'q', name: 'h' };
    await createSeed(cp.kubeConfig, [], [G]);
    const clusterRef: ObjectRef = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster', name: technicalID(G) };
    const setShootState = (state: string) => mergePatch(cp.kubeConfig, clusterRef, { spec: { shoot: { status: { lastOperation: { type: 'Reconcile', state } } } } });
    await setShootState('Failed');
    await sleep(500);
    await createObject(cp.kubeConfig, aclExtension(technicalID(G), allowRule('192.0.2.0/24')));
    await sleep(500);
    await settled('failed shoot seen');
    expect((await ext(G))?.status).toBeUndefined();
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(G)))).toBeUndefined();
    await setShootState('Processing');
    await succeeded(G);
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(G)))).toBeDefined();
  });

  it('creates no object for a shoot whose Extension was never valid', async () => {
    const E: ShootFixture = { project: 'q', name: 'e' };
    await createSeed(cp.kubeConfig, [], [E]);
    await createObject(cp.kubeConfig, aclExtension(technicalID(E), { rule: { action: 'MAYBE', type: 'remote_ip', cidrs: ['192.0.2.0/24'] } }));
    const e = await eventually('lastError', async () => (await ext(E))?.status?.lastError && (await ext(E)));
    expect(e.status?.lastError?.description).toContain('spec.providerConfig.rule.action: "MAYBE" is not a valid action; use ALLOW or DENY');
    await settled('E invalid');
    expect(await getObject(cp.kubeConfig, mrRef(technicalID(E)))).toBeUndefined();
    expect(await policiesIn(DEFAULT_GW.namespace)).not.toContain('shoot--q--e');
  });

  it('Succeeded only once the stored combined filters hold the new ACL; a refused combined write reaches the status', async () => {
    await settled('before refusal');
    // The API server itself refuses every write of a combined filter (a ValidatingAdmissionPolicy).
    const removePolicy = await refuseWrites(
      cp.kubeConfig,
      'refuse-combined',
      { apiGroup: 'networking.istio.io', resource: 'envoyfilters', expression: "!object.metadata.name.startsWith('acl-connect')", message: 'combined filters are frozen by the test' },
      async () => mergePatch(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: (await combined())[0]?.metadata.name ?? '', namespace: DEFAULT_GW.namespace }, { metadata: { labels: { probe: 'x' } } }),
    );
    try {
      await mergePatch(cp.kubeConfig, extRef(technicalID(A)), {
        metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
        spec: { providerConfig: allowRule('203.0.113.0/25') },
      });
      const e = await eventually('error reported', async () => (await ext(A))?.status?.lastOperation?.state === 'Error' && (await ext(A)), 30_000);
      expect(e.status?.lastError?.description).toContain('the combined CONNECT filters do not protect this shoot as recorded on istio-ingress:8132');
      expect(e.status?.lastError?.description).toContain('combined filters are frozen by the test');
      expect(e.status?.state?.applied?.rule.cidrs).toEqual(['203.0.113.0/25']);
    } finally {
      await removePolicy();
    }
    // Once the writes go through, the shoot is protected as recorded and only then Succeeded.
    const done = await succeeded(A);
    expect(done.status?.lastError).toBeUndefined();
    for (const gw of [DEFAULT_GW, ZONAL_GW]) {
      const stored = (await entriesIn(gw.namespace)).flatMap((entries) => JSON.stringify(entries.get('shoot--p--a') ?? null));
      expect(stored.filter((p) => p.includes('"203.0.113.0","prefix_len":25'))).toHaveLength(1);
    }
  }, 120_000);

  it('combined writes refused in one gateway namespace: the other converges, and a deleted shoot is not held by the refused one', async () => {
    await settled('before the zonal refusal');
    const H: ShootFixture = { project: 'q', name: 'h', providerConfig: allowRule('192.0.2.128/25') };
    await createSeed(cp.kubeConfig, [], [H]);
    await succeeded(H);
    const zonalFilter = async () => (await combined()).find((f) => f.metadata.namespace === ZONAL_GW.namespace)?.metadata.name ?? '';
    const removePolicy = await refuseWrites(
      cp.kubeConfig,
      'refuse-zonal-combined',
      {
        apiGroup: 'networking.istio.io',
        resource: 'envoyfilters',
        expression: `!(object.metadata.name.startsWith('acl-connect') && object.metadata.namespace == '${ZONAL_GW.namespace}')`,
        message: 'zonal combined filters are frozen by the test',
      },
      async () => mergePatch(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: await zonalFilter(), namespace: ZONAL_GW.namespace }, { metadata: { labels: { probe: 'zonal' } } }),
    );
    try {
      await mergePatch(cp.kubeConfig, extRef(technicalID(A)), { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } }, spec: { providerConfig: allowRule('203.0.113.0/26') } });
      await eventually('the default gateway holds the new ACL although the zonal one refuses', async () => (await entriesIn(DEFAULT_GW.namespace)).some((e) => JSON.stringify(e.get('shoot--p--a') ?? null).includes('"203.0.113.0","prefix_len":26')), 60_000);
      // An Error written before the controller's cache saw the default gateway's write names both gateways; the next reconcile (the cache's event) corrects it.
      const e = await eventually('the error names the zonal gateway only', async () => {
        const current = await ext(A);
        return current?.status?.lastOperation?.state === 'Error' && !current.status.lastError?.description.includes(`${DEFAULT_GW.namespace}:8132`) && current;
      }, 30_000);
      expect(e.status?.lastError?.description).toContain(`on ${ZONAL_GW.namespace}:8132, ${ZONAL_GW.namespace}:8443`);
      expect(e.status?.lastError?.description).not.toContain(`${DEFAULT_GW.namespace}:8132`);
      expect(e.status?.lastError?.description).toContain(`in ${ZONAL_GW.namespace}: HTTP 422:`);
      expect(e.status?.lastError?.description).toContain('zonal combined filters are frozen by the test');
      // A deletion elsewhere on the seed is not held by the namespace that refuses.
      await deleteObject(cp.kubeConfig, extRef(technicalID(H)));
      await eventually('Extension h gone although the zonal filters still name it', async () => (await ext(H)) === undefined, 60_000);
      expect(await policiesIn(DEFAULT_GW.namespace)).not.toContain(technicalID(H));
      expect(await policiesIn(ZONAL_GW.namespace)).toContain(technicalID(H));
    } finally {
      await removePolicy();
    }
    await succeeded(A);
    await eventually('the zonal filters drop h once their writes go through', async () => !(await policiesIn(ZONAL_GW.namespace)).includes(technicalID(H)), 60_000);
  }, 180_000);

  it('any failed reconcile (here the API server refuses the ManagedResource) reaches the status as Error, once', async () => {
    const removePolicy = await refuseWrites(cp.kubeConfig, 'refuse-mr', {
      apiGroup: 'resources.gardener.cloud',
      resource: 'managedresources',
      expression: "object.metadata.namespace != 'shoot--q--g'",
      message: 'ManagedResources of shoot--q--g are refused by the test',
    });
    const G: ShootFixture = { project: 'q', name: 'g', providerConfig: allowRule('192.0.2.0/25') };
    try {
      await sleep(1_000); // the policy takes effect
      await createSeed(cp.kubeConfig, [], [G]);
      const e = await eventually('failure reported', async () => (await ext(G))?.status?.lastOperation?.state === 'Error' && (await ext(G)), 30_000);
      expect(e.status?.lastError?.description).toContain('reconcile failed, retrying: HTTP 422:');
      expect(e.status?.lastError?.description).toContain('ManagedResources of shoot--q--g are refused by the test');
      expect(e.status?.lastError?.codes).toBeUndefined();
      const rv = (await ext(G))?.metadata.resourceVersion;
      await sleep(2_000);
      expect((await ext(G))?.metadata.resourceVersion).toBe(rv);
    } finally {
      await removePolicy();
    }
    await succeeded(G);
  }, 120_000);

  it('a lasting error is written once and retried with backoff, not rewritten in a loop', async () => {
    // Its Gateway selects a gateway that has no Deployment: not a configuration problem, so retried.
    const F: ShootFixture = { project: 'q', name: 'f', providerConfig: allowRule('192.0.2.0/24'), gateway: { namespace: 'istio-ingress--z9', istioLabel: 'ingressgateway--zone--z9' } };
    await createSeed(cp.kubeConfig, [], [F]);
    const e = await eventually('lastError', async () => (await ext(F))?.status?.lastError && (await ext(F)));
    expect(e.status?.lastError?.description).toContain('matches no istio-ingressgateway Deployment');
    const before = (await ext(F))?.metadata.resourceVersion;
    writes.length = 0;
    await sleep(3_000);
    expect(writes.filter((w) => w === 'patch-status Extension')).toEqual([]);
    expect((await ext(F))?.metadata.resourceVersion).toBe(before);
  });
  it('a shoot waiting for the combined filters is Succeeded once they are stored, brought back by them and not by its retry backoff', async () => {
    // Needs another setting: a 10-minute retry backoff, so that only the combined filters (the
    // wake on their events, the health recheck after each sync) can bring the waiting shoot back:
    // with the shipped 5 ms backoff it comes back by itself, and a lost wake would go unseen.
    // Without both the new shoot below is never Succeeded; either one alone suffices.
    await controller.stop();
    controller = await startTestController(cp.kubeConfig, { registry: new Registry(), retryBackoff: { baseDelayMs: 600_000, maxDelayMs: 600_000 } });
    await settled('the new controller converged');
    const W: ShootFixture = { project: 'q', name: 'w', providerConfig: allowRule('192.0.2.0/26') };
    const holds = async (prefix: string) => {
      for (const gw of [DEFAULT_GW, ZONAL_GW]) {
        const stored = (await entriesIn(gw.namespace)).flatMap((entries) => JSON.stringify(entries.get(technicalID(W)) ?? null));
        expect(stored.filter((p) => p.includes(prefix))).toHaveLength(1);
      }
    };
    // A new shoot waits once for its first combined entries, an edit once for the changed ones.
    await createSeed(cp.kubeConfig, [], [W]);
    expect((await succeeded(W)).status?.state?.applied?.rule.cidrs).toEqual(['192.0.2.0/26']);
    await holds('"192.0.2.0","prefix_len":26');
    // The edit's combined writes are refused until its own objects are applied and it is parked:
    // then only the stored filters' events are left to bring it back.
    const removePolicy = await refuseWrites(
      cp.kubeConfig,
      'refuse-combined-w',
      { apiGroup: 'networking.istio.io', resource: 'envoyfilters', expression: "!object.metadata.name.startsWith('acl-connect')", message: 'combined filters are frozen by the test' },
      async () => mergePatch(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: (await combined())[0]?.metadata.name ?? '', namespace: DEFAULT_GW.namespace }, { metadata: { labels: { probe: 'w' } } }),
    );
    try {
      await mergePatch(cp.kubeConfig, extRef(technicalID(W)), { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } }, spec: { providerConfig: allowRule('192.0.2.64/26') } });
      await eventually('the edit recorded and waiting', async () => {
        const e = await ext(W);
        return e?.status?.state?.applied?.rule.cidrs[0] === '192.0.2.64/26' && e.status.lastOperation?.state !== 'Succeeded';
      }, 30_000);
      await settled('W parked');
    } finally {
      await removePolicy();
    }
    expect((await succeeded(W)).status?.lastError).toBeUndefined();
    await holds('"192.0.2.64","prefix_len":26');
  }, 120_000);
});
