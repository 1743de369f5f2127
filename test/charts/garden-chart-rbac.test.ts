// The seed chart as gardener-operator renders it for the runtime cluster
// (gardener.runtimeCluster.enabled "true", its priority class, namespace runtime-extension-<name>):
// it runs `garden-controller` and no seed webhook, and its RBAC is exactly what the garden
// controller sends. On a real kube-apiserver with the real resource manager and the real
// gardener-apiserver as the virtual garden, the chart's container runs with a token of the chart's
// ServiceAccount (the API server enforces the chart's RBAC) and the kubeconfig Secret the values
// name; gardener-operator's Extension deployer must see it ready, then clean up.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObject, getObject, patchStatus, type ObjectRef, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { installCRDs, type ControlPlane } from '../kube/control-plane.js';
import { startWithCRDs } from '../kube/kube-test-helpers.js';
import { gardenShoot, startGardenApiServer, type GardenApiServer } from '../support/garden-apiserver.js';
import { gardenOperatorExtension } from '../support/gardener-contract.js';
import { gardenerCrdFile, gardenerVpaCrdFile, startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import { GARDEN_GATEWAY_NAMESPACE, gardenObject, virtualGardenRuntimeObjects } from '../istio/garden-fixture.js';
import { CONFIG_MOUNT, canI, serviceAccountKubeconfig, startChartContainer, writeChartConfig, type RunningContainer } from './chart-processes.js';
import { SEED_CHART, renderChart, type KubeObject } from './helm.js';

const NAMESPACE = 'runtime-extension-acl';
const SA_USER = `system:serviceaccount:${NAMESPACE}:gardener-acl`;
const VIRTUAL_GARDEN_MOUNT = '/var/run/secrets/gardener-acl/virtual-garden/kubeconfig';
// What gardener-operator merges into the chart's values for the runtime cluster
// (pkg/operator/controller/extension/extension/runtime/runtime.go): enabled is the string "true".
const VALUES = { gardener: { runtimeCluster: { enabled: 'true', priorityClassName: 'gardener-garden-system-200' } }, garden: { virtualGardenKubeconfigSecret: 'gardener-acl-virtual-garden' } };
const RULE = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } };
const FILTER: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: 'acl-virtual-garden', namespace: GARDEN_GATEWAY_NAMESPACE };

interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
}
const rulesOf = (objects: readonly KubeObject[], kind: string, name: string, namespace?: string): readonly Rule[] =>
  ((objects.find((o) => o.kind === kind && o.metadata.name === name && o.metadata.namespace === namespace) as unknown as { rules?: Rule[] } | undefined)?.rules ?? []).map((r) => ({ ...r }));

describe('the seed chart rendered by gardener-operator for the runtime cluster', () => {
  let objects: KubeObject[];
  let cp: ControlPlane;
  let virtualGarden: GardenApiServer;
  let grm: ResourceManager | undefined;
  let dir: string;
  let controller: RunningContainer | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-garden-chart-'));
    objects = await renderChart(SEED_CHART, VALUES, NAMESPACE);
    [cp, virtualGarden] = await Promise.all([startWithCRDs([NAMESPACE, 'garden', GARDEN_GATEWAY_NAMESPACE]), startGardenApiServer()]);
    await installCRDs(cp.kubeConfig, [gardenerVpaCrdFile(), gardenerCrdFile('operator.gardener.cloud_gardens.yaml')]);
    for (const obj of objects) await createObject(cp.kubeConfig, obj as unknown as ObjectToWrite);
    const garden = gardenObject() as unknown as { spec: { runtimeCluster: Record<string, unknown>; virtualCluster: Record<string, unknown> } } & ObjectToWrite;
    await createObject(cp.kubeConfig, {
      ...garden,
      spec: {
        runtimeCluster: { ...garden.spec.runtimeCluster, ingress: { controller: { kind: 'nginx' } }, provider: {} },
        virtualCluster: { ...garden.spec.virtualCluster, gardener: { clusterIdentity: 'test-garden' }, kubernetes: { version: '1.33.0' }, maintenance: { timeWindow: { begin: '220000+0100', end: '230000+0100' } }, networking: { services: ['100.64.0.0/13'] } },
      },
    } as ObjectToWrite);
    for (const object of virtualGardenRuntimeObjects('passthrough').filter((o) => ['Deployment', 'Gateway'].includes(String(o['kind'])))) await createObject(cp.kubeConfig, object as unknown as ObjectToWrite);
    await createObject(virtualGarden.kubeConfig, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'garden' } });
    await createObject(virtualGarden.kubeConfig, gardenShoot('seed-eu', 'garden'));
    await patchStatus(virtualGarden.kubeConfig, { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', name: 'seed-eu', namespace: 'garden' }, { networking: { egressCIDRs: ['198.51.100.20/32'] } });
    await createObject(virtualGarden.kubeConfig, { apiVersion: 'seedmanagement.gardener.cloud/v1alpha1', kind: 'ManagedSeed', metadata: { name: 'seed-eu', namespace: 'garden' }, spec: { shoot: { name: 'seed-eu' }, gardenlet: {} } });
    grm = await startResourceManager(cp);
    const configFile = await writeChartConfig(objects, dir);
    controller = await startChartContainer(
      objects,
      'controller',
      await serviceAccountKubeconfig(cp, NAMESPACE, dir),
      // The Secret the values name, mounted where the chart mounts it: here the virtual garden's admin kubeconfig.
      (arg) => arg.replace(`${CONFIG_MOUNT}/config.yaml`, configFile).replace(VIRTUAL_GARDEN_MOUNT, virtualGarden.kubeconfigPath),
      NAMESPACE,
    );
  }, 240_000);

  afterAll(async () => {
    controller?.child.kill('SIGTERM');
    await Promise.allSettled([grm?.stop(), virtualGarden?.stop(), cp?.stop()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('renders the garden controller (its priority class, the virtual garden kubeconfig) and nothing of the seed webhook', () => {
    const deployments = objects.filter((o) => o.kind === 'Deployment') as unknown as { metadata: { name: string }; spec: { template: { spec: { priorityClassName?: string; containers: { args: string[] }[] } } } }[];
    expect(deployments.map((d) => d.metadata.name)).toEqual(['gardener-acl']);
    const pod = deployments[0]!.spec.template.spec;
    expect(pod.priorityClassName).toBe('gardener-garden-system-200');
    expect(pod.containers[0]!.args.slice(0, 1)).toEqual(['garden-controller']);
    expect(pod.containers[0]!.args).toContain(`--virtual-garden-kubeconfig=${VIRTUAL_GARDEN_MOUNT}`);
    expect(objects.filter((o) => /webhook/i.test(o.kind) || o.metadata.name.includes('webhook')).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([]);
  });

  it('grants exactly what the garden controller sends', () => {
    expect(rulesOf(objects, 'ClusterRole', 'gardener-acl-garden')).toEqual([
      { apiGroups: ['operator.gardener.cloud'], resources: ['gardens'], verbs: ['list', 'watch'] },
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['list', 'watch'] },
    ]);
    expect(rulesOf(objects, 'Role', 'gardener-acl-garden', 'garden')).toEqual([
      { apiGroups: ['extensions.gardener.cloud'], resources: ['extensions'], verbs: ['list', 'watch', 'patch'] },
      { apiGroups: ['extensions.gardener.cloud'], resources: ['extensions/status'], verbs: ['patch'] },
      { apiGroups: ['networking.istio.io'], resources: ['gateways'], verbs: ['list', 'watch'] },
      { apiGroups: ['resources.gardener.cloud'], resources: ['managedresources'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    ]);
    expect(rulesOf(objects, 'Role', 'gardener-acl-garden', GARDEN_GATEWAY_NAMESPACE)).toEqual([
      { apiGroups: ['networking.istio.io'], resources: ['envoyfilters'], resourceNames: ['acl-virtual-garden'], verbs: ['delete'] },
    ]);
    expect(objects.filter((o) => o.kind === 'ClusterRole').map((o) => o.metadata.name)).toEqual(['gardener-acl-garden']);
  });

  it('with only those permissions, gardener-operator’s deployer sees the Extension ready and its deletion done', { timeout: 300_000 }, async () => {
    const run = await gardenOperatorExtension({ kubeconfig: cp.kubeconfigPath, steps: ['deploy', 'wait'], providerConfig: RULE });
    expect(run.ok, `${JSON.stringify(run.steps)}\n${controller?.output().slice(-4000)}`).toBe(true);
    expect(JSON.stringify((await getObject(cp.kubeConfig, FILTER))?.['spec'])).toContain('"address_prefix":"198.51.100.20"');
    const cleanup = await gardenOperatorExtension({ kubeconfig: cp.kubeconfigPath, steps: ['destroy', 'wait-cleanup'] });
    expect(cleanup.ok, `${JSON.stringify(cleanup.steps)}\n${controller?.output().slice(-4000)}`).toBe(true);
    expect(controller?.output()).not.toMatch(/forbidden/i);
  });

  it('requests the garden controller never sends are denied', async () => {
    const denied: Record<string, string>[] = [
      { verb: 'list', group: 'extensions.gardener.cloud', resource: 'extensions', namespace: 'shoot--p--a' },
      { verb: 'update', group: 'extensions.gardener.cloud', resource: 'extensions', namespace: 'garden' },
      { verb: 'delete', group: 'extensions.gardener.cloud', resource: 'extensions', namespace: 'garden' },
      { verb: 'get', group: '', resource: 'secrets', namespace: 'garden' },
      { verb: 'create', group: '', resource: 'secrets', namespace: 'kube-system' },
      { verb: 'patch', group: 'networking.istio.io', resource: 'envoyfilters', namespace: GARDEN_GATEWAY_NAMESPACE },
      { verb: 'delete', group: 'networking.istio.io', resource: 'envoyfilters', namespace: GARDEN_GATEWAY_NAMESPACE, name: 'proxy-protocol-sni' },
      { verb: 'create', group: 'resources.gardener.cloud', resource: 'managedresources', namespace: 'kube-system' },
      { verb: 'update', group: 'operator.gardener.cloud', resource: 'gardens' },
      { verb: 'create', group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations' },
      { verb: 'list', group: '', resource: 'pods' },
    ];
    for (const attributes of denied) expect(await canI(cp, SA_USER, NAMESPACE, attributes), JSON.stringify(attributes)).toBe(false);
    expect(await canI(cp, SA_USER, NAMESPACE, { verb: 'delete', group: 'networking.istio.io', resource: 'envoyfilters', namespace: GARDEN_GATEWAY_NAMESPACE, name: 'acl-virtual-garden' })).toBe(true);
  });
});
