// The Shoot webhook called by the real gardener-apiserver: `gardener-contract garden` starts a
// garden control plane as Gardener's own integration tests do (test/envtest: kube-apiserver and
// etcd, gardener-apiserver in process behind the aggregation layer). Real Shoot objects pass
// Gardener's own validation and then our webhook, registered in that kube-apiserver as on a
// garden cluster; what the client sees (refusal text, warning headers) is asserted.
import { writeFile } from 'node:fs/promises';
import { request, type RequestOptions } from 'node:https';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { createObject, getObject, mergePatch, type ObjectRef } from '../../src/kube/objects-client.js';
import { webhookConfigCommand } from '../../src/cli/webhook-command.js';
import { eventually } from '../kube/kube-test-helpers.js';
import { gardenShoot, startGardenApiServer, type GardenApiServer } from '../support/garden-apiserver.js';
import { startTestWebhook, type TestWebhook } from '../webhook/webhook-fixtures.js';

const NAMESPACE = 'garden-p';

const shootRef = (name: string): ObjectRef => ({ apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot', name, namespace: NAMESPACE });
const allowRule = (...cidrs: string[]) => ({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs } });

function shoot(name: string, providerConfig: unknown, entry: Record<string, unknown> = {}): Record<string, unknown> {
  return gardenShoot(name, NAMESPACE, { extensions: [{ type: 'acl', providerConfig, ...entry }] });
}

interface Answer {
  readonly status: number;
  readonly message: string;
  readonly warnings: readonly string[];
}

/** POSTs a Shoot as kubectl would and returns the status, the refusal message and the Warning headers. */
async function createShoot(kc: KubeConfig, body: Record<string, unknown>): Promise<Answer> {
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  const options: RequestOptions = { method: 'POST', hostname: server.hostname, port: server.port, path: `/apis/core.gardener.cloud/v1beta1/namespaces/${NAMESPACE}/shoots`, headers: { 'content-type': 'application/json' } };
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    const req = request(options, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      res.on('end', () => {
        // RFC 7234 warn-values (299 - "text"); Node joins repeated Warning headers with ", ".
        const raw = res.headers['warning'];
        const joined = Array.isArray(raw) ? raw.join(', ') : (raw ?? '');
        const warnings = [...joined.matchAll(/299 - "((?:[^"\\]|\\.)*)"/g)].map((m) => (m[1] ?? '').replace(/\\(.)/g, '$1'));
        resolve({ status: res.statusCode ?? 0, message: (JSON.parse(text) as { message?: string }).message ?? '', warnings });
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('the Shoot webhook behind the real gardener-apiserver', () => {
  let garden: GardenApiServer | undefined;
  let kc: KubeConfig;
  let hook: TestWebhook;
  const registry = new Registry();
  const shootCalls = async () =>
    ((await registry.getSingleMetric('controller_runtime_webhook_requests_total')?.get())?.values ?? [])
      .filter((v) => v.labels['webhook'] === 'shoot')
      .reduce((sum, v) => sum + v.value, 0);

  beforeAll(async () => {
    garden = await startGardenApiServer();
    kc = garden.kubeConfig;
    await createObject(kc, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
    hook = await startTestWebhook(undefined, { registry });
    const caFile = path.join(hook.certDir, 'ca.crt');
    await writeFile(caFile, hook.ca.cert);
    let yaml = '';
    const code = await webhookConfigCommand(['--webhooks', 'shoot', '--url', hook.url, '--ca-bundle-file', caFile, '--timeout-seconds', '5'], { stdout: (t) => (yaml += t), stderr: (t) => (yaml += t) });
    expect(code, yaml).toBe(0);
    const { parseAllDocuments } = await import('yaml');
    for (const doc of parseAllDocuments(yaml)) await createObject(kc, doc.toJSON() as never);
    // The registration reaches gardener-apiserver's admission through its informer.
    await eventually('webhook in force', async () => (await createShoot(kc, shoot('probe', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['10.0.0.300/8'] } }))).status === 422, 60_000);
  }, 180_000);

  afterAll(async () => {
    await hook?.app.stop();
    await garden?.stop();
  });

  it('an invalid rule: gardener-apiserver refuses the Shoot with our message, naming the field and the fix; valid and disabled ones are stored', async () => {
    const refused = async (providerConfig: unknown) => {
      const answer = await createShoot(kc, shoot('refused', providerConfig));
      expect(answer.status).toBe(422);
      return answer.message;
    };
    expect(await refused(allowRule('203.0.113.0/24', '2001:db8::/48', '10.0.0.300/8'))).toBe(
      'admission webhook "shoots.acl.gardener.cloud" denied the request: spec.extensions[0].providerConfig.rule.cidrs[2]: "10.0.0.300/8" is not a valid CIDR ("10.0.0.300" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48',
    );
    expect(await refused({ apiVersion: 'acl.gardener.cloud/v1alpha1' })).toBe(
      'admission webhook "shoots.acl.gardener.cloud" denied the request: spec.extensions[0].providerConfig.rule: is required: add rule with action, type and cidrs',
    );
    expect(await refused(allowRule(...Array.from({ length: 51 }, (_, i) => `10.0.${i}.0/24`)))).toContain(
      'spec.extensions[0].providerConfig.rule.cidrs: has 51 distinct ranges (repeated entries and ranges inside others not counted), more than the maximum of 50 set by the operator',
    );
    expect((await createShoot(kc, shoot('valid', allowRule('203.0.113.0/24')))).status).toBe(201);
    expect((await createShoot(kc, shoot('disabled', allowRule('nonsense'), { disabled: true }))).status).toBe(201);
    for (const name of ['valid', 'disabled']) expect(await getObject(kc, shootRef(name))).toBeDefined();
  });

  it('gardener-apiserver calls the webhook only when the acl extension is created or changed (not on Gardener’s metadata writes)', async () => {
    const before = await shootCalls();
    expect((await createShoot(kc, shoot('calls', allowRule('203.0.113.0/24')))).status).toBe(201);
    expect(await shootCalls()).toBe(before + 1);
    await mergePatch(kc, shootRef('calls'), { metadata: { labels: { 'example.com/touched': 'yes' }, annotations: { 'gardener.cloud/timestamp': new Date().toISOString() } } });
    expect(await shootCalls()).toBe(before + 1);
    const withRule = (cidr: string) => ({ spec: { extensions: [{ type: 'acl', providerConfig: allowRule(cidr) }] } });
    await mergePatch(kc, shootRef('calls'), withRule('203.0.113.0/25'));
    expect(await shootCalls()).toBe(before + 2);
    await expect(mergePatch(kc, shootRef('calls'), withRule('203.0.113.0/33'))).rejects.toThrow('is not a valid CIDR');
    expect(await shootCalls()).toBe(before + 3);
  });

  it('a valid rule is stored; a field the reference extension ignored is stored with a warning the client sees', async () => {
    expect(await createShoot(kc, shoot('good', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8::/32'] } }))).toMatchObject({ status: 201, warnings: [] });
    const lenient = await createShoot(kc, shoot('lenient', { rule: { action: 'allow', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8::/32'] }, comment: 'office' }));
    expect(lenient.status).toBe(201);
    expect(lenient.warnings).toEqual(['spec.extensions[0].providerConfig: unknown field(s) "comment" ignored; remove them or check the spelling']);
  });

  it('an ALLOW that opens a whole family, or names one family only, is stored with warnings the client sees (issue 14 point 3)', async () => {
    const open = await createShoot(kc, shoot('open', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['0.0.0.0/0'] } }));
    expect(open.status).toBe(201);
    expect(open.warnings).toEqual([
      'spec.extensions[0].providerConfig.rule.cidrs: 0.0.0.0/0 admits every IPv4 client: the control plane is open to the whole IPv4 internet on every path; list only the ranges that need access',
      "spec.extensions[0].providerConfig.rule.cidrs: lists only IPv4 ranges: every IPv6 client is refused on every path (only the seed's always-allowed ranges pass); add IPv6 ranges if IPv6 clients must reach the control plane",
    ]);
    const v6only = await createShoot(kc, shoot('v6only', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['2001:db8::/32'] } }));
    expect(v6only).toMatchObject({ status: 201, warnings: [
      "spec.extensions[0].providerConfig.rule.cidrs: lists only IPv6 ranges: every IPv4 client is refused on every path (only the seed's always-allowed ranges pass); add IPv4 ranges if IPv4 clients must reach the control plane",
    ] });
  });

  it('audit mode is stored with a warning that nothing is refused; an unknown mode is refused with the fix (issue 14 point 1)', async () => {
    const audit = await createShoot(kc, shoot('audit', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8::/32'], mode: 'audit' } }));
    expect(audit).toMatchObject({ status: 201, warnings: [
      'spec.extensions[0].providerConfig.rule.mode: is audit: this ACL refuses no connection, Envoy only counts the ones it would refuse (docs/owners/trying-an-acl-safely.md); set mode enforce, or remove it, to enforce the rule',
    ] });
    const shadow = await createShoot(kc, shoot('shadow', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'], mode: 'shadow' } }));
    expect(shadow.status).toBe(422);
    expect(shadow.message).toContain('spec.extensions[0].providerConfig.rule.mode: "shadow" is not a valid mode; use enforce or audit');
  });
});
