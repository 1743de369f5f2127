// Reading a gateway pod's Envoy config dump the way the controller does (src/served/gateway-admin.ts):
// a port-forward of a real kube-apiserver to the pod's admin port 15000. The pod is a real Envoy
// fed by Istio (the live ADS gateway of a Gardener 1.145 seed, chart defaults); the hop from node
// to container is the kubelet stand-in (test/kube/kubelet-standin.ts: the kubelet's own
// port-forward server, forwarding to Envoy's loopback admin address), because no kubelet runs here.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedModelFromObjects } from '../../src/render/seed-render.js';
import { ReadBudgetExceeded, readGatewayConfigDump } from '../../src/served/gateway-admin.js';
import { servedGateway } from '../../src/served/served-config.js';
import { checkServedProtection } from '../../src/served/served-protection.js';
import { ERAS } from '../istio/eras.js';
import { generateForSeed, istioInputObjects } from '../istio/istio-rendered-seed.js';
import { startLiveAdsGateway, type LiveAdsGateway } from '../istio/live-ads-gateway.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway } from '../istio/seed-fixture.js';
import { startControlPlane, type ControlPlane } from '../kube/control-plane.js';
import { startKubeletStandin, type KubeletStandin } from '../kube/kubelet-standin.js';

const era = ERAS['v1.145'];
const GATEWAY = ingressGateway('default').namespace;
const LABELS = gatewayLabels(era, ingressGateway('default'));
const POD = { namespace: GATEWAY, name: 'istio-ingressgateway-7d9c-x2' };
const NO_ADMIN = { namespace: GATEWAY, name: 'istio-ingressgateway-7d9c-y3' };

describe('a gateway pod\'s config dump through the API server\'s port-forward (kubelet stand-in for the last hop)', () => {
  let cp: ControlPlane;
  let gateway: LiveAdsGateway;
  let standin: KubeletStandin;
  const objects = gardenerSeedObjects(era);

  beforeAll(async () => {
    cp = await startControlPlane();
    gateway = await startLiveAdsGateway({ objects: istioInputObjects(objects, generateForSeed(objects)), proxy: { namespace: GATEWAY, labels: LABELS } });
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: GATEWAY } } });
    const admin = new URL(gateway.envoy.adminUrl).host;
    standin = await startKubeletStandin(cp.kubeConfig, [
      { ...POD, labels: LABELS, ports: new Map([[15000, admin]]) },
      { ...NO_ADMIN, labels: LABELS, ports: new Map() },
    ]);
  }, 180_000);
  afterAll(async () => {
    await standin?.stop();
    await gateway?.stop();
    await cp?.stop();
  });

  it('is the same dump the admin port gives directly, and the served check finds every ACL shoot served', { timeout: 60_000 }, async () => {
    const dump = await readGatewayConfigDump(cp.kubeConfig, POD, AbortSignal.timeout(30_000));
    const direct = await gateway.configDump();
    const served = servedGateway(dump);
    expect(served.listeners.map((l) => l.name).sort()).toEqual(servedGateway(direct).listeners.map((l) => l.name).sort());
    expect(served.ecds.size).toBe(48);
    const model = seedModelFromObjects(objects.map((object, i) => ({ object, source: `#${i}` })));
    const report = checkServedProtection(model.seed!, GATEWAY, served);
    expect(report).toEqual({ gateway: GATEWAY, shoots: 4, findings: [] });
  });

  it('three reads in a row each get a whole dump (one forwarded connection per read, closed after it)', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 3; i++) expect(servedGateway(await readGatewayConfigDump(cp.kubeConfig, POD, AbortSignal.timeout(30_000))).listeners.length).toBeGreaterThan(0);
  });

  it('a read larger than the budget is aborted before it is held, with the size named (the controller reports the gateway unchecked)', { timeout: 60_000 }, async () => {
    const error = await readGatewayConfigDump(cp.kubeConfig, POD, AbortSignal.timeout(30_000), 64 * 1024).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReadBudgetExceeded);
    expect(String(error)).toBe('Error: /config_dump?resource=dynamic_listeners on istio-ingress/istio-ingressgateway-7d9c-x2:15000 is larger than the read budget of 65536 bytes');
  });

  it('a pod whose port cannot be reached: the read fails with the pod and port named, within its deadline', { timeout: 60_000 }, async () => {
    const error = await readGatewayConfigDump(cp.kubeConfig, NO_ADMIN, AbortSignal.timeout(20_000)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    // The kubelet's message (here the stand-in's reason) comes through the error channel.
    expect(String(error)).toMatch(/^Error: port-forward to istio-ingress\/istio-ingressgateway-7d9c-y3:15000: error forwarding port 15000 to pod istio-ingressgateway-7d9c-y3, uid : .* \(socket hang up\)$/);
  });

  it('a client without pods/portforward is refused by the API server (the controller needs that permission)', { timeout: 60_000 }, async () => {
    const user = await cp.kubeConfigForUser('no-portforward');
    const error = await readGatewayConfigDump(user, POD, AbortSignal.timeout(20_000)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).toBe('Error: port-forward to istio-ingress/istio-ingressgateway-7d9c-x2:15000: Unexpected server response: 403');
  });
});
