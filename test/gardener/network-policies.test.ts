// The seed chart's Services under Gardener's own network-policy controller (the real
// gardener-resource-manager, as gardenlet runs it for seed namespaces): the NetworkPolicies it
// generates from the chart's annotations must let the seed's kube-apiserver reach the webhook
// and the seed Prometheus (namespace garden) scrape both components, and nothing else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { listAll } from '../../src/kube/list-watch.js';
import { createObject, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { SEED_CHART, renderChart } from '../charts/helm.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const NAMESPACE = 'extension-acl-x1';

interface NetworkPolicy {
  metadata: { name: string; namespace: string };
  spec: {
    podSelector: { matchLabels?: Record<string, string> };
    policyTypes?: string[];
    ingress?: { from?: { namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: { matchLabels?: Record<string, string> } }[]; ports?: { port: number; protocol: string }[] }[];
    egress?: unknown[];
  };
}

describe('Gardener’s network-policy controller on the seed chart’s Services', () => {
  let cp: ControlPlane;
  let grm: ResourceManager;

  beforeAll(async () => {
    cp = await startWithCRDs(['garden']);
    // An extension namespace as gardenlet creates it for a ControllerInstallation.
    await createObject(cp.kubeConfig, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE, labels: { 'gardener.cloud/role': 'extension' } } });
    // gardenlet runs the seed's resource manager with the network-policy controller for the
    // garden namespace and extension namespaces among others.
    grm = await startResourceManager(cp, {
      networkPolicyNamespaceSelectors: [{ matchLabels: { 'kubernetes.io/metadata.name': 'garden' } }, { matchLabels: { 'gardener.cloud/role': 'extension' } }],
    });
    // The seed Prometheus as gardenlet deploys it (pkg/gardenlet/controller/seed/seed/components.go,
    // newSeedPrometheus: its additional pod labels). The controller only writes policies for label
    // keys some pod carries, so the pod comes first (it never runs here: no kubelet).
    await createObject(cp.kubeConfig, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'prometheus-seed-0',
        namespace: 'garden',
        labels: {
          'networking.resources.gardener.cloud/to-all-seed-scrape-targets': 'allowed',
          'networking.resources.gardener.cloud/to-extensions-all-seed-scrape-targets': 'allowed',
        },
      },
      spec: { containers: [{ name: 'prometheus', image: 'prometheus' }] },
    });
    const objects = await renderChart(SEED_CHART, {}, NAMESPACE);
    for (const obj of objects.filter((o) => o.kind === 'Service')) await createObject(cp.kubeConfig, obj as unknown as ObjectToWrite);
  }, 120_000);

  afterAll(async () => {
    await grm?.stop();
    await cp?.stop();
  });

  const policies = async (): Promise<NetworkPolicy[]> => (await listAll(cp.kubeConfig, '/apis/networking.k8s.io/v1/networkpolicies')).items as unknown as NetworkPolicy[];

  it('the seed API server may reach the webhook port, and only the webhook pods', async () => {
    const fromWorld = await eventually('ingress-to-gardener-acl-from-world', async () => (await policies()).find((p) => p.metadata.name === 'ingress-to-gardener-acl-from-world'), 60_000).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${JSON.stringify((await policies()).map((p) => p.metadata))}\n${await grm.log(40)}`);
    });
    expect(fromWorld.metadata.namespace).toBe(NAMESPACE);
    expect(fromWorld.spec.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/instance': 'gardener-acl', 'app.kubernetes.io/name': 'gardener-acl-webhook' });
    expect(fromWorld.spec.ingress).toEqual([{ ports: [{ port: 10250, protocol: 'TCP' }] }]);
  }, 90_000);

  it('the seed Prometheus may scrape the controller (8080) and the webhook (8081)', async () => {
    const scrape = await eventually('scrape policies for both components', async () => {
      const found = (await policies()).filter((p) => p.metadata.namespace === NAMESPACE && p.metadata.name.startsWith('ingress-') && p.metadata.name.includes('seed-scrape-targets'));
      return found.length >= 2 && found;
    }, 60_000).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${JSON.stringify(await policies(), null, 1).slice(0, 6000)}`);
    });
    const byPort = new Map(scrape.map((p) => [p.spec.ingress?.[0]?.ports?.[0]?.port, p]));
    for (const [port, selector] of [[8080, 'gardener-acl'], [8081, 'gardener-acl-webhook']] as const) {
      const policy = byPort.get(port);
      expect(policy?.spec.podSelector.matchLabels, `port ${port}`).toEqual({ 'app.kubernetes.io/instance': 'gardener-acl', 'app.kubernetes.io/name': selector });
      // From the Prometheus pods in garden that carry the seed scrape-targets label.
      expect(policy?.spec.ingress?.[0]?.from).toEqual([
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'garden' } },
          podSelector: { matchLabels: { 'networking.resources.gardener.cloud/to-extensions-all-seed-scrape-targets': 'allowed' } },
        },
      ]);
    }
  }, 90_000);
});
