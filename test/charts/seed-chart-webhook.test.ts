// The seed chart's webhook Deployment, run like the controller with the chart's args, config and
// a token of its own ServiceAccount (so the API server enforces the webhook's read-only RBAC on
// its informers), registered through the chart's own MutatingWebhookConfiguration. The only change
// to that object: the API server here cannot reach a Service, so clientConfig points at the
// process on 127.0.0.1 (the chart's inline TLS mode carries a certificate for that address).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObject, getObject, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import { gardenerLegacyProxyEnvoyFilter } from '../envoy/gardener-shapes.js';
import { createCertificateAuthority, getFreePort, installCRDs, issueServingCert, type ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { CONFIG_MOUNT, canI, serviceAccountKubeconfig, startChartContainer, writeChartConfig, type RunningContainer } from './chart-processes.js';
import { gardenerVpaCrdFile, startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import { SEED_CHART, find, renderChart, type KubeObject } from './helm.js';

const NAMESPACE = 'garden';
const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };

describe('seed chart webhook under the chart’s RBAC (real kube-apiserver calling it over TLS)', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  let dir: string;
  let objects: KubeObject[];
  const running: RunningContainer[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-chart-webhook-'));
    cp = await startWithCRDs([NAMESPACE]);
    // Gardener's own VerticalPodAutoscaler CRD: the chart's VPAs are checked against its schema.
    await installCRDs(cp.kubeConfig, [gardenerVpaCrdFile()]);
    const ca = await createCertificateAuthority('gardener-acl-webhook-test-ca');
    const serving = await issueServingCert(ca, { commonName: 'gardener-acl.garden.svc', dnsNames: ['gardener-acl.garden.svc'], ips: ['127.0.0.1'] });
    objects = await renderChart(
      SEED_CHART,
      { controller: { combinedMinInterval: '0s' }, webhook: { enabled: true, tls: { mode: 'inline', crt: serving.cert, key: serving.key, caBundle: ca.cert } } },
      NAMESPACE,
    );
    for (const obj of objects.filter((o) => o.kind !== 'MutatingWebhookConfiguration')) await createObject(cp.kubeConfig, obj as unknown as ObjectToWrite);

    const secret = find(objects, 'Secret') as unknown as { data: Record<string, string> };
    const certDir = path.join(dir, 'webhook-tls');
    await mkdir(certDir);
    for (const file of ['tls.crt', 'tls.key']) await writeFile(path.join(certDir, file), Buffer.from(secret.data[file] ?? '', 'base64'));
    const configFile = await writeChartConfig(objects, dir);
    const controllerKubeconfig = await serviceAccountKubeconfig(cp, NAMESPACE, dir, 'gardener-acl');
    const webhookKubeconfig = await serviceAccountKubeconfig(cp, NAMESPACE, dir, 'gardener-acl-webhook');
    const port = await getFreePort();
    const mapPaths = (arg: string): string =>
      arg
        .replace(`${CONFIG_MOUNT}/config.yaml`, configFile)
        .replace('/etc/gardener-acl/webhook-tls', certDir)
        .replace(/^--port=\d+$/, `--port=${port}`);
    running.push(await startChartContainer(objects, 'webhook', webhookKubeconfig, mapPaths), await startChartContainer(objects, 'controller', controllerKubeconfig, mapPaths));

    const configuration = find(objects, 'MutatingWebhookConfiguration') as unknown as { webhooks: { clientConfig: { service: { path: string }; caBundle: string } }[] };
    const webhooks = configuration.webhooks.map((w) => ({ ...w, clientConfig: { url: `https://127.0.0.1:${port}${w.clientConfig.service.path}`, caBundle: w.clientConfig.caBundle } }));
    await createObject(cp.kubeConfig, { ...configuration, webhooks } as unknown as ObjectToWrite);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A]);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
  }, 120_000);

  afterAll(async () => {
    for (const r of running) r.child.kill('SIGTERM');
    await grm?.stop();
    await cp?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('mutates Gardener’s legacy EnvoyFilter with the shoot’s RBAC filter, with only the chart’s permissions', async () => {
    const output = () => running.map((r) => r.output()).join('\n');
    await eventually('Extension acl of shoot a Succeeded', async () => {
      const ext = (await getObject(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(A) })) as
        | { status?: { lastOperation?: { state?: string } } }
        | undefined;
      return ext?.status?.lastOperation?.state === 'Succeeded';
    }, 60_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${output().slice(-3000)}`);
    });
    const legacy = gardenerLegacyProxyEnvoyFilter({ technicalID: technicalID(A), apiserverIP: '240.0.0.10' });
    // Until its caches have synced the webhook refuses (failurePolicy Fail), so gardenlet retries; so does this test.
    await eventually('legacy EnvoyFilter admitted', async () => {
      try {
        await createObject(cp.kubeConfig, legacy as unknown as ObjectToWrite);
        return true;
      } catch {
        return false;
      }
    }, 60_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${output().slice(-3000)}`);
    });
    const read = async () =>
      (await getObject(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: technicalID(A), namespace: DEFAULT_GW.namespace })) as unknown as {
        spec: { configPatches: { patch: { value: { filters: { name: string }[] } } }[] };
      };
    // Created: a filter refusing everyone (a create reveals no range). The controller sees the new
    // filter and updates it; the webhook, checking the update against the stored object with its
    // own ServiceAccount, adds the shoot's ACL.
    expect((await read()).spec.configPatches[0]?.patch.value.filters.map((f) => f.name)).toEqual(['gardener-acl-legacy-proxy', 'envoy.filters.network.tcp_proxy']);
    await eventually('the controller brought shoot a’s ACL', async () => JSON.stringify(await read()).includes('203.0.113.0'), 30_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}
${output().slice(-3000)}`);
    });
    expect((await read()).spec.configPatches[0]?.patch.value.filters.map((f) => f.name)).toEqual(['gardener-acl-legacy-proxy', 'envoy.filters.network.tcp_proxy']);
    expect(output()).not.toMatch(/forbidden/i);
  }, 150_000);

  it('the webhook’s ServiceAccount can read its caches and nothing more: no Secret, ManagedResource or EnvoyFilter write, no Secret read', async () => {
    const canWebhook = (attributes: Record<string, string>) => canI(cp, 'system:serviceaccount:garden:gardener-acl-webhook', NAMESPACE, attributes);
    expect(await canWebhook({ verb: 'watch', group: 'extensions.gardener.cloud', resource: 'extensions' })).toBe(true);
    // One EnvoyFilter read per review of a legacy filter: is it of the stored object (its uid)?
    expect(await canWebhook({ verb: 'get', group: 'networking.istio.io', resource: 'envoyfilters', namespace: DEFAULT_GW.namespace })).toBe(true);
    expect(await canWebhook({ verb: 'list', group: 'networking.istio.io', resource: 'envoyfilters' })).toBe(false);
    // Gateway Deployments are not read by the webhook (the controller writes the combined filters).
    expect(await canWebhook({ verb: 'list', group: 'apps', resource: 'deployments' })).toBe(false);
    const denied: Record<string, string>[] = [];
    for (const verb of ['create', 'patch', 'update', 'delete']) {
      denied.push(
        { verb, group: '', resource: 'secrets', namespace: technicalID(A) },
        { verb, group: 'resources.gardener.cloud', resource: 'managedresources', namespace: technicalID(A) },
        { verb, group: 'networking.istio.io', resource: 'envoyfilters', namespace: DEFAULT_GW.namespace },
        { verb, group: 'extensions.gardener.cloud', resource: 'extensions', namespace: technicalID(A) },
      );
    }
    denied.push(
      { verb: 'get', group: '', resource: 'secrets', namespace: NAMESPACE, name: 'gardener-acl-webhook-tls' },
      { verb: 'list', group: '', resource: 'secrets' },
      { verb: 'patch', group: 'extensions.gardener.cloud', resource: 'extensions', subresource: 'status', namespace: technicalID(A) },
      { verb: 'update', group: 'coordination.k8s.io', resource: 'leases', namespace: NAMESPACE, name: 'gardener-acl-leader-election' },
      { verb: 'create', group: 'coordination.k8s.io', resource: 'leases', namespace: NAMESPACE },
      { verb: 'create', group: '', resource: 'events', namespace: technicalID(A) },
    );
    for (const attributes of denied) expect(await canWebhook(attributes), JSON.stringify(attributes)).toBe(false);
  });
});
