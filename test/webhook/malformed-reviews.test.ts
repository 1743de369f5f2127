// Bad input on the wire: every malformed AdmissionReview gets an HTTP 200 refusal that says
// what is wrong, and the server keeps answering afterwards. Also: a rotation noticed by the
// poll alone (no file-system events), and the metrics.
import { X509Certificate } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificates } from '../../src/webhook/serving-certs.js';
import { eventually } from '../kube/kube-test-helpers.js';
import { postHttps, startTestWebhook, type TestWebhook } from './webhook-fixtures.js';

const review = (request: unknown) => JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request });
const shootRequest = (object: unknown) => ({ uid: 'u-1', kind: { group: 'core.gardener.cloud', version: 'v1beta1', kind: 'Shoot' }, operation: 'CREATE', object });

describe('malformed AdmissionReviews', () => {
  let hook: TestWebhook;
  const registry = new Registry();
  beforeAll(async () => {
    // No seed caches: only the Shoot webhook is served; the EnvoyFilter path must answer 404.
    hook = await startTestWebhook(undefined, { registry });
  });
  afterAll(async () => hook?.stop());

  async function refusal(body: string | Buffer, contentType?: string) {
    const answer = await postHttps(`${hook.url}/validate-shoot`, hook.ca.cert, body, { contentType });
    expect(answer.status).toBe(200);
    const parsed = JSON.parse(answer.body) as { apiVersion: string; kind: string; response: { uid: string; allowed: boolean; status: { code: number; message: string } } };
    expect(parsed).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { allowed: false } });
    return parsed.response;
  }

  it('refuses each kind of malformed review clearly, then still serves a good one', async () => {
    expect((await refusal('{"apiVersion":')).status).toMatchObject({ code: 400, message: expect.stringContaining('cannot read the AdmissionReview') });
    expect((await refusal('')).status.code).toBe(400);
    expect((await refusal('hello', 'text/plain')).status.code).toBe(415);
    expect((await refusal(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'ConfigMap', request: {} }))).status.message).toContain('kind: must be "AdmissionReview"');
    expect((await refusal(review({ kind: { group: '', version: 'v1', kind: 'Shoot' }, operation: 'CREATE' }))).status.message).toContain('request.uid: is required');
    const noObject = await refusal(review({ ...shootRequest(undefined) }));
    expect(noObject.uid).toBe('u-1');
    expect(noObject.status.message).toContain('request.object is not a Shoot');
    const wrongKind = await refusal(review(shootRequest({ kind: 'ConfigMap', metadata: { name: 'x' } })));
    expect(wrongKind.status.message).toBe('request.object is not a Shoot: must be "Shoot"');
    const huge = await refusal(review(shootRequest({ kind: 'Shoot', pad: 'x'.repeat(8 * 1024 * 1024) })));
    expect(huge.status).toMatchObject({ code: 413, message: 'request body exceeds 7340032 bytes' });

    // Prototype-looking keys elsewhere in the Shoot (another extension's providerConfig) are no reason to refuse.
    const withProto = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-p","kind":{"group":"core.gardener.cloud","version":"v1beta1","kind":"Shoot"},"operation":"UPDATE","object":{"kind":"Shoot","spec":{"extensions":[{"type":"other","providerConfig":{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}},{"type":"acl","providerConfig":{"rule":{"action":"ALLOW","type":"remote_ip","cidrs":["10.0.0.0/8","2001:db8::/32"]}}}]}}}}`;
    const proto = await postHttps(`${hook.url}/validate-shoot`, hook.ca.cert, withProto);
    expect(proto.status).toBe(200);
    expect(JSON.parse(proto.body)).toEqual({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'u-p', allowed: true } });
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();

    const good = await postHttps(`${hook.url}/validate-shoot`, hook.ca.cert, review(shootRequest({ kind: 'Shoot', spec: { extensions: [{ type: 'acl', providerConfig: { rule: { action: 'allow', type: 'remote_ip', cidrs: ['10.0.0.0/8', '2001:db8::/32'] } } }] } })));
    expect(JSON.parse(good.body)).toEqual({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'u-1', allowed: true } });
    expect((await postHttps(`${hook.url}/mutate-envoyfilter`, hook.ca.cert, review(shootRequest({})))).status).toBe(404);

    const metrics = await registry.metrics();
    expect(metrics).toMatch(/controller_runtime_webhook_requests_total\{webhook="shoot",code="413"\} 1/);
    expect(metrics).toMatch(/controller_runtime_webhook_requests_total\{webhook="shoot",code="200"\} 2/);
    expect(metrics).toMatch(/controller_runtime_webhook_requests_in_flight\{webhook="shoot"\} 0/);
  });
});

describe('serving certificate rotation found by polling alone', () => {
  it('swaps the pair without file-system events', async () => {
    const hook = await startTestWebhook(undefined, { watchFiles: false });
    try {
      const next = await selfSignedCertificates([], ['127.0.0.1']);
      await hook.rotate(next.serving);
      const serial = new X509Certificate(next.serving.cert).serialNumber;
      await eventually('polled rotation', async () => (await postHttps(`${hook.url}/validate-shoot`, next.ca.cert, '{}').catch(() => undefined))?.peerCertificateSerial === serial, 5_000);
    } finally {
      await hook.stop();
    }
  });
});
