// The served check's bookkeeping over passes, with a gateway of two pods read in turn: a fault is
// reported once it is seen on two reads, and then stays as reported (pod included) while the
// other pod shows it, so nothing the status is built from changes from pass to pass. The pods are
// real pod objects in a real kube-apiserver (listed by the gateway's selector); their Envoy is one
// real Envoy fed by Istio (a Gardener 1.145 seed whose 8443 connection manager a Gardener filter
// renames, and whose 8132 filters are gone), read directly at its admin port for both pods: the
// stand-in for two pods that take the same config from istiod.
import { CoreV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedModelFromObjects } from '../../src/render/seed-render.js';
import { SERVED_CHECK_READS } from '../../src/served/gateway-admin.js';
import { ServedChecker } from '../../src/served/served-checker.js';
import type { JsonObject } from '../envoy/json.js';
import { ERAS } from '../istio/eras.js';
import { generateForSeed, istioInputObjects } from '../istio/istio-rendered-seed.js';
import { startLiveAdsGateway, type LiveAdsGateway } from '../istio/live-ads-gateway.js';
import { gardenerSeedObjects, gatewayLabels, ingressGateway } from '../istio/seed-fixture.js';
import { startControlPlane, type ControlPlane } from '../kube/control-plane.js';
import { testLogger } from '../kube/kube-test-helpers.js';
import { startKubeletStandin, type KubeletStandin } from '../kube/kubelet-standin.js';

const era = ERAS['v1.145'];
const GATEWAY = ingressGateway('default').namespace;
const LABELS = gatewayLabels(era, ingressGateway('default'));
const PODS = ['istio-ingressgateway-5f7b-a1', 'istio-ingressgateway-5f7b-b2'];
const ACL_SHOOTS = ['shoot--bar--a', 'shoot--p--foo', 'shoot--xshoot-q--foo', 'shoot-q--foo'];

const isGardener8132 = (o: JsonObject): boolean =>
  o['kind'] === 'EnvoyFilter' && ['reversed-vpn', 'http-connect-listener', 'proxy-protocol-vpn'].includes((o['metadata'] as { name: string }).name) && (o['metadata'] as { namespace: string }).namespace === GATEWAY;

const renamer: JsonObject = {
  apiVersion: 'networking.istio.io/v1alpha3',
  kind: 'EnvoyFilter',
  metadata: { name: 'http-proxy-hcm-name', namespace: GATEWAY },
  spec: {
    workloadSelector: { labels: LABELS },
    configPatches: [
      {
        applyTo: 'NETWORK_FILTER',
        match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: 'envoy.filters.network.http_connection_manager' } } } },
        patch: { operation: 'MERGE', value: { name: 'envoy.http_connection_manager' } },
      },
    ],
  },
};

describe('the served check over passes, a gateway of two pods read in turn', () => {
  let cp: ControlPlane;
  let standin: KubeletStandin;
  let gateway: LiveAdsGateway;
  const objects = gardenerSeedObjects(era).filter((o) => !isGardener8132(o));

  beforeAll(async () => {
    cp = await startControlPlane();
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: GATEWAY } } });
    standin = await startKubeletStandin(cp.kubeConfig, PODS.map((name) => ({ namespace: GATEWAY, name, labels: LABELS, ports: new Map() })));
    gateway = await startLiveAdsGateway({ objects: [...istioInputObjects(objects, generateForSeed(objects)), renamer], proxy: { namespace: GATEWAY, labels: LABELS } });
  }, 180_000);
  afterAll(async () => {
    await gateway?.stop();
    await standin?.stop();
    await cp?.stop();
  });

  it('reports each fault once, confirmed on the second read, and keeps it (and the pod it names) while the pods alternate: no change after that', { timeout: 120_000 }, async () => {
    const model = seedModelFromObjects(objects.map((object, i) => ({ object, source: `#${i}` })));
    const read: string[] = [];
    const changes: { shoots: string[]; everyShoot: boolean }[] = [];
    const checker = new ServedChecker({
      kubeConfig: cp.kubeConfig,
      seed: () => model.seed,
      intervalMs: 60_000,
      logger: testLogger(),
      registry: new Registry(),
      onChange: (shoots, everyShoot) => changes.push({ shoots: [...shoots].sort(), everyShoot }),
      readDump: async (pod) => {
        read.push(pod.name);
        const configs: unknown[] = [];
        for (const path of SERVED_CHECK_READS) configs.push(...((await (await fetch(`${gateway.envoy.adminUrl}${path}`)).json()) as { configs: unknown[] }).configs);
        return { configs };
      },
    });
    for (let pass = 0; pass < 5; pass++) await checker.checkOnce();
    // The default gateway's two pods in turn; the other gateways have none (unchecked throughout).
    expect(read).toEqual([PODS[0], PODS[1], PODS[0], PODS[1], PODS[0]]);
    // Pass 1 names the unchecked gateways (every shoot's status says so) and sees the faults; pass 2
    // (the other pod) confirms them and the gateway-wide absent port; then nothing changes.
    expect(changes).toEqual([
      { shoots: [], everyShoot: true },
      { shoots: ACL_SHOOTS, everyShoot: true },
    ]);
    for (const id of ACL_SHOOTS) expect(checker.faultsOf(id).map((f) => `${f.severity} ${f.path} ${f.pod} ${f.where}`)).toEqual([`exposed connect ${PODS[1]} 0.0.0.0_8443`]);
    expect(checker.absentFor('shoot--p--foo').map((f) => `${f.gateway} ${f.where}`)).toEqual([`${GATEWAY} port 8132`]);
    expect(checker.uncheckedReason()).toBe('istio-ingress--z1: no running and ready gateway pod; istio-ingress-handler-internet: no running and ready gateway pod');
  });
});
