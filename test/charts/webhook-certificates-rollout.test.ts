// Issue 11 point 4 and the rollout acceptance, on the real kube-apiserver calling the seed webhook
// over TLS under a steady write load: the chart's default (webhook.tls.mode managed) with the
// controller keeping the certificates, re-rendering and re-applying the chart, a controller
// restart, a second webhook replica, a rolling restart of the webhook, a CA rotation, the loss of
// the CA Secret, the webhook disabled and enabled again (webhook.enabled), and the uninstall (the
// real garbage collector deletes the registration with the installation's ClusterRole). Every
// write must be admitted, and every admitted legacy filter must carry the shoot's RBAC filter
// (proof that the webhook, not a bypass, answered): a created one the filter that refuses everyone
// until the controller's update (a create reveals no range), an updated one the shoot's ACL.
//
// Processes run with the chart's args and a token of their own ServiceAccount. Changed for this
// machine, and only this: the API server cannot resolve a Service, so the controller is told
// --webhook-url=https://127.0.0.1:<stand-in port> instead of --webhook-service (the certificate then
// names 127.0.0.1); lifetimes are 150 s instead of 30 d so a rotation happens within the test (not
// shorter: a CA rotates at 78 % of its lifetime and the serving certificate follows after the 10 s
// bundle settle, so 60 s left 3 s for the Secret volume and the replicas' reload, which a loaded CI
// machine overran: the old CA expired under the API server's calls); and
// test/support/service-stand-in.ts plays kube-proxy/endpoints and the kubelet's Secret volume.
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObject, deleteObject, getObject, mergePatch, serverSideApply, type ObjectRef, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import { gardenerLegacyProxyEnvoyFilter } from '../envoy/gardener-shapes.js';
import { getFreePort, installCRDs, type ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs } from '../kube/kube-test-helpers.js';
import { gardenerVpaCrdFile } from '../support/gardener-resource-manager.js';
import { startGarbageCollector } from '../support/kube-garbage-collector.js';
import { SecretVolumeStandIn, ServiceStandIn } from '../support/service-stand-in.js';
import { CONFIG_MOUNT, canI, serviceAccountKubeconfig, startChartContainer, writeChartConfig, type RunningContainer } from './chart-processes.js';
import { SEED_CHART, helm, renderChart, type KubeObject } from './helm.js';
import { bundleOf, presented, secretValue, stopProcess } from './rollout-helpers.js';

const NAMESPACE = 'garden';
const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const B: ShootFixture = { project: 'p', name: 'b', providerConfig: allowRule('198.51.100.0/24') };
const caRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'gardener-acl-webhook-ca', namespace: NAMESPACE };
const tlsRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'gardener-acl-webhook-tls', namespace: NAMESPACE };
const mwcRef: ObjectRef = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', name: 'gardener-acl' };
const LIFETIME = '150s';

const rv = (o: Record<string, unknown> | undefined) => (o?.['metadata'] as { resourceVersion?: string } | undefined)?.resourceVersion;
interface Replica {
  readonly name: string;
  readonly port: number;
  readonly process: RunningContainer;
  readonly volume: SecretVolumeStandIn;
}

describe('seed webhook certificates and rollout under a steady write load (real kube-apiserver, chart defaults)', () => {
  let cp: ControlPlane;
  let dir: string;
  let objects: KubeObject[];
  let configFile: string;
  let controllerKubeconfig: string;
  let webhookKubeconfig: string;
  const service = new ServiceStandIn();
  let controller: RunningContainer | undefined;
  const replicas: Replica[] = [];
  const output = () => [controller?.output() ?? '', ...replicas.map((r) => r.process.output())].join('\n').slice(-4000);

  const startController = async (chart: readonly KubeObject[] = objects) => {
    controller = await startChartContainer(chart, 'controller', controllerKubeconfig, (arg) =>
      arg
        .replace(`${CONFIG_MOUNT}/config.yaml`, configFile)
        .replace(/^--webhook-service=.*$/, `--webhook-url=https://127.0.0.1:${service.port}`)
        .replace(/^--webhook-(ca|cert)-validity=.*$/, `--webhook-$1-validity=${LIFETIME}`),
    );
  };
  let replicaCount = 0;
  const startReplica = async (): Promise<Replica> => {
    const name = `webhook-${replicaCount++}`;
    const port = await getFreePort();
    const volume = new SecretVolumeStandIn(cp.kubeConfig, { namespace: NAMESPACE, name: tlsRef.name }, path.join(dir, name));
    await volume.start();
    const process = await startChartContainer(objects, 'webhook', webhookKubeconfig, (arg) =>
      arg.replace(`${CONFIG_MOUNT}/config.yaml`, configFile).replace('/etc/gardener-acl/webhook-tls', volume.dir).replace(/^--port=\d+$/, `--port=${port}`),
    );
    const replica = { name, port, process, volume };
    replicas.push(replica);
    service.add(name, port, process.probePort);
    await eventually(`${name} ready behind the Service`, () => service.ready(name), 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
    return replica;
  };
  const stopReplica = async (replica: Replica) => {
    await stopProcess(replica.process); // drains: unready at once, serves --shutdown-delay longer
    service.remove(replica.name);
    replica.volume.stop();
    replicas.splice(replicas.indexOf(replica), 1);
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-webhook-rollout-'));
    cp = await startWithCRDs([NAMESPACE]);
    await installCRDs(cp.kubeConfig, [gardenerVpaCrdFile()]);
    objects = await renderChart(SEED_CHART, { controller: { combinedMinInterval: '0s' } }, NAMESPACE);
    for (const obj of objects) await createObject(cp.kubeConfig, obj as unknown as ObjectToWrite);
    configFile = await writeChartConfig(objects, dir);
    controllerKubeconfig = await serviceAccountKubeconfig(cp, NAMESPACE, dir, 'gardener-acl');
    webhookKubeconfig = await serviceAccountKubeconfig(cp, NAMESPACE, dir, 'gardener-acl-webhook');
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A, B]);
    await service.start();
  }, 120_000);

  afterAll(async () => {
    for (const r of replicas) {
      r.process.child.kill('SIGKILL');
      r.volume.stop();
    }
    controller?.child.kill('SIGKILL');
    await service.stop();
    await cp?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('managed mode grants the controller its own configuration and Secrets only (the real authorizer)', async () => {
    const user = `system:serviceaccount:${NAMESPACE}:gardener-acl`;
    const can = (attributes: Record<string, string>) => canI(cp, user, NAMESPACE, attributes);
    const mwc = { group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations' };
    const secret = { group: '', resource: 'secrets', namespace: NAMESPACE };
    const denied: Record<string, string>[] = [
      { ...mwc, verb: 'patch', name: 'istio-sidecar-injector' },
      { ...mwc, verb: 'get', name: 'istio-sidecar-injector' },
      { ...mwc, verb: 'delete', name: 'gardener-acl' },
      { ...mwc, verb: 'list' },
      { ...secret, verb: 'get', name: 'gardener-acl-admission-tls' },
      { ...secret, verb: 'patch', name: 'some-other-secret' },
      { ...secret, verb: 'list' },
      { group: '', resource: 'secrets', namespace: 'kube-system', verb: 'get', name: 'gardener-acl-webhook-ca' },
      { group: 'admissionregistration.k8s.io', resource: 'validatingwebhookconfigurations', verb: 'patch', name: 'gardener-acl' },
    ];
    for (const attributes of denied) expect(await can(attributes), JSON.stringify(attributes)).toBe(false);
    const allowed: Record<string, string>[] = [
      { ...mwc, verb: 'patch', name: 'gardener-acl' },
      { ...mwc, verb: 'create' },
      { ...secret, verb: 'get', name: 'gardener-acl-webhook-ca' },
      { ...secret, verb: 'patch', name: 'gardener-acl-webhook-tls' },
    ];
    for (const attributes of allowed) expect(await can(attributes), JSON.stringify(attributes)).toBe(true);
  });

  it('re-render, controller restart, a second replica, a rolling restart, a CA rotation, a lost CA Secret, the webhook disabled and enabled again, uninstalled: zero failed admission calls', async () => {
    await startController();
    // Install order: the certificates first (the webhook Pods mount the serving Secret), the
    // fail-closed registration only once a webhook replica answers, so no write is refused meanwhile.
    await eventually('the controller stored the certificates', async () => (await getObject(cp.kubeConfig, tlsRef)) !== undefined, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
    await sleep(3_000);
    expect(await getObject(cp.kubeConfig, mwcRef), 'registered before any webhook replica answers').toBeUndefined();
    const firstCa = await getObject(cp.kubeConfig, caRef);
    const firstCaCert = secretValue(firstCa, 'ca.crt');
    const first = await startReplica();
    await eventually('the controller registered the webhook once a replica answers', async () => (await getObject(cp.kubeConfig, mwcRef)) !== undefined, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
    // Connections refused so far were the controller's own probes of the empty Service; from here on
    // only the API server calls it.
    const refusedBeforeRegistration = service.refused;

    // Steady load: Gardener's legacy filter of shoot a created (the webhook must add its
    // refuse-everyone RBAC filter) and deleted again, and shoot b's updated (the webhook must add
    // b's ACL), back to back, by two writers.
    const failures: string[] = [];
    let admitted = 0;
    let stop = false;
    /** Whether the webhook is registered: only then must a write come back with the RBAC filter. */
    let registered = true;
    const legacyA = gardenerLegacyProxyEnvoyFilter({ technicalID: technicalID(A), apiserverIP: '240.0.0.10' }) as unknown as ObjectToWrite;
    const legacyB = gardenerLegacyProxyEnvoyFilter({ technicalID: technicalID(B), apiserverIP: '240.0.0.11' }) as unknown as ObjectToWrite;
    const refA: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: technicalID(A), namespace: DEFAULT_GW.namespace };
    const refB: ObjectRef = { ...refA, name: technicalID(B) };
    const sealed = '"principals":[{"any":true}]';
    // Until the webhook's caches hold shoot a's recorded ACL the filter is admitted without it; wait for that first.
    await eventually('the webhook adds shoot a’s RBAC filter', async () => {
      await deleteObject(cp.kubeConfig, refA);
      const created = await createObject(cp.kubeConfig, legacyA).catch(() => undefined);
      return JSON.stringify(created ?? {}).includes(sealed);
    }, 60_000);
    await deleteObject(cp.kubeConfig, refA);
    await createObject(cp.kubeConfig, legacyB);
    await eventually('shoot b’s filter carries its ACL', async () => JSON.stringify(await mergePatch(cp.kubeConfig, refB, {})).includes('198.51.100.0'), 60_000);
    const writerA = (async () => {
      while (!stop) {
        try {
          const created = await createObject(cp.kubeConfig, legacyA);
          if (registered && !JSON.stringify(created).includes(sealed)) failures.push('shoot a’s filter was admitted without its RBAC filter');
          if (JSON.stringify(created).includes('203.0.113.0')) failures.push('a create was answered with shoot a’s ranges');
          admitted++;
          await deleteObject(cp.kubeConfig, refA);
        } catch (error) {
          failures.push(`create: ${(error as Error).message.slice(0, 300)}`);
          await deleteObject(cp.kubeConfig, refA).catch(() => undefined);
        }
      }
    })();
    const writerB = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          const updated = await mergePatch(cp.kubeConfig, refB, { metadata: { annotations: { 'load.test/generation': String(i) } } });
          if (!JSON.stringify(updated).includes('198.51.100.0')) failures.push('shoot b’s filter was stored without its RBAC filter');
          admitted++;
        } catch (error) {
          failures.push(`update: ${(error as Error).message.slice(0, 300)}`);
        }
      }
    })();

    // A second replica joins.
    await startReplica();
    await sleep(2_000);

    // gardenlet re-renders and re-applies the chart: the same bytes, and nothing it applies
    // touches the certificates or the registration.
    const stored = async () => Promise.all([caRef, tlsRef, mwcRef].map(async (ref) => rv(await getObject(cp.kubeConfig, ref))));
    const beforeRerender = await stored();
    const render = async () => (await helm(['template', 'gardener-acl', SEED_CHART, '--namespace', NAMESPACE, '--set', 'controller.combinedMinInterval=0s'])).stdout;
    expect(await render()).toBe(await render());
    for (const obj of await renderChart(SEED_CHART, { controller: { combinedMinInterval: '0s' } }, NAMESPACE)) await serverSideApply(cp.kubeConfig, obj as unknown as ObjectToWrite, 'gardenlet');
    await sleep(1_000);
    expect(await stored()).toEqual(beforeRerender);

    // The controller restarts: it converges on what is stored and writes none of it again.
    if (controller) await stopProcess(controller);
    await startController();
    await eventually('the restarted controller leads', () => /became leader/.test(controller?.output() ?? ''), 60_000);
    await sleep(3_000);
    expect(await stored()).toEqual(beforeRerender);

    // Rolling restart, one surge replica at a time, as the Deployment does.
    for (const old of [...replicas]) {
      await startReplica();
      await stopReplica(old);
    }
    expect(replicas.map((r) => r.name)).not.toContain(first.name);

    // The CA reaches 80 % of its lifetime: both CAs in the bundle, then a serving certificate from
    // the new one, picked up by every replica; the old CA leaves the bundle when it expires.
    const bundle = async () => bundleOf(await getObject(cp.kubeConfig, mwcRef));
    await eventually('the CA rotated (two CAs trusted)', async () => (await bundle()).length === 2, 200_000);
    const newCaCert = secretValue(await getObject(cp.kubeConfig, caRef), 'ca.crt');
    expect(newCaCert).not.toBe(firstCaCert);
    await eventually('every replica presents a certificate from the new CA', async () => {
      const servingNow = secretValue(await getObject(cp.kubeConfig, tlsRef), 'tls.crt');
      if (!new X509Certificate(servingNow).verify(new X509Certificate(newCaCert).publicKey)) return false;
      const shown = await Promise.all(replicas.map((r) => presented(r.port)));
      return shown.every((pem) => new X509Certificate(pem).fingerprint256 === new X509Certificate(servingNow).fingerprint256);
    }, 60_000);
    await eventually('the old CA left the bundle', async () => (await bundle()).length === 1, 120_000);
    expect((await bundle())[0]?.trim()).toBe(newCaCert.trim());
    await sleep(2_000);

    // The CA Secret is lost: a new CA joins the bundle next to the one that signed the serving
    // certificate, which the replicas go on presenting until the new one reaches them.
    await deleteObject(cp.kubeConfig, caRef);
    await eventually('a new CA after the loss, presented by every replica', async () => {
      const ca = await getObject(cp.kubeConfig, caRef);
      if (!ca || secretValue(ca, 'ca.crt') === newCaCert) return false;
      const servingNow = secretValue(await getObject(cp.kubeConfig, tlsRef), 'tls.crt');
      if (!new X509Certificate(servingNow).verify(new X509Certificate(secretValue(ca, 'ca.crt')).publicKey)) return false;
      const shown = await Promise.all(replicas.map((r) => presented(r.port)));
      return shown.every((pem) => new X509Certificate(pem).fingerprint256 === new X509Certificate(servingNow).fingerprint256);
    }, 90_000);

    // Disabled (webhook.enabled false): the controller of that chart deletes the registration while
    // the replicas still serve, then they go; writes are admitted as written from then on.
    const disabled = await renderChart(SEED_CHART, { controller: { combinedMinInterval: '0s' }, webhook: { enabled: false } }, NAMESPACE);
    for (const obj of disabled.filter((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')) await serverSideApply(cp.kubeConfig, obj as unknown as ObjectToWrite, 'gardenlet');
    // From here on a write may be admitted as written (the registration goes); none may be refused.
    registered = false;
    if (controller) await stopProcess(controller);
    await startController(disabled);
    await eventually('the disabled chart’s controller deleted the registration', async () => (await getObject(cp.kubeConfig, mwcRef)) === undefined, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
    for (const replica of [...replicas]) await stopReplica(replica);
    await sleep(2_000);

    // Enabled again: the registration comes back once a replica answers, and with it the RBAC filters.
    const refusedBeforeReenable = service.refused;
    for (const obj of objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')) await serverSideApply(cp.kubeConfig, obj as unknown as ObjectToWrite, 'gardenlet');
    if (controller) await stopProcess(controller);
    await startController();
    await startReplica();
    await eventually('registered again', async () => (await getObject(cp.kubeConfig, mwcRef)) !== undefined, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
    // The controller's probes of the Service before a replica answered are not calls of the API server.
    const refusedWhileReenabling = service.refused - refusedBeforeReenable;
    // The API server takes up a new registration within a moment.
    await sleep(2_000);
    registered = true;
    await sleep(3_000);

    // Uninstalled: the resource manager deletes the chart's objects. The registration is owned by
    // the installation's ClusterRole, so Kubernetes' garbage collector deletes it with that, here
    // while the replicas still serve (their Deployment takes its terminating pods' drain longer).
    const gc = await startGarbageCollector(cp);
    // From here on a write may be admitted as written (no registration); none may be refused.
    registered = false;
    try {
      await deleteObject(cp.kubeConfig, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl' });
      await eventually('the garbage collector deleted the registration with its ClusterRole', async () => (await getObject(cp.kubeConfig, mwcRef)) === undefined, 60_000).catch(
        async (error: Error) => {
          throw new Error(`${error.message}\n${await gc.log(30)}`);
        },
      );
    } finally {
      await gc.stop();
    }
    await sleep(1_000);
    if (controller) await stopProcess(controller);
    controller = undefined;
    for (const replica of [...replicas]) await stopReplica(replica);
    for (const obj of [...objects].reverse()) {
      await deleteObject(cp.kubeConfig, { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}) });
    }
    await sleep(2_000);

    stop = true;
    await Promise.all([writerA, writerB]);
    expect(failures, output()).toEqual([]);
    expect(service.refused - refusedBeforeRegistration - refusedWhileReenabling).toBe(0);
    expect(admitted).toBeGreaterThan(100);
    console.log(`webhook rollout: ${admitted} writes admitted, ${failures.length} failed, ${service.refused} connections without a ready backend`);
  }, 720_000);
});
