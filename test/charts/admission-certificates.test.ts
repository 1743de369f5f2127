// Issue 11 point 4 for the garden admission: both of gardener-operator's renders of the admission
// chart (webhook.tls.mode managed), two server replicas that keep their certificates in the
// runtime cluster and their ValidatingWebhookConfiguration in the virtual garden, each with a token
// of its own ServiceAccount there (the runtime one may not touch the configuration, the virtual
// one may not touch the Secrets). Under a steady load of Shoot writes that change the ACL: the
// two replicas racing to create everything, a rolling restart and a CA rotation, and zero failed
// admission calls; refusals of invalid ACLs prove the webhook answered.
//
// One kube-apiserver plays both the runtime cluster and the virtual garden (the virtual render's
// objects and gardener-operator's ServiceAccount kube-system/extension-admission-acl are created
// in it); the Shoot CRD is the stand-in of test/kube/crds. Changed for this machine: the server
// registers --register-url=https://127.0.0.1:<Service stand-in> instead of the runtime Service's DNS
// name, and the Garden webhook there too (no --garden-service: this API server cannot resolve a
// Service), and lifetimes are 60 s instead of 30 d.
//
// The runtime render also registers the Garden webhook (gardener-acl-garden) in the runtime
// cluster, owned by the runtime ClusterRole gardener-acl-admission-garden: the API server then
// refuses a Garden that goes straight to an enforced ACL.
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApiException } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObject, getObject, mergePatch, type ObjectRef, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { getFreePort, type ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs } from '../kube/kube-test-helpers.js';
import { gardenerCrdFile } from '../support/gardener-resource-manager.js';
import { ServiceStandIn } from '../support/service-stand-in.js';
import { garden, rule, write } from '../webhook/garden-writes.js';
import { CONFIG_MOUNT, canI, serviceAccountKubeconfig, startChartContainer, writeChartConfig, type RunningContainer } from './chart-processes.js';
import { ADMISSION_CHART, renderChart, type KubeObject } from './helm.js';
import { bundleOf, presented, secretValue, stopProcess } from './rollout-helpers.js';

const RUNTIME_NS = 'garden';
const VIRTUAL_SA = { name: 'extension-admission-acl', namespace: 'kube-system' };
// What pkg/operator/controller/extension/extension/admission/admission.go of gardener/gardener injects.
const runtimeInjected = { gardener: { runtimeCluster: { priorityClassName: 'gardener-garden-system-400' }, virtualCluster: { enabled: true, namespace: 'extension-admission-acl' } } };
const virtualInjected = { gardener: { virtualCluster: { enabled: true, serviceAccount: VIRTUAL_SA } } };
const caRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'gardener-acl-admission-ca', namespace: RUNTIME_NS };
const tlsRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'gardener-acl-admission-tls', namespace: RUNTIME_NS };
const vwcRef: ObjectRef = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', name: 'gardener-acl' };
const shootRef: ObjectRef = { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', name: 'load', namespace: 'garden-p' };
const shootWith = (cidr: string) => ({ spec: { extensions: [{ type: 'acl', providerConfig: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [cidr] } } }] } });

interface Replica {
  readonly name: string;
  readonly port: number;
  readonly process: RunningContainer;
}

describe('garden admission keeps its certificates and registration (gardener-operator renders; real kube-apiserver)', () => {
  let cp: ControlPlane;
  let dir: string;
  let runtime: KubeObject[];
  let configFile: string;
  let runtimeKubeconfig: string;
  let gardenKubeconfig: string;
  const service = new ServiceStandIn();
  const replicas: Replica[] = [];
  const output = () => replicas.map((r) => `--- ${r.name}\n${r.process.output().slice(-2500)}`).join("\n");
  let count = 0;

  const startReplica = async (): Promise<Replica> => {
    const name = `admission-${count++}`;
    const port = await getFreePort();
    const certDir = path.join(dir, name); // the chart's emptyDir
    const process = await startChartContainer(
      runtime,
      'webhook',
      runtimeKubeconfig,
      (arg) =>
        arg.startsWith('--garden-service=')
          ? []
          : arg
          .replace(`${CONFIG_MOUNT}/config.yaml`, configFile)
          .replace('/etc/gardener-acl/webhook-tls', certDir)
          .replace(/^--port=\d+$/, `--port=${port}`)
          .replace(/^--register-url=.*$/, `--register-url=https://127.0.0.1:${service.port}`)
          .replace(/^--(ca|cert)-validity=.*$/, '--$1-validity=60s'),
      RUNTIME_NS,
      { GARDEN_KUBECONFIG: gardenKubeconfig },
    );
    const replica = { name, port, process };
    replicas.push(replica);
    service.add(name, port, process.probePort);
    return replica;
  };
  const ready = (r: Replica) =>
    eventually(`${r.name} ready behind the Service`, () => service.ready(r.name), 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
  const stopReplica = async (r: Replica) => {
    await stopProcess(r.process);
    service.remove(r.name);
    replicas.splice(replicas.indexOf(r), 1);
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-admission-certs-'));
    cp = await startWithCRDs([RUNTIME_NS, 'garden-p', 'extension-admission-acl']);
    await cp.installCRDs([gardenerCrdFile('operator.gardener.cloud_gardens.yaml')]);
    runtime = await renderChart(ADMISSION_CHART, runtimeInjected, RUNTIME_NS);
    const virtual = await renderChart(ADMISSION_CHART, virtualInjected, 'extension-admission-acl');
    for (const obj of [...runtime, ...virtual]) await createObject(cp.kubeConfig, obj as unknown as ObjectToWrite);
    await createObject(cp.kubeConfig, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: VIRTUAL_SA });
    configFile = await writeChartConfig(runtime, dir);
    runtimeKubeconfig = await serviceAccountKubeconfig(cp, RUNTIME_NS, dir, 'gardener-acl-admission');
    gardenKubeconfig = await serviceAccountKubeconfig(cp, VIRTUAL_SA.namespace, dir, VIRTUAL_SA.name);
    await createObject(cp.kubeConfig, { apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', metadata: { name: 'load', namespace: 'garden-p' }, ...shootWith('192.0.2.0/24') });
    await service.start();
  }, 120_000);

  afterAll(async () => {
    for (const r of replicas) r.process.child.kill('SIGKILL');
    await service.stop();
    await cp?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('each ServiceAccount may do its part only', async () => {
    const runtimeUser = `system:serviceaccount:${RUNTIME_NS}:gardener-acl-admission`;
    const virtualUser = `system:serviceaccount:${VIRTUAL_SA.namespace}:${VIRTUAL_SA.name}`;
    const vwc = { group: 'admissionregistration.k8s.io', resource: 'validatingwebhookconfigurations', name: 'gardener-acl' };
    const secret = { group: '', resource: 'secrets', namespace: RUNTIME_NS, name: 'gardener-acl-admission-ca' };
    expect(await canI(cp, runtimeUser, RUNTIME_NS, { ...secret, verb: 'patch' })).toBe(true);
    expect(await canI(cp, runtimeUser, RUNTIME_NS, { ...vwc, verb: 'patch' })).toBe(false);
    expect(await canI(cp, runtimeUser, RUNTIME_NS, { ...secret, name: 'another', verb: 'get' })).toBe(false);
    expect(await canI(cp, virtualUser, VIRTUAL_SA.namespace, { ...vwc, verb: 'patch' })).toBe(true);
    expect(await canI(cp, virtualUser, VIRTUAL_SA.namespace, { ...vwc, name: 'another', verb: 'patch' })).toBe(false);
    expect(await canI(cp, virtualUser, VIRTUAL_SA.namespace, { ...secret, verb: 'get' })).toBe(false);
    // The Garden webhook's registration is the runtime side's (Gardens live there), and only that one.
    expect(await canI(cp, runtimeUser, RUNTIME_NS, { ...vwc, name: 'gardener-acl-garden', verb: 'patch' })).toBe(true);
    expect(await canI(cp, virtualUser, VIRTUAL_SA.namespace, { ...vwc, name: 'gardener-acl-garden', verb: 'patch' })).toBe(false);
  });

  it('two replicas racing to create, a rolling restart and a CA rotation: zero failed admission calls', async () => {
    // Both start at once and race to create the CA, the serving certificate and the registration.
    const [a, b] = [await startReplica(), await startReplica()];
    await Promise.all([ready(a!), ready(b!)]);
    const vwc = await getObject(cp.kubeConfig, vwcRef);
    const owner = await getObject(cp.kubeConfig, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl-admission' });
    expect((vwc?.['metadata'] as { ownerReferences?: { uid: string }[] }).ownerReferences?.[0]?.uid).toBe((owner?.['metadata'] as { uid: string }).uid);
    const firstCa = secretValue(await getObject(cp.kubeConfig, caRef), 'ca.crt');
    expect(bundleOf(vwc)).toEqual([firstCa.trim()]);

    const failures: string[] = [];
    let admitted = 0;
    let refused = 0;
    let stop = false;
    const writer = (async () => {
      for (let i = 0; !stop; i++) {
        const invalid = i % 10 === 9;
        try {
          await mergePatch(cp.kubeConfig, shootRef, shootWith(invalid ? '10.0.0.300/8' : `10.${i % 250}.0.0/16`));
          if (invalid) failures.push('an invalid ACL was admitted');
          else admitted++;
        } catch (error) {
          const message = error instanceof ApiException ? String((error.body as { message?: string }).message ?? error.body) : (error as Error).message;
          if (invalid && message.includes('admission webhook "shoots.acl.gardener.cloud" denied the request')) refused++;
          else failures.push(message.slice(0, 300));
        }
      }
    })();

    await sleep(2_000);
    for (const old of [...replicas]) {
      await ready(await startReplica());
      await stopReplica(old);
    }

    await eventually('the CA rotated (two CAs trusted)', async () => bundleOf(await getObject(cp.kubeConfig, vwcRef)).length === 2, 90_000);
    const newCa = secretValue(await getObject(cp.kubeConfig, caRef), 'ca.crt');
    expect(newCa).not.toBe(firstCa);
    await eventually('every replica presents the stored certificate from the new CA', async () => {
      const serving = secretValue(await getObject(cp.kubeConfig, tlsRef), 'tls.crt');
      if (!new X509Certificate(serving).verify(new X509Certificate(newCa).publicKey)) return false;
      const shown = await Promise.all(replicas.map((r) => presented(r.port)));
      return shown.every((pem) => new X509Certificate(pem).fingerprint256 === new X509Certificate(serving).fingerprint256);
    }, 60_000);
    await eventually('the old CA left the bundle', async () => bundleOf(await getObject(cp.kubeConfig, vwcRef)).length === 1, 60_000);
    await sleep(2_000);

    stop = true;
    await writer;
    expect(failures, output()).toEqual([]);
    expect(service.refused).toBe(0);
    expect(admitted).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(10);
    console.log(`admission rollout: ${admitted} ACL changes admitted, ${refused} invalid ones refused by the webhook, ${failures.length} failed`);
  }, 300_000);

  it('the runtime render registers the Garden webhook in the runtime cluster, owned there: a Garden straight to an enforced ACL is refused, audit first is admitted', async () => {
    // Replicas may be none if the test above failed early; one is enough here.
    if (replicas.length === 0) await ready(await startReplica());
    const gardenVwcRef: ObjectRef = { ...vwcRef, name: 'gardener-acl-garden' };
    await eventually('gardener-acl-garden registered', async () => (await getObject(cp.kubeConfig, gardenVwcRef)) !== undefined, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
    const registered = await getObject(cp.kubeConfig, gardenVwcRef);
    const owner = await getObject(cp.kubeConfig, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl-admission-garden' });
    expect((registered?.['metadata'] as { ownerReferences?: { name: string; uid: string }[] }).ownerReferences).toEqual([
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl-admission-garden', uid: (owner?.['metadata'] as { uid: string }).uid },
    ]);
    expect(bundleOf(registered)).toEqual(bundleOf(await getObject(cp.kubeConfig, vwcRef)));
    const straight = await write(cp, 'POST', garden('straight-to-enforce', rule(['203.0.113.0/24'])));
    expect(straight.status).toBe(422);
    expect(straight.message).toContain('admission webhook "gardens.acl.gardener.cloud" denied the request: spec.extensions[0].providerConfig.rule: admits fewer clients than the rule in force (none: everyone)');
    expect(await write(cp, 'POST', garden('audit-first', rule(['203.0.113.0/24'], 'audit')))).toEqual({ status: 200, message: '' });
    expect(await write(cp, 'PUT', garden('audit-first', rule(['203.0.113.0/24'])))).toEqual({ status: 200, message: '' });
  }, 120_000);
});
