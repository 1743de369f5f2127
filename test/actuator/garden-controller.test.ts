// Issue 32 points 1 and 3: the garden ACL's controller against real components. The runtime
// cluster is a real kube-apiserver with gardener-operator's Garden CRD and the real
// gardener-resource-manager (class seed, which applies the ManagedResources in namespace garden);
// the virtual garden is the real gardener-apiserver (test/support/garden-apiserver.ts) holding a
// ManagedSeed and its Shoot; the Extension garden/garden-acl is written, waited for and deleted
// by Gardener's own Extension deployer as gardener-operator drives it (class garden, name prefix
// garden-, its readiness check). What the resource manager stored is asserted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { GardenController } from '../../src/actuator/garden-controller.js';
import { explainCommand } from '../../src/cli/explain-command.js';
import { GARDEN_MANAGED_RESOURCE_NAME } from '../../src/actuator/garden-actuator.js';
import { KubeClusterClient } from '../../src/actuator/kube-cluster-client.js';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { createObject, getObject, mergePatch, patchStatus, type ObjectRef, type ObjectToWrite } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs, testLogger } from '../kube/kube-test-helpers.js';
import { gardenShoot, startGardenApiServer, type GardenApiServer } from '../support/garden-apiserver.js';
import { gardenOperatorExtension } from '../support/gardener-contract.js';
import { gardenerCrdFile, startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import type { JsonObject } from '../envoy/json.js';
import { GARDEN_GATEWAY_NAMESPACE, gardenHosts, storableGardenObject, virtualGardenRuntimeObjects } from '../istio/garden-fixture.js';
import { CLIENTS, gateway, reaches } from '../istio/garden-probes.js';

const RULE = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } };
const FILTER: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: 'acl-virtual-garden', namespace: GARDEN_GATEWAY_NAMESPACE };
const MR: ObjectRef = { apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: GARDEN_MANAGED_RESOURCE_NAME, namespace: 'garden' };
const EXTENSION: ObjectRef = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'garden-acl', namespace: 'garden' };

const VIRTUAL_GARDEN_APISERVER_DEPLOYMENT: ObjectToWrite = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'virtual-garden-kube-apiserver', namespace: 'garden' },
  spec: {
    replicas: 0,
    selector: { matchLabels: { app: 'virtual-garden', role: 'apiserver' } },
    template: { metadata: { labels: { app: 'virtual-garden', role: 'apiserver' } }, spec: { containers: [{ name: 'kube-apiserver', image: 'registry.k8s.io/kube-apiserver:v1.33.0' }] } },
  },
} as unknown as ObjectToWrite;

const stored = async (cp: ControlPlane): Promise<string> => JSON.stringify((await getObject(cp.kubeConfig, FILTER))?.['spec'] ?? null);
/** Every range the stored filter names, each once. */
const ranges = (spec: string): string[] => [...new Set([...spec.matchAll(/"address_prefix":"([^"]+)","prefix_len":(\d+)/g)].map((m) => `${m[1]}/${m[2]}`))].sort();
interface ExtensionStatus {
  readonly lastOperation?: { readonly state?: string; readonly description?: string };
  readonly lastError?: { readonly description?: string };
  readonly state?: Record<string, unknown>;
}
const extensionStatus = async (cp: ControlPlane): Promise<ExtensionStatus | undefined> => (await getObject(cp.kubeConfig, EXTENSION))?.['status'] as ExtensionStatus | undefined;

describe('the garden controller on a real runtime cluster, resource manager and virtual garden, driven by gardener-operator’s Extension deployer', () => {
  let cp: ControlPlane;
  let virtualGarden: GardenApiServer;
  let grm: ResourceManager;
  const controllers: GardenController[] = [];
  let blind: GardenController | undefined;

  const startController = async (withVirtualGarden: boolean): Promise<GardenController> => {
    const registry = new Registry();
    const controller = new GardenController({
      kubeConfig: cp.kubeConfig,
      client: new KubeClusterClient(cp.kubeConfig, { registry }),
      ...(withVirtualGarden ? { virtualGarden: virtualGarden.kubeConfig } : {}),
      operator: defaultOperatorConfig(),
      logger: testLogger(),
      registry,
      resyncPeriodMs: 600_000,
    });
    controllers.push(controller);
    await controller.startCaches();
    controller.startWorkers();
    return controller;
  };

  beforeAll(async () => {
    [cp, virtualGarden] = await Promise.all([startWithCRDs(['garden', GARDEN_GATEWAY_NAMESPACE]), startGardenApiServer()]);
    await cp.installCRDs([gardenerCrdFile('operator.gardener.cloud_gardens.yaml')]);
    // As on a Garden's first reconcile: the garden's ingress gateway runs, the virtual garden's API server and its Gateway do not exist yet.
    for (const object of [storableGardenObject() as unknown as ObjectToWrite, ...virtualGardenRuntimeObjects('passthrough').filter((o) => o['kind'] === 'Deployment')]) {
      await createObject(cp.kubeConfig, object as unknown as ObjectToWrite);
    }
    await createObject(virtualGarden.kubeConfig, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'garden' } });
    await createObject(virtualGarden.kubeConfig, gardenShoot('seed-eu', 'garden'));
    await patchStatus(virtualGarden.kubeConfig, { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', name: 'seed-eu', namespace: 'garden' }, { networking: { egressCIDRs: ['198.51.100.20/32'] } });
    await createObject(virtualGarden.kubeConfig, { apiVersion: 'seedmanagement.gardener.cloud/v1alpha1', kind: 'ManagedSeed', metadata: { name: 'seed-eu', namespace: 'garden' }, spec: { shoot: { name: 'seed-eu' }, gardenlet: {} } });
    grm = await startResourceManager(cp);
  }, 240_000);

  afterAll(async () => {
    await Promise.allSettled(controllers.map((c) => c.stop()));
    await Promise.allSettled([grm?.stop(), virtualGarden?.stop(), cp?.stop()]);
  });

  it('on a Garden’s first reconcile (no virtual garden API server, no Gateway yet) the deployer sees it ready, the filter written ahead for every host the Gateway will have', { timeout: 240_000 }, async () => {
    blind = await startController(false);
    const run = await gardenOperatorExtension({ kubeconfig: cp.kubeconfigPath, steps: ['deploy', 'wait'], providerConfig: RULE });
    expect(run.ok, JSON.stringify(run.steps)).toBe(true);
    const filter = (await getObject(cp.kubeConfig, FILTER)) as unknown as { spec: { configPatches: { match: { listener: { filterChain: { sni: string } } } }[] } };
    expect(filter.spec.configPatches.map((p) => p.match.listener.filterChain.sni)).toEqual(['api.garden.example.test', 'api.garden2.example.test', 'gardener.garden.example.test', 'gardener.garden2.example.test']);
    expect(await stored(cp)).toContain('"address_prefix":"100.96.0.0"');
  });

  it('once the virtual garden’s API server is deployed, without access to it the rule in force stays with every range it admitted, Succeeded says why (the Garden’s reconcile goes on to its kube-apiserver), and a changed rule waits', { timeout: 90_000 }, async () => {
    const before = ranges(await stored(cp));
    await createObject(cp.kubeConfig, VIRTUAL_GARDEN_APISERVER_DEPLOYMENT);
    for (const object of virtualGardenRuntimeObjects('passthrough').filter((o) => o['kind'] === 'Gateway')) await createObject(cp.kubeConfig, object as unknown as ObjectToWrite);
    const kept = await eventually('Succeeded, saying the egress is unknown', async () => {
      const status = await extensionStatus(cp);
      return status?.lastOperation?.state === 'Succeeded' && status.state?.['managedSeedEgressUnknown'] === true ? status.lastOperation.description : undefined;
    }, 30_000);
    expect(kept).toBe(
      'the ACL in force stays, admitting every range it admitted, until every ManagedSeed’s egress is known: error: virtual garden: its ManagedSeeds cannot be read, so the egress of every seed’s gardenlet is unknown and an ACL could lock them out; the ACL is left as it was (check the controller’s virtual garden kubeconfig and its permissions to list ManagedSeeds and Shoots in namespace garden)',
    );
    expect(ranges(await stored(cp))).toEqual(before);
    // A rule narrowed meanwhile could lock out a gardenlet whose egress is not known: it waits.
    await mergePatch(cp.kubeConfig, EXTENSION, { spec: { providerConfig: { rule: { ...RULE.rule, cidrs: ['203.0.113.0/25'] } } } });
    const lastError = await eventually('lastError', async () => (await extensionStatus(cp))?.lastError?.description, 30_000);
    expect(lastError).toContain('the changed rule is applied once every ManagedSeed’s egress is known; until then the rule in force stays');
    expect(ranges(await stored(cp))).toEqual(before);
    await blind?.stop();
  });

  it('gardener-operator’s deployer sees the Extension ready once the resource manager has applied the filter, which admits the ManagedSeed’s egress', { timeout: 240_000 }, async () => {
    await startController(true);
    const run = await gardenOperatorExtension({ kubeconfig: cp.kubeconfigPath, steps: ['deploy', 'wait'], providerConfig: RULE });
    expect(run.steps.map((s) => [s.step, s.ok, s.error ?? ''])).toEqual([
      ['connect', true, ''],
      ['deploy', true, ''],
      ['wait', true, ''],
    ]);
    const spec = await stored(cp);
    for (const cidr of ['203.0.113.0', '10.1.0.0', '100.96.0.0', '198.51.100.20']) expect(spec).toContain(`"address_prefix":"${cidr}"`);
    // Every egress known again: the status says so no more.
    const status = await extensionStatus(cp);
    expect(status?.state?.['managedSeedEgressUnknown']).toBeUndefined();
    expect(status?.lastOperation?.description).not.toContain('egress is known');
    // The Gateway's one chain now: one patch, no longer one per predicted host.
    expect((JSON.parse(spec) as { configPatches: unknown[] }).configPatches).toHaveLength(1);
    expect(spec).toContain('"sni":"api.garden.example.test"');
  });

  it('a ManagedSeed’s new egress reaches the stored filter without anything else changing', { timeout: 60_000 }, async () => {
    await patchStatus(virtualGarden.kubeConfig, { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', name: 'seed-eu', namespace: 'garden' }, { networking: { egressCIDRs: ['198.51.100.20/32', '192.0.2.64/26'] } });
    await eventually('the new egress in the stored filter', async () => (await stored(cp)).includes('"address_prefix":"192.0.2.64"'), 45_000);
  });

  it('a ManagedSeed added after the rule: the stored filter, rendered by Istio and served by a real Envoy, admits its gardenlet and still refuses an outsider', { timeout: 120_000 }, async () => {
    await createObject(virtualGarden.kubeConfig, gardenShoot('seed-us', 'garden'));
    await patchStatus(virtualGarden.kubeConfig, { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', name: 'seed-us', namespace: 'garden' }, { networking: { egressCIDRs: ['192.0.2.128/25', '2001:db8:5eed::/48'] } });
    await createObject(virtualGarden.kubeConfig, { apiVersion: 'seedmanagement.gardener.cloud/v1alpha1', kind: 'ManagedSeed', metadata: { name: 'seed-us', namespace: 'garden' }, spec: { shoot: { name: 'seed-us' }, gardenlet: {} } });
    await eventually('the new seed’s egress in the stored filter', async () => (await stored(cp)).includes('"address_prefix":"192.0.2.128"'), 45_000);
    const filter = (await getObject(cp.kubeConfig, FILTER)) as unknown as { apiVersion: string; kind: string; metadata: { name: string; namespace: string; labels?: Record<string, string> }; spec: unknown };
    const served = { apiVersion: filter.apiVersion, kind: filter.kind, metadata: { name: filter.metadata.name, namespace: filter.metadata.namespace, labels: filter.metadata.labels ?? {} }, spec: filter.spec } as unknown as JsonObject;
    const gw = await gateway('passthrough', [served]);
    try {
      const by = (label: string) => CLIENTS.find((c) => c.label === label)!;
      for (const host of gardenHosts()) {
        expect(await reaches(gw, 'passthrough', host, by('ManagedSeed seed-us egress, IPv4-mapped')), host).toBe(true);
        expect(await reaches(gw, 'passthrough', host, by('ManagedSeed seed-us egress, IPv6')), host).toBe(true);
        expect(await reaches(gw, 'passthrough', host, by('outsider IPv4')), host).toBe(false);
      }
    } finally {
      await gw.stop();
    }
  });

  it('explain --garden on the live runtime cluster and virtual garden gives the verdicts the stored filter enforces', { timeout: 60_000 }, async () => {
    const explain = async (client: string, virtual = true) => {
      let out = '';
      let err = '';
      const args = ['--garden', '--client', client, '--kubeconfig', cp.kubeconfigPath, ...(virtual ? ['--virtual-garden-kubeconfig', virtualGarden.kubeconfigPath] : [])];
      const code = await explainCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
      return { code, out, err };
    };
    // seed-us was added after the rule: its gardenlet is admitted by the egress read live.
    const seedUs = await explain('192.0.2.200');
    expect(seedUs.code, seedUs.err).toBe(0);
    expect(seedUs.out).toContain('remote_ip 192.0.2.200 is in no ALLOW range, but remote_ip 192.0.2.200 is in the always-allowed range 192.0.2.128/25');
    expect((await explain('100.64.1.1')).code).toBe(1);
    // Without the virtual garden the answer says that the ManagedSeeds' egress is unknown.
    const blindly = await explain('192.0.2.200', false);
    expect(blindly.code).toBe(1);
    expect(blindly.err).toContain('error: virtual garden: its ManagedSeeds cannot be read');
    expect(blindly.err).toContain('note: explained with the egress that is known');
  });

  it('on removal from the Garden the deployer deletes the Extension and the filter goes with it', { timeout: 240_000 }, async () => {
    const run = await gardenOperatorExtension({ kubeconfig: cp.kubeconfigPath, steps: ['destroy', 'wait-cleanup'] });
    expect(run.ok, `${JSON.stringify(run.steps)}\n${run.stderr}`).toBe(true);
    expect(await getObject(cp.kubeConfig, MR)).toBeUndefined();
    await eventually('the filter deleted', async () => (await getObject(cp.kubeConfig, FILTER)) === undefined, 60_000);
  });
});
