// Both webhooks registered with a real kube-apiserver (url + caBundle) and exercised through it:
// every assertion reads what the API server stored or answered.
import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ApiException } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCidr } from '../../src/acl/cidr.js';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { appliedAcls } from '../../src/actuator/combined-syncer.js';
import { deploymentSchema, type Extension } from '../../src/gardener/objects.js';
import { listAll } from '../../src/kube/list-watch.js';
import { seedGatewayWorkloads } from '../../src/gardener/seed-acl.js';
import { createObject, deleteObject, getObject, mergePatch, patchStatus, serverSideApply, type ObjectRef } from '../../src/kube/objects-client.js';
import { buildCombinedConnectFilters } from '../../src/rbac/combined-connect-filters.js';
import { jsonEqual } from '../../src/rbac/deep-equal.js';
import { InformerCacheSource } from '../../src/webhook/informer-cache-source.js';
import { storedEnvoyFilterUid } from '../../src/webhook/stored-filter-uid.js';
import { webhookConfigCommand } from '../../src/cli/webhook-command.js';
import { allowRule, createSeed, DEFAULT_GW, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import { issueServingCert, type ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs, testLogger } from '../kube/kube-test-helpers.js';
import { appliedState, legacyFilter, postHttps, startTestWebhook, type TestWebhook } from './webhook-fixtures.js';

const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const OPEN: ShootFixture = { project: 'p', name: 'open' };
const GONE: ShootFixture = { project: 'p', name: 'gone', providerConfig: allowRule('192.0.2.0/24') };
const GW = DEFAULT_GW.namespace;

const extRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
const filterRef = (name: string, namespace = GW): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name, namespace });

interface StoredFilter {
  metadata: { resourceVersion: string; labels?: Record<string, string> };
  spec: { configPatches: { patch: { value: { filters?: { name: string }[] } } }[] };
}

function shoot(name: string, providerConfig: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'core.gardener.cloud/v1beta1',
    kind: 'Shoot',
    metadata: { name, namespace: 'garden-p' },
    spec: { extensions: [{ type: 'acl', providerConfig, ...extra }] },
  };
}

/** The API server's message for a refused write. */
async function refusal(write: Promise<unknown>): Promise<string> {
  try {
    await write;
  } catch (error) {
    if (error instanceof ApiException) return (error.body as { message?: string }).message ?? String(error.body);
    throw error;
  }
  throw new Error('the write was accepted');
}

const CONTROLLER_USER = 'system:serviceaccount:garden:gardener-acl';

describe('admission webhooks through a real kube-apiserver', () => {
  let cp: ControlPlane;
  let cache: InformerCacheSource;
  let hook: TestWebhook;
  const registry = new Registry();
  const stored = async (name: string) => (await getObject(cp.kubeConfig, filterRef(name))) as unknown as StoredFilter;
  const filterNames = (f: StoredFilter) => f.spec.configPatches[0]?.patch.value.filters?.map((x) => x.name);

  beforeAll(async () => {
    cp = await startWithCRDs(['garden-p']);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A, OPEN, GONE]);
    await patchStatus(cp.kubeConfig, extRef(A), { state: appliedState(['203.0.113.0/24']) });
    // GONE: applied once, now being deleted (its finalizer holds it).
    await patchStatus(cp.kubeConfig, extRef(GONE), { state: appliedState(['192.0.2.0/24']) });
    await mergePatch(cp.kubeConfig, extRef(GONE), { metadata: { finalizers: ['extensions.gardener.cloud/acl'] } });
    await deleteObject(cp.kubeConfig, extRef(GONE));
    cache = new InformerCacheSource(cp.kubeConfig, testLogger());
    await cache.start();
    await eventually('caches show the applied ACLs', () => appliedAcls(cache.extensions()).length === 1);
    hook = await startTestWebhook(cache, { registry, storedUid: storedEnvoyFilterUid(cp.kubeConfig) });
    // Registered from what `gardener-acl webhook-config` prints.
    const caFile = path.join(hook.certDir, 'ca.crt');
    await writeFile(caFile, hook.ca.cert);
    let yaml = '';
    const code = await webhookConfigCommand(['--url', hook.url, '--ca-bundle-file', caFile, '--timeout-seconds', '5', '--controller-username', CONTROLLER_USER], { stdout: (t) => (yaml += t), stderr: (t) => (yaml += t) });
    expect(code, yaml).toBe(0);
    const registrations = parseAllDocuments(yaml).map((d) => d.toJS() as { kind: string; webhooks: Record<string, unknown>[] });
    expect(registrations.map((r) => r.kind)).toEqual(['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);
    for (const r of registrations) {
      expect(r.webhooks[0]).toMatchObject({ sideEffects: 'None', admissionReviewVersions: ['v1'], failurePolicy: 'Fail', timeoutSeconds: 5 });
      await createObject(cp.kubeConfig, r as never);
    }
    // The API server picks registrations up asynchronously.
    await eventually('webhooks active', async () => {
      try {
        await createObject(cp.kubeConfig, shoot('probe', {}) as never, { dryRun: true });
        return false;
      } catch {
        return true;
      }
    }, 20_000);
  }, 120_000);

  afterAll(async () => {
    await hook?.stop();
    await cache?.stop();
    await cp?.stop();
  });

  /** The ranges the stored or answered object reveals: the ACL's, the seed's node range, the shoot's pod range (legacy path only). */
  const revealed = (json: string) => ['203.0.113.0', '198.18.0.0', '10.250.0.0', '100.96.0.0'].filter((range) => json.includes(range));

  it('a created Gardener legacy EnvoyFilter is stored with a filter that refuses everyone; the next update (the controller\'s empty patch) brings the ACL; re-applying stores an identical object', async () => {
    const id = technicalID(A);
    const original = legacyFilter(id, GW);
    await serverSideApply(cp.kubeConfig, original as never, 'gardenlet', true);
    const created = await stored(id);
    expect(filterNames(created)).toEqual(['gardener-acl-legacy-proxy', 'envoy.filters.network.tcp_proxy']);
    expect(revealed(JSON.stringify(created.spec))).toEqual([]);
    expect(JSON.stringify(created.spec.configPatches[0]?.patch.value.filters?.[0])).toContain('"principals":[{"any":true}]');

    // The controller's trigger: an update of the stored filter gets the shoot's ACL.
    await mergePatch(cp.kubeConfig, filterRef(id), {});
    const updated = await stored(id);
    expect(filterNames(updated)).toEqual(['gardener-acl-legacy-proxy', 'envoy.filters.network.tcp_proxy']);
    expect(revealed(JSON.stringify(updated.spec))).toEqual(['203.0.113.0', '10.250.0.0', '100.96.0.0']); // shoot pods: legacy path only

    // gardenlet applies its version again: the webhook puts the same RBAC filter back, nothing changes.
    await serverSideApply(cp.kubeConfig, original as never, 'gardenlet', true);
    const reapplied = await stored(id);
    expect(reapplied.metadata.resourceVersion).toBe(updated.metadata.resourceVersion);
    expect(reapplied.spec).toEqual(updated.spec);

    // An update that changes something else keeps the filter.
    await mergePatch(cp.kubeConfig, filterRef(id), { metadata: { labels: { touched: 'yes' } } });
    expect(revealed(JSON.stringify((await stored(id)).spec))).toEqual(['203.0.113.0', '10.250.0.0', '100.96.0.0']);

    // The `-apiserver-proxy` variant of the name is handled the same way.
    await createObject(cp.kubeConfig, legacyFilter(id, GW, `${id}-apiserver-proxy`) as never);
    expect(revealed(JSON.stringify((await stored(`${id}-apiserver-proxy`)).spec))).toEqual([]);
    await mergePatch(cp.kubeConfig, filterRef(`${id}-apiserver-proxy`), {});
    expect(revealed(JSON.stringify((await stored(`${id}-apiserver-proxy`)).spec))).toEqual(['203.0.113.0', '10.250.0.0', '100.96.0.0']);
  });

  it('a review sent to the webhook directly reveals no range: a create, an update naming a uid the API server does not store, a filter that is not stored at all', async () => {
    const id = technicalID(A);
    const storedUid = ((await getObject(cp.kubeConfig, filterRef(id))) as unknown as { metadata: { uid: string } }).metadata.uid;
    const review = (operation: string, name: string, oldUid?: string) =>
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: `forged-${operation}-${name}`,
          kind: { group: 'networking.istio.io', version: 'v1alpha3', kind: 'EnvoyFilter' },
          resource: { group: 'networking.istio.io', version: 'v1alpha3', resource: 'envoyfilters' },
          operation,
          name,
          namespace: GW,
          userInfo: { username: 'system:serviceaccount:kube-system:gardenlet' },
          object: { ...legacyFilter(id, GW, name), metadata: { name, namespace: GW, ...(oldUid ? { uid: oldUid } : {}) } },
          ...(oldUid ? { oldObject: { ...legacyFilter(id, GW, name), metadata: { name, namespace: GW, uid: oldUid } } } : {}),
        },
      });
    const answer = async (body: string) => {
      const reply = await postHttps(`${hook.url}/mutate-envoyfilter`, hook.ca.cert, body);
      const response = (JSON.parse(reply.body) as { response: { allowed: boolean; patch?: string } }).response;
      return { allowed: response.allowed, patch: Buffer.from(response.patch ?? '', 'base64').toString('utf8') };
    };
    for (const forged of [review('CREATE', id), review('UPDATE', id, '0b6c4f0e-made-up-uid'), review('UPDATE', 'shoot--p--a-not-stored', storedUid)]) {
      const { allowed, patch } = await answer(forged);
      expect(allowed).toBe(true);
      expect(patch).toContain('"principals":[{"any":true}]');
      expect(revealed(patch)).toEqual([]);
    }
    // The API server's own review of the stored filter (its uid) gets the ACL: what the stored object holds anyway.
    expect(revealed((await answer(review('UPDATE', id, storedUid))).patch)).toEqual(['203.0.113.0', '10.250.0.0', '100.96.0.0']);
  });

  it('a shoot- filter without a chain on the legacy port (Gardener >= 1.123, the TLS-termination socket) is not sent to the webhook; one with such a chain is', async () => {
    const calls = async () => ((await registry.getSingleMetric('controller_runtime_webhook_requests_total')?.get())?.values ?? []).filter((v) => v.labels['webhook'] === 'envoyfilter').reduce((sum, v) => sum + v.value, 0);
    const socketOnly = {
      apiVersion: 'networking.istio.io/v1alpha3',
      kind: 'EnvoyFilter',
      metadata: { name: `${technicalID(OPEN)}-apiserver-proxy`, namespace: GW },
      spec: { configPatches: [{ applyTo: 'LISTENER', match: { context: 'GATEWAY' }, patch: { operation: 'ADD', value: { name: `${technicalID(OPEN)}--kube-apiserver-socket` } } }] },
    };
    const before = await calls();
    await createObject(cp.kubeConfig, socketOnly as never);
    await mergePatch(cp.kubeConfig, filterRef(socketOnly.metadata.name), { metadata: { labels: { touched: 'yes' } } });
    expect(await calls()).toBe(before);
    expect((await stored(socketOnly.metadata.name)).spec).toEqual(socketOnly.spec);
    await createObject(cp.kubeConfig, legacyFilter(technicalID(OPEN), GW, `${technicalID(OPEN)}-legacy`) as never);
    expect(await calls()).toBe(before + 1);
  });

  it('leaves the legacy filters of a shoot without ACL, or with its Extension in deletion, as Gardener wrote them', async () => {
    for (const s of [OPEN, GONE]) {
      const original = legacyFilter(technicalID(s), GW);
      await createObject(cp.kubeConfig, original as never);
      expect((await stored(technicalID(s))).spec).toEqual(original['spec']);
    }
  });

  it('an empty merge patch (the controller’s trigger) brings a changed ACL into the legacy filter', async () => {
    const id = technicalID(A);
    await patchStatus(cp.kubeConfig, extRef(A), { state: appliedState(['198.18.0.0/15']) });
    await eventually('cache sees the new ACL', () => appliedAcls(cache.extensions())[0]?.rule.cidrs.map(formatCidr).join() === '198.18.0.0/15');
    await mergePatch(cp.kubeConfig, filterRef(id), {});
    const spec = JSON.stringify((await stored(id)).spec);
    expect(spec).toContain('198.18.0.0');
    expect(spec).not.toContain('203.0.113.0');
  });

  it('combined filters: only the controller (its authenticated user) writes their content; nobody else gets it back or can change it', async () => {
    const authoritative = buildCombinedConnectFilters({
      operator: defaultOperatorConfig(),
      gateways: seedGatewayWorkloads((await listAll(cp.kubeConfig, `/apis/apps/v1/namespaces/${DEFAULT_GW.namespace}/deployments`)).items.map((d) => deploymentSchema.parse(d))),
      shoots: appliedAcls(cache.extensions() as Extension[]),
    });
    const target = authoritative.find((f) => f.metadata.name === 'acl-connect-8132-000');
    expect(target).toBeDefined();
    // The controller writes it (the webhook configuration names its user).
    const controller = await cp.kubeConfigForUser(CONTROLLER_USER, ['system:masters']);
    await createObject(controller, target as never);
    expect(jsonEqual((await stored('acl-connect-8132-000')).spec, target!.spec)).toBe(true);

    // Anyone else: a create is refused with a message and no content, a spec change too,
    // also when claiming the controller's field manager.
    const stale = { ...target, metadata: { name: 'acl-connect-8443-000', namespace: GW }, spec: { ...target!.spec, configPatches: [] } };
    const refusedCreate = await refusal(createObject(cp.kubeConfig, stale as never));
    expect(refusedCreate).toContain('EnvoyFilter istio-ingress/acl-connect-8443-000: names starting "acl-connect-" are reserved for gardener-acl\'s combined CONNECT filters');
    expect(refusedCreate).not.toContain('203.0.113');
    expect(await refusal(mergePatch(cp.kubeConfig, filterRef('acl-connect-8132-000'), { spec: { configPatches: [] } }))).toContain('other users may change their metadata only');
    expect(await refusal(mergePatch(cp.kubeConfig, filterRef('acl-connect-8132-000'), { spec: { configPatches: [] } }, { fieldManager: 'gardener-acl' }))).toContain('other users may change their metadata only');
    expect(jsonEqual((await stored('acl-connect-8132-000')).spec, target!.spec)).toBe(true);

    // Metadata-only updates pass (a finalizer or a label).
    await mergePatch(cp.kubeConfig, filterRef('acl-connect-8132-000'), { metadata: { labels: { 'example.com/audited': 'yes' } } });
    expect((await stored('acl-connect-8132-000')).metadata.labels).toMatchObject({ 'example.com/audited': 'yes' });
  });

  it('picks up a rotated serving certificate without restart while requests through the API server keep succeeding', async () => {
    const before = await postHttps(`${hook.url}/validate-shoot`, hook.ca.cert, '{}');
    const rotated = await issueServingCert(hook.ca, { commonName: 'rotated', ips: ['127.0.0.1'] });
    const rotatedSerial = new X509Certificate(rotated.cert).serialNumber;
    expect(before.peerCertificateSerial).not.toBe(rotatedSerial);

    let stop = false;
    let writes = 0;
    const load = (async () => {
      while (!stop) {
        await mergePatch(cp.kubeConfig, filterRef(technicalID(A)), {});
        await createObject(cp.kubeConfig, shoot(`load-${writes}`, allowRule('203.0.113.0/24')) as never, { dryRun: true });
        writes++;
      }
    })();
    await hook.rotate(rotated);
    await eventually('new certificate served', async () => (await postHttps(`${hook.url}/validate-shoot`, hook.ca.cert, '{}')).peerCertificateSerial === rotatedSerial, 5_000);
    // A few more rounds on fresh connections after the swap.
    const after = writes;
    await eventually('requests after rotation', () => writes >= after + 3, 10_000);
    stop = true;
    await load; // rejects if any write failed
    expect(filterNames(await stored(technicalID(A)))).toEqual(['gardener-acl-legacy-proxy', 'envoy.filters.network.tcp_proxy']);
  });
});
