// The seed chart on a real kube-apiserver: the rendered objects are applied, then the controller
// runs as a separate process with the args, env and config the chart's Deployment defines and a
// token of the chart's ServiceAccount, so the API server enforces the chart's RBAC. An ACL
// Extension must be reconciled with exactly those permissions; taking one rule away must break
// it; and requests the code never sends must be denied.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANAGED_RESOURCE_NAME } from '../../src/actuator/managed-resource.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, serverSideApply, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import { installCRDs, type ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { CLUSTER_RULES, WEBHOOK_DISABLED_CLUSTER_RULES } from './expected-rbac.js';
import { CONFIG_MOUNT, canI, serviceAccountKubeconfig, startChartContainer, writeChartConfig, type RunningContainer } from './chart-processes.js';
import { gardenerVpaCrdFile, startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import { SEED_CHART, find, renderChart, type KubeObject } from './helm.js';

const NAMESPACE = 'garden';
const SA_USER = `system:serviceaccount:${NAMESPACE}:gardener-acl`;
// The EnvoyFilter webhook has its own tests (test/webhook); here it would need the seed API
// server to reach a Service, so the chart is rendered without it. RBAC is the same either way.
// A 0s write interval keeps the scenario fast; everything else is the chart's default.
const VALUES = { webhook: { enabled: false }, controller: { combinedMinInterval: '0s' } };
const registrationRef = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', name: 'gardener-acl' };
/** The registration the controller's certificate manager made in tls.mode managed (its labels), as an earlier install left it. */
const staleRegistration = {
  ...registrationRef,
  metadata: { name: registrationRef.name, labels: { 'app.kubernetes.io/managed-by': 'gardener-acl', 'acl.gardener.cloud/role': 'webhook-certificates' } },
  webhooks: [
    {
      name: 'envoyfilters.acl.gardener.cloud',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      failurePolicy: 'Fail',
      timeoutSeconds: 5,
      clientConfig: { service: { name: 'gardener-acl-webhook', namespace: 'garden', path: '/mutate-envoyfilter', port: 443 } },
      rules: [{ apiGroups: ['networking.istio.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['envoyfilters'] }],
      matchConditions: [{ name: 'legacy-proxy-filter', expression: "object.metadata.name.startsWith('shoot-')" }],
    },
  ],
} as unknown as ObjectToWrite;

const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const B: ShootFixture = { project: 'p', name: 'b', providerConfig: allowRule('192.0.2.0/24') };

interface ExtensionView {
  status?: { lastOperation?: { state: string }; lastError?: { description: string } };
}

const canController = (cp: ControlPlane, attributes: Record<string, string>) => canI(cp, SA_USER, NAMESPACE, attributes);

describe('seed chart RBAC on a real kube-apiserver', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  let dir: string;
  let objects: KubeObject[];
  let controller: RunningContainer | undefined;
  const ext = async (s: ShootFixture) =>
    (await getObject(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) })) as unknown as ExtensionView | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-chart-rbac-'));
    cp = await startWithCRDs([NAMESPACE]);
    // Gardener's own VerticalPodAutoscaler CRD: the chart's VPAs are checked against its schema.
    await installCRDs(cp.kubeConfig, [gardenerVpaCrdFile()]);
    objects = await renderChart(SEED_CHART, VALUES, NAMESPACE);
    for (const obj of objects) await createObject(cp.kubeConfig, obj as unknown as ObjectToWrite);
    // What an earlier install with the webhook on (tls.mode managed) left: its fail-closed registration, its Service gone.
    await createObject(cp.kubeConfig, staleRegistration);
    const configFile = await writeChartConfig(objects, dir);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A]);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
    controller = await startChartContainer(objects, 'controller', await serviceAccountKubeconfig(cp, NAMESPACE, dir), (arg) => arg.replace(`${CONFIG_MOUNT}/config.yaml`, configFile));
  }, 120_000);

  afterAll(async () => {
    controller?.child.kill('SIGTERM');
    await grm?.stop();
    await cp?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('with the webhook disabled, the registration an earlier managed install made is deleted (it would refuse every legacy filter write)', async () => {
    await eventually('the stale registration deleted', async () => (await getObject(cp.kubeConfig, registrationRef)) === undefined, 60_000);
    await eventually('the controller says so', () => controller?.output().includes('webhook disabled: deleted the webhook configuration the certificate manager had made'), 10_000).catch(() => {
      throw new Error(controller?.output().slice(0, 3000));
    });
  });

  it('reconciles an ACL Extension with only the chart\'s permissions: ManagedResource, combined filters, status, Lease', async () => {
    try {
      await eventually('Extension acl of shoot a Succeeded', async () => (await ext(A))?.status?.lastOperation?.state === 'Succeeded', 60_000);
    } catch (error) {
      throw new Error(`${(error as Error).message}\ncontroller output (end):\n${controller?.output().slice(-4000)}`);
    }
    const mr = await getObject(cp.kubeConfig, { apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: MANAGED_RESOURCE_NAME, namespace: technicalID(A) });
    expect(mr).toBeDefined();
    const combined = await eventually('combined filters', async () => {
      const list = await listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters', { labelSelector: 'acl.gardener.cloud/role=connect' });
      return list.items.length > 0 && list.items;
    }, 30_000);
    expect(combined.every((f) => (f as { metadata: { namespace: string } }).metadata.namespace === DEFAULT_GW.namespace)).toBe(true);
    const lease = (await getObject(cp.kubeConfig, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: 'gardener-acl-leader-election', namespace: NAMESPACE })) as unknown as { spec: { holderIdentity?: string } };
    expect(lease.spec.holderIdentity).toBeTruthy();
    // Gardener's extension heartbeat, which gardenlet reads next to the conditions we report.
    const heartbeat = await eventually('heartbeat Lease', async () =>
      (await getObject(cp.kubeConfig, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: 'gardener-extension-heartbeat', namespace: NAMESPACE })) as unknown as { spec: { renewTime?: string } } | undefined,
    );
    expect(Date.now() - Date.parse(heartbeat.spec.renewTime ?? '')).toBeLessThan(60_000);
    expect(controller?.output()).not.toMatch(/forbidden/i);
  }, 90_000);

  it('requests the code never sends are denied', async () => {
    const denied: Record<string, string>[] = [
      { verb: 'delete', group: 'extensions.gardener.cloud', resource: 'extensions', namespace: technicalID(A) },
      { verb: 'update', group: 'extensions.gardener.cloud', resource: 'extensions', namespace: technicalID(A) },
      { verb: 'get', group: '', resource: 'secrets', namespace: technicalID(A) },
      { verb: 'list', group: '', resource: 'secrets', namespace: 'kube-system' },
      // The resource manager's garbage collector deletes the ManagedResource Secrets; only the reference's mutable one is ours to delete.
      { verb: 'delete', group: '', resource: 'secrets', namespace: 'kube-system', name: 'gardener-secret' },
      { verb: 'delete', group: '', resource: 'secrets', namespace: technicalID(A), name: 'managedresource-extension-acl-0123abcd' },
      { verb: 'update', group: 'networking.istio.io', resource: 'envoyfilters', namespace: DEFAULT_GW.namespace },
      { verb: 'list', group: '', resource: 'configmaps', namespace: NAMESPACE },
      { verb: 'get', group: '', resource: 'configmaps', namespace: 'kube-system' },
      { verb: 'update', group: 'coordination.k8s.io', resource: 'leases', namespace: NAMESPACE, name: 'someone-elses-lease' },
      { verb: 'create', group: 'coordination.k8s.io', resource: 'leases', namespace: 'kube-system' },
      { verb: 'update', group: 'resources.gardener.cloud', resource: 'managedresources', namespace: technicalID(A) },
      { verb: 'update', group: 'apps', resource: 'deployments', namespace: DEFAULT_GW.namespace },
      { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'clusterroles' },
    ];
    for (const attributes of denied) expect(await canController(cp, attributes), JSON.stringify(attributes)).toBe(false);
    expect(await canController(cp, { verb: 'patch', group: 'networking.istio.io', resource: 'envoyfilters', namespace: DEFAULT_GW.namespace })).toBe(true);
    expect(await canController(cp, { verb: 'delete', group: '', resource: 'secrets', namespace: technicalID(A), name: 'managedresource-acl-seed' })).toBe(true);
    expect(await canController(cp, { verb: 'update', group: 'coordination.k8s.io', resource: 'leases', namespace: NAMESPACE, name: 'gardener-acl-leader-election' })).toBe(true);
  });

  it('without the ManagedResource rule the same scenario fails for shoot b (the rules are needed, not just sufficient)', async () => {
    const role = find(objects, 'ClusterRole');
    const withoutMr = [...CLUSTER_RULES, ...WEBHOOK_DISABLED_CLUSTER_RULES].filter((r) => !r.resources.includes('managedresources'));
    await serverSideApply(cp.kubeConfig, { ...role, rules: withoutMr } as unknown as ObjectToWrite, 'test', true);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [B]);
    // An API error is retried with backoff (not a configuration problem), so the sign is the
    // API server's refusal in the controller's log and an Extension that does not succeed.
    const refused = (line: string) => line.includes('403') && line.includes('managedresources') && line.includes(technicalID(B));
    await eventually('the API server refuses the ManagedResource of shoot b', () => controller?.output().split('\n').some(refused), 60_000);
    expect((await ext(B))?.status?.lastOperation?.state).not.toBe('Succeeded');
    await serverSideApply(cp.kubeConfig, role as unknown as ObjectToWrite, 'test', true);
    await eventually('Extension acl of shoot b Succeeded once the rule is back', async () => (await ext(B))?.status?.lastOperation?.state === 'Succeeded', 90_000);
  }, 200_000);

  it('uninstall leaves nothing of ours on the gateways: the last ACL shoot\'s deletion takes the combined filters along, then the chart\'s objects go as the resource manager deletes them; what remains is listed', async () => {
    const ours = async (path: string) => (await listAll(cp.kubeConfig, path, { labelSelector: 'app.kubernetes.io/managed-by=gardener-acl' })).items.map((o) => `${(o as KubeObject).metadata.namespace ?? ''}/${(o as KubeObject).metadata.name}`);
    expect((await ours('/apis/networking.istio.io/v1alpha3/envoyfilters')).length).toBeGreaterThan(0);
    // Gardener deletes the shoots' Extensions; with none left it uninstalls the extension (ControllerInstallation, OnDemand).
    for (const s of [A, B]) await deleteObject(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
    await eventually('both Extensions deleted (finalizers released)', async () => (await ext(A)) === undefined && (await ext(B)) === undefined, 120_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\ncontroller output (end):\n${controller?.output().slice(-4000)}`);
    });
    // Before the finalizer went, the combined filters (listener parts and buckets) and the per-shoot filters had gone.
    expect(await ours('/apis/networking.istio.io/v1alpha3/envoyfilters')).toEqual([]);
    expect(await ours('/apis/resources.gardener.cloud/v1alpha1/managedresources')).toEqual([]);
    controller?.child.kill('SIGTERM');
    await eventually('the controller exited', () => controller?.child.exitCode !== null, 60_000);
    controller = undefined;
    // The resource manager deletes what the chart rendered.
    for (const obj of [...objects].reverse()) await deleteObject(cp.kubeConfig, { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}) });
    // What remains that the controller made: its two Leases in the release namespace, which
    // Gardener deletes with the extension's namespace; no EnvoyFilter, ManagedResource or webhook registration.
    const leases = (await listAll(cp.kubeConfig, `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`)).items.map((l) => (l as KubeObject).metadata.name).sort();
    expect(leases).toEqual(['gardener-acl-leader-election', 'gardener-extension-heartbeat']);
    expect(await ours('/apis/networking.istio.io/v1alpha3/envoyfilters')).toEqual([]);
    expect((await listAll(cp.kubeConfig, '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations')).items.map((w) => (w as KubeObject).metadata.name)).toEqual([]);
  }, 300_000);
});
