// Webhook certificates managed in-process (issue 11 point 4), against a real kube-apiserver that
// stores the Secrets and the MutatingWebhookConfiguration. The clock is injected so that renewal
// and the end of the previous CA's grace period can be reached.
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObject, deleteObject, getObject, mergePatch, type ObjectRef } from '../../src/kube/objects-client.js';
import { serviceHasReadyEndpoint } from '../../src/webhook/webhook-backend.js';
import { DEFAULT_SYNC_PERIOD_MS, WebhookCertificateManager, type CertificateManagerOptions } from '../../src/webhook/certificate-manager.js';
import { mutatingWebhookConfiguration } from '../../src/webhook/webhook-configuration.js';
import type { KeyPair } from '../../src/webhook/serving-certs.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { startWithCRDs, testLogger } from '../kube/kube-test-helpers.js';

const NS = 'garden';
const DAY = 24 * 3_600_000;
const caRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'gardener-acl-webhook-ca', namespace: NS };
const tlsRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: 'gardener-acl-webhook-tls', namespace: NS };
const mwcRef: ObjectRef = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', name: 'gardener-acl' };
const ownerRef: ObjectRef = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl' };

const certsIn = (bundle: string) => bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
const decoded = (obj: Record<string, unknown> | undefined, key: string) => Buffer.from(((obj?.['data'] as Record<string, string> | undefined) ?? {})[key] ?? '', 'base64').toString('utf8');

describe('webhook certificate manager (real kube-apiserver)', () => {
  let cp: ControlPlane;
  let clock = Date.now();
  const served: KeyPair[] = [];
  const options = (): CertificateManagerOptions => ({
    target: cp.kubeConfig,
    namespace: NS,
    caSecretName: caRef.name,
    servingSecretName: tlsRef.name,
    dnsNames: ['gardener-acl', 'gardener-acl.garden', 'gardener-acl.garden.svc'],
    ips: [],
    caValidityMs: 10 * DAY,
    servingValidityMs: 10 * DAY,
    previousCaGraceMs: DAY,
    configurations: [
      {
        target: cp.kubeConfig,
        owner: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl' },
        build: (caBundlePem) => mutatingWebhookConfiguration({ target: { service: { name: 'gardener-acl', namespace: NS, port: 443 } }, caBundlePem, controllerUsername: 'system:serviceaccount:garden:gardener-acl' }),
      },
    ],
    logger: testLogger(),
    now: () => clock,
    onServing: (pair) => void served.push(pair),
  });
  const stored = async () => {
    const [ca, tls, mwc] = await Promise.all([getObject(cp.kubeConfig, caRef), getObject(cp.kubeConfig, tlsRef), getObject(cp.kubeConfig, mwcRef)]);
    const webhooks = (mwc?.['webhooks'] ?? []) as { clientConfig: { caBundle: string } }[];
    return {
      ca,
      tls,
      mwc,
      bundle: Buffer.from(webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8'),
      rv: (o: Record<string, unknown> | undefined) => Number((o?.['metadata'] as { resourceVersion: string }).resourceVersion),
    };
  };
  /** The stored serving certificate is trusted by some CA of the stored bundle. */
  const servingTrusted = (s: Awaited<ReturnType<typeof stored>>) => {
    const serving = new X509Certificate(decoded(s.tls, 'tls.crt'));
    return certsIn(s.bundle).some((pem) => serving.verify(new X509Certificate(pem).publicKey));
  };

  beforeAll(async () => {
    cp = await startWithCRDs([NS]);
    await createObject(cp.kubeConfig, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'gardener-acl' }, rules: [] });
  }, 120_000);
  afterAll(async () => {
    await cp?.stop();
  });

  it('creates the CA, the configuration with its caBundle (owned by the ClusterRole), then the serving certificate; a second pass writes nothing', async () => {
    const manager = new WebhookCertificateManager(options());
    expect((await manager.sync()).writes).toBe(3);
    const s = await stored();
    expect(certsIn(s.bundle)).toEqual([decoded(s.ca, 'ca.crt').trim()]);
    expect(servingTrusted(s)).toBe(true);
    expect(new X509Certificate(decoded(s.tls, 'tls.crt')).subjectAltName).toBe('DNS:gardener-acl, DNS:gardener-acl.garden, DNS:gardener-acl.garden.svc');
    const owner = await getObject(cp.kubeConfig, ownerRef);
    expect(s.mwc?.['metadata']?.['ownerReferences']).toEqual([{ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'gardener-acl', uid: (owner?.['metadata'] as { uid: string }).uid }]);
    // The configuration was stored before the serving certificate it vouches for.
    expect(s.rv(s.mwc)).toBeLessThan(s.rv(s.tls));
    expect(s.tls?.['type']).toBe('kubernetes.io/tls');

    const again = await new WebhookCertificateManager(options()).sync(); // e.g. a restarted process
    expect(again.writes).toBe(0);
    const t = await stored();
    expect([t.rv(t.ca), t.rv(t.tls), t.rv(t.mwc)]).toEqual([s.rv(s.ca), s.rv(s.tls), s.rv(s.mwc)]);
    expect(served.at(-1)?.cert).toBe(decoded(s.tls, 'tls.crt'));
  });

  it('rotates the CA at 80 % of its lifetime: both CAs in the bundle first, then a serving certificate from the new CA; the old CA leaves the bundle after the grace period', async () => {
    const before = await stored();
    const oldCa = decoded(before.ca, 'ca.crt').trim();
    clock += 8.1 * DAY;
    const manager = new WebhookCertificateManager(options());
    await manager.sync();
    const rotated = await stored();
    const newCa = decoded(rotated.ca, 'ca.crt').trim();
    expect(newCa).not.toBe(oldCa);
    expect(certsIn(rotated.bundle)).toEqual([newCa, oldCa]);
    expect(rotated.rv(rotated.mwc)).toBeGreaterThan(rotated.rv(rotated.ca));
    // The serving certificate (still trusted through the old CA) waits until the new bundle is in effect.
    expect(decoded(rotated.tls, 'tls.crt')).toBe(decoded(before.tls, 'tls.crt'));
    expect(servingTrusted(rotated)).toBe(true);
    clock += 11_000;
    await manager.sync();
    const reissued = await stored();
    expect(reissued.rv(reissued.tls)).toBeGreaterThan(rotated.rv(rotated.mwc));
    expect(new X509Certificate(decoded(reissued.tls, 'tls.crt')).verify(new X509Certificate(newCa).publicKey)).toBe(true);

    clock += DAY + 60_000;
    await manager.sync();
    const after = await stored();
    expect(certsIn(after.bundle)).toEqual([newCa]);
    expect(servingTrusted(after)).toBe(true);
  });

  it('converges on what is stored: a deleted configuration or Secret, an edited caBundle and a broken key are repaired', async () => {
    const manager = new WebhookCertificateManager(options());
    const before = await stored();
    await deleteObject(cp.kubeConfig, mwcRef);
    await mergePatch(cp.kubeConfig, tlsRef, { data: { 'tls.key': Buffer.from('garbage').toString('base64') } });
    await manager.sync();
    let s = await stored();
    expect(s.bundle).toBe(before.bundle);
    expect(servingTrusted(s)).toBe(true);
    expect(decoded(s.tls, 'tls.key')).toContain('PRIVATE KEY');

    const webhooks = (s.mwc?.['webhooks'] as Record<string, unknown>[]).map((w) => ({ ...w, clientConfig: { ...(w['clientConfig'] as object), caBundle: Buffer.from('not a CA').toString('base64') } }));
    await mergePatch(cp.kubeConfig, mwcRef, { webhooks });
    await deleteObject(cp.kubeConfig, caRef);
    await manager.sync();
    s = await stored();
    // A new CA (the old key is gone with its Secret), a bundle with it, a serving certificate from it.
    expect(certsIn(s.bundle)).toEqual([decoded(s.ca, 'ca.crt').trim()]);
    expect(servingTrusted(s)).toBe(true);
  });

  it('two replicas passing at once agree on one stored CA and serving certificate', async () => {
    await Promise.all([deleteObject(cp.kubeConfig, caRef), deleteObject(cp.kubeConfig, tlsRef)]);
    const pairs: KeyPair[][] = [[], []];
    const replicas = pairs.map((seen) => new WebhookCertificateManager({ ...options(), onServing: (pair) => void seen.push(pair) }));
    const untilSuccess = async (m: WebhookCertificateManager) => {
      for (let i = 0; ; i++) {
        try {
          return await m.sync();
        } catch (error) {
          if (i > 5) throw error;
        }
      }
    };
    await Promise.all(replicas.map(untilSuccess));
    await Promise.all(replicas.map(untilSuccess));
    const s = await stored();
    expect(pairs[0]?.at(-1)?.cert).toBe(decoded(s.tls, 'tls.crt'));
    expect(pairs[1]?.at(-1)?.cert).toBe(decoded(s.tls, 'tls.crt'));
    expect(servingTrusted(s)).toBe(true);
  });

  it('a lost CA Secret: the CA that signed the served certificate stays in the bundle, and the serving certificate is issued anew only in the next pass', async () => {
    const manager = new WebhookCertificateManager(options());
    await manager.sync();
    const before = await stored();
    const oldCa = decoded(before.ca, 'ca.crt').trim();
    const oldServing = decoded(before.tls, 'tls.crt');
    expect(certsIn(before.bundle)).toContain(oldCa);
    await deleteObject(cp.kubeConfig, caRef);
    await manager.sync();
    let s = await stored();
    const newCa = decoded(s.ca, 'ca.crt').trim();
    expect(newCa).not.toBe(oldCa);
    expect(certsIn(s.bundle)).toEqual([newCa, oldCa]);
    // Pods still present the old certificate until the kubelet projects a new Secret: it stays trusted, and is not replaced in the pass that changed the bundle.
    expect(decoded(s.tls, 'tls.crt')).toBe(oldServing);
    expect(servingTrusted(s)).toBe(true);
    await manager.sync();
    s = await stored();
    expect(decoded(s.tls, 'tls.crt')).not.toBe(oldServing);
    expect(new X509Certificate(decoded(s.tls, 'tls.crt')).verify(new X509Certificate(newCa).publicKey)).toBe(true);
    expect(certsIn(s.bundle)).toEqual([newCa, oldCa]);
    // After the grace period only the new CA is trusted.
    clock += DAY + 1_000;
    await manager.sync();
    s = await stored();
    expect(certsIn(s.bundle)).toEqual([newCa]);
  });

  it('a registration another writer deleted or edited is written again within a pass (every 15 s), and the caller is told, so that writes admitted meanwhile are redone', async () => {
    expect(DEFAULT_SYNC_PERIOD_MS).toBeLessThanOrEqual(15_000);
    let told = 0;
    const manager = new WebhookCertificateManager({ ...options(), onConfigurationRewritten: () => told++ });
    await manager.sync();
    expect(told).toBe(0);
    await deleteObject(cp.kubeConfig, mwcRef);
    await manager.sync();
    expect((await stored()).mwc).toBeDefined();
    expect(told).toBe(1);
    const webhooks = ((await stored()).mwc?.['webhooks'] as Record<string, unknown>[]).map((w) => ({ ...w, failurePolicy: 'Ignore' }));
    await mergePatch(cp.kubeConfig, mwcRef, { webhooks });
    await manager.sync();
    expect(((await stored()).mwc?.['webhooks'] as { failurePolicy?: string }[]).map((w) => w.failurePolicy)).toEqual(['Fail']);
    expect(told).toBe(2);
    await manager.sync();
    expect(told).toBe(2);
  });

  it('registers the webhook only once its Service has a ready endpoint; the certificates come first', async () => {
    await deleteObject(cp.kubeConfig, mwcRef);
    const slice = { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', name: 'gardener-acl-abcde', namespace: NS };
    const manager = new WebhookCertificateManager({
      ...options(),
      configurations: options().configurations.map((c) => ({ ...c, backendReady: () => serviceHasReadyEndpoint(cp.kubeConfig, NS, 'gardener-acl') })),
    });
    // No webhook Pod yet: the CA and the serving certificate (which the Pods mount) are stored, no registration.
    const first = await manager.sync();
    let s = await stored();
    expect(s.mwc).toBeUndefined();
    expect(servingTrusted({ ...s, bundle: decoded(s.ca, 'ca.crt') })).toBe(true);
    expect(first.nextDueMs - clock).toBeLessThanOrEqual(2_000);
    // A Pod that is not ready yet.
    const endpoint = (ready: boolean) => ({ addresses: ['10.0.0.7'], conditions: { ready } });
    await createObject(cp.kubeConfig, { ...slice, metadata: { name: slice.name, namespace: NS, labels: { 'kubernetes.io/service-name': 'gardener-acl' } }, addressType: 'IPv4', endpoints: [endpoint(false)] } as never);
    await manager.sync();
    expect((await stored()).mwc).toBeUndefined();
    await mergePatch(cp.kubeConfig, slice, { endpoints: [endpoint(true)] });
    await manager.sync();
    s = await stored();
    expect(s.mwc).toBeDefined();
    expect(servingTrusted(s)).toBe(true);
    // Once registered it stays, whatever the endpoints say (failing open would admit writes without their ACL).
    await deleteObject(cp.kubeConfig, slice);
    await manager.sync();
    expect((await stored()).mwc).toBeDefined();
  });
});
