// The controller's served check, end to end, with the chart's defaults (served check every 20 s,
// the ecds form): a Gardener 1.145 seed's objects in a real kube-apiserver, the real
// gardener-resource-manager applying the per-shoot filters, and each of the seed's three gateways
// a real Envoy fed by Istio's own discovery server with the EnvoyFilters the API server stores.
// The controller reads each gateway pod's Envoy through the API server's port-forward; the kubelet
// stand-in (test/kube/kubelet-standin.ts) takes the last hop, as no kubelet runs here. What
// istiod would do on an API server write (push the stored EnvoyFilters) the test does by handing
// the stored list to the serve tool (`bridge`).
//
// A Gardener EnvoyFilter that renames the 8443 connection manager makes every ACL patch on it
// match nothing: within a minute each ACL shoot's Extension says ProtectionNotServed (Error,
// ControlPlaneHealthy False, a Warning Event) and the metric names it; when the filter goes, the
// shoots are Succeeded again.
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AclController } from '../../src/actuator/controller.js';
import { verifyCommand } from '../../src/cli/verify-command.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject } from '../../src/kube/objects-client.js';
import { ERAS } from '../istio/eras.js';
import { forApiServer, withoutServerFields } from '../istio/stored-fixture-objects.js';
import { startLiveAdsGateway, type LiveAdsGateway } from '../istio/live-ads-gateway.js';
import { INGRESS_GATEWAYS, gardenerSeedObjects, gatewayLabels } from '../istio/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithObjects } from '../kube/kube-test-helpers.js';
import { startKubeletStandin, type KubeletStandin } from '../kube/kubelet-standin.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';
import { startTestController } from '../actuator/seed-fixture.js';

const era = ERAS['v1.145'];
const ACL_SHOOTS = ['shoot--bar--a', 'shoot--p--foo', 'shoot--xshoot-q--foo', 'shoot-q--foo'];
const API_SERVER_KINDS = new Set(['Deployment', 'Service', 'Gateway', 'EnvoyFilter', 'Cluster', 'Infrastructure', 'Extension']);
const REPORTED_WITHIN_MS = 60_000;
const RENAMER = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: 'http-proxy-hcm-name', namespace: 'istio-ingress' };

interface ExtensionView {
  metadata: { generation?: number };
  status?: {
    lastOperation?: { state: string; description: string };
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}



describe('served check in the controller (real kube-apiserver, resource manager, Istio and Envoy per gateway; chart defaults)', () => {
  let cp: ControlPlane;
  let grm: ResourceManager;
  let controller: AclController;
  let standin: KubeletStandin;
  const gateways = new Map<string, LiveAdsGateway>();
  const registry = new Registry();
  const objects = gardenerSeedObjects(era);
  const istioOnly = objects.filter((o) => o['kind'] !== 'EnvoyFilter');

  const ext = async (id: string) => (await getObject(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: id })) as unknown as ExtensionView;
  const healthy = (e: ExtensionView) => e.status?.conditions?.find((c) => c.type === 'ControlPlaneHealthy');
  const storedFilters = async () => (await listAll(cp.kubeConfig, '/apis/networking.istio.io/v1alpha3/envoyfilters')).items.map((f) => withoutServerFields(f as Record<string, unknown>));
  /** istiod's part: every gateway's Istio takes the EnvoyFilters the API server now stores. */
  const bridge = async () => {
    const stored = await storedFilters();
    for (const gateway of gateways.values()) await gateway.replaceEnvoyFilters(stored);
  };
  /** `gardener-acl verify --kubeconfig` on the live seed. */
  const verifyLive = async (args: string[]) => {
    let out = '';
    let err = '';
    const code = await verifyCommand(['--kubeconfig', cp.kubeconfigPath, ...args], { stdout: (t) => (out += t), stderr: (t) => (err += t) });
    return { code, out, err };
  };
  const metric = async () => (await registry.getSingleMetric('gardener_acl_protection_not_served')?.get())?.values ?? [];

  beforeAll(async () => {
    cp = await startWithObjects(objects.filter((o) => API_SERVER_KINDS.has(String(o['kind']))).map(forApiServer));
    grm = await startResourceManager(cp);
    // The chart's ConfigMap with its default OperatorConfiguration: `verify` on the live seed reads the controller's settings from it.
    await createObject(cp.kubeConfig, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'gardener-acl-config', namespace: INGRESS_GATEWAYS[0]?.namespace ?? 'istio-ingress' },
      data: { 'config.yaml': 'apiVersion: acl.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n' },
    });
    controller = await startTestController(cp.kubeConfig, { registry });
    for (const id of ACL_SHOOTS) {
      await eventually(`${id} Succeeded`, async () => {
        const e = await ext(id);
        return e.status?.lastOperation?.state === 'Succeeded' && e.status.observedGeneration === e.metadata.generation;
      }, 90_000);
    }
    // The resource manager has put every ACL shoot's own filter onto the default gateway.
    await eventually('per-shoot filters applied', async () => {
      const names = new Set((await storedFilters()).map((f) => (f['metadata'] as { name: string }).name));
      return ACL_SHOOTS.every((id) => names.has(`acl-${id}`));
    }, 90_000);
    const stored = await storedFilters();
    const pods = [];
    for (const gateway of INGRESS_GATEWAYS) {
      const labels = gatewayLabels(era, gateway);
      const live = await startLiveAdsGateway({ objects: [...istioOnly, ...stored], proxy: { namespace: gateway.namespace, labels } });
      gateways.set(gateway.namespace, live);
      pods.push({ namespace: gateway.namespace, name: 'istio-ingressgateway-5f7b-a1', labels, ports: new Map([[15000, new URL(live.envoy.adminUrl).host]]) });
    }
    standin = await startKubeletStandin(cp.kubeConfig, pods);
  }, 300_000);

  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await standin?.stop();
    for (const gateway of gateways.values()) await gateway.stop();
    await cp?.stop();
  });

  it('with every gateway pod read, every ACL shoot is Succeeded and ControlPlaneHealthy without a note; no series in the metric', { timeout: 120_000 }, async () => {
    for (const id of ACL_SHOOTS) {
      await eventually(`${id} checked where served`, async () => {
        const condition = healthy(await ext(id));
        return condition?.status === 'True' && condition.message === 'The ACL is stored as recorded on every path and gateway.';
      }, 90_000);
    }
    expect(await metric()).toEqual([]);
    // `verify` on the live seed reads every gateway pod the same way and agrees.
    const cli = await verifyLive([]);
    expect(cli.err).toBe('');
    expect(cli.code).toBe(0);
    expect(cli.out.split('\n').filter((l) => l !== '').sort()).toEqual(
      INGRESS_GATEWAYS.map((g) => `gateway ${g.namespace} (pod istio-ingressgateway-5f7b-a1): every path it serves into the 4 ACL shoot(s) checked carries the shoot's filter`).sort(),
    );
  });

  it('a renamed 8443 connection manager: reported within a minute on every ACL shoot\'s Extension, as a Warning Event and in the metric; cleared when it goes', { timeout: 240_000 }, async () => {
    await createObject(cp.kubeConfig, {
      ...RENAMER,
      metadata: { name: RENAMER.name, namespace: RENAMER.namespace },
      spec: {
        workloadSelector: { labels: gatewayLabels(era, INGRESS_GATEWAYS.find((g) => g.namespace === 'istio-ingress')!) },
        configPatches: [
          {
            applyTo: 'NETWORK_FILTER',
            match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: 'envoy.filters.network.http_connection_manager' } } } },
            patch: { operation: 'MERGE', value: { name: 'envoy.http_connection_manager' } },
          },
        ],
      },
    });
    const written = performance.now();
    await bridge();
    for (const id of ACL_SHOOTS) {
      await eventually(`${id} ProtectionNotServed`, async () => {
        const e = await ext(id);
        return e.status?.lastOperation?.state === 'Error' && healthy(e)?.reason === 'ProtectionNotServed';
      }, REPORTED_WITHIN_MS);
    }
    const reportedMs = Math.round(performance.now() - written);
    console.log(`[served] renamed connection manager reported on all ${ACL_SHOOTS.length} Extensions ${reportedMs} ms after the write (check every 20 s, a confirming read 5 s after a new fault)`);
    expect(reportedMs).toBeLessThan(REPORTED_WITHIN_MS);
    const foo = await ext('shoot--p--foo');
    expect(healthy(foo)).toMatchObject({
      status: 'False',
      reason: 'ProtectionNotServed',
      message:
        'The ACL is stored but not served: exposed on connect at istio-ingress/istio-ingressgateway-5f7b-a1 0.0.0.0_8443: the connection manager routes CONNECT by x-gardener-destination and no filter before its router holds a policy for the shoot: a Gardener or Istio change (a renamed or moved listener, a connection manager under another filter name) leaves the EnvoyFilter patch matching nothing there.',
    });
    expect(foo.status?.lastOperation?.description).toBe(healthy(foo)?.message);
    const cli = await verifyLive(['--shoot', 'shoot--p--foo', '--gateway', 'istio-ingress']);
    expect(cli.code).toBe(1);
    expect(cli.out).toContain('gateway istio-ingress (pod istio-ingressgateway-5f7b-a1): 1 path(s) into 1 of 1 ACL shoot(s) not served as stored\nEXPOSED  shoot--p--foo            connect       0.0.0.0_8443\n');
    const events = (await listAll(cp.kubeConfig, '/api/v1/namespaces/shoot--p--foo/events')).items as { reason?: string; type?: string; message?: string }[];
    expect(events.filter((e) => e.reason === 'ProtectionNotServed' && e.type === 'Warning').map((e) => e.message)).toEqual([healthy(foo)?.message]);
    expect((await metric()).map((v) => `${String(v.labels['shoot'])} ${String(v.labels['gateway'])} ${String(v.labels['path'])} ${String(v.labels['severity'])} ${v.value}`).sort()).toEqual(
      ACL_SHOOTS.map((id) => `${id} istio-ingress connect exposed 1`),
    );

    await deleteObject(cp.kubeConfig, RENAMER);
    await bridge();
    for (const id of ACL_SHOOTS) {
      await eventually(`${id} served again`, async () => {
        const e = await ext(id);
        return e.status?.lastOperation?.state === 'Succeeded' && healthy(e)?.status === 'True';
      }, REPORTED_WITHIN_MS);
    }
    expect(await metric()).toEqual([]);
  });

  it('port 8132 no longer routed (Gardener\'s CONNECT filters for it removed): reported on every ACL shoot\'s Extension as a patch that matches nothing, Succeeded (nothing exposed), and in the metric; gone when they return', { timeout: 240_000 }, async () => {
    const gardener8132 = objects.filter((o) => o['kind'] === 'EnvoyFilter' && ['reversed-vpn', 'http-connect-listener', 'proxy-protocol-vpn'].includes((o['metadata'] as { name: string }).name) && (o['metadata'] as { namespace: string }).namespace === 'istio-ingress');
    expect(gardener8132).toHaveLength(3);
    for (const f of gardener8132) await deleteObject(cp.kubeConfig, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: (f['metadata'] as { name: string }).name, namespace: 'istio-ingress' });
    const written = performance.now();
    await bridge();
    const note =
      'Patches that match nothing (nothing exposed): istio-ingress port 8132: no connection manager on 0.0.0.0_8132 routes by reversed-vpn or x-gardener-destination: the combined CONNECT patches for port 8132 match nothing there.';
    for (const id of ACL_SHOOTS) {
      await eventually(`${id} notes port 8132`, async () => {
        const e = await ext(id);
        return e.status?.lastOperation?.state === 'Succeeded' && healthy(e)?.status === 'True' && healthy(e)?.message === `The ACL is stored as recorded on every path and gateway. ${note}`;
      }, REPORTED_WITHIN_MS);
    }
    console.log(`[served] port 8132 no longer routed: noted on all ${ACL_SHOOTS.length} Extensions ${Math.round(performance.now() - written)} ms after the write`);
    expect(await metric()).toEqual([]);
    const absent = (await registry.getSingleMetric('gardener_acl_served_patch_targets_absent')?.get())?.values ?? [];
    expect(absent.filter((v) => v.value > 0).map((v) => `${String(v.labels['gateway'])} ${v.value}`)).toEqual(['istio-ingress 1']);
    for (const f of gardener8132) await createObject(cp.kubeConfig, forApiServer(f));
    await bridge();
    for (const id of ACL_SHOOTS) {
      await eventually(`${id} note gone`, async () => healthy(await ext(id))?.message === 'The ACL is stored as recorded on every path and gateway.', REPORTED_WITHIN_MS);
    }
  });
});
