// The Shoot webhook called by the real gardener-apiserver: `gardener-contract garden` starts a
// garden control plane as Gardener's own integration tests do (test/envtest: kube-apiserver and
// etcd, gardener-apiserver in process behind the aggregation layer). Real Shoot objects pass
// Gardener's own validation and then our webhook, registered in that kube-apiserver as on a
// garden cluster; what the client sees (refusal text, warning headers) is asserted.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request, type RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObject } from '../../src/kube/objects-client.js';
import { webhookConfigCommand } from '../../src/cli/webhook-command.js';
import { eventually } from '../kube/kube-test-helpers.js';
import { gardenerBin } from '../support/gardener-resource-manager.js';
import { startTestWebhook, type TestWebhook } from '../webhook/webhook-fixtures.js';

const NAMESPACE = 'garden-p';

function shoot(name: string, providerConfig: unknown): Record<string, unknown> {
  return {
    apiVersion: 'core.gardener.cloud/v1beta1',
    kind: 'Shoot',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      cloudProfile: { kind: 'CloudProfile', name: 'cloudprofile1' },
      credentialsBindingName: 'credentials',
      region: 'europe-central-1',
      provider: { type: 'local', workers: [{ name: 'pool', minimum: 1, maximum: 1, machine: { type: 'large', image: { name: 'image', version: '1.0.0' } } }] },
      kubernetes: { version: '1.33.0' },
      networking: { type: 'calico', nodes: '10.180.0.0/16' },
      extensions: [{ type: 'acl', providerConfig }],
    },
  };
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
  let garden: ChildProcess | undefined;
  let dir: string;
  let kc: KubeConfig;
  let hook: TestWebhook;
  const output: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-garden-'));
    const kubeconfig = path.join(dir, 'kubeconfig');
    garden = spawn(gardenerBin('gardener-contract'), ['garden', `--kube-assets=${process.env['KUBE_ASSETS'] ?? ''}`, `--kubeconfig-out=${kubeconfig}`], { stdio: ['pipe', 'pipe', 'pipe'] });
    garden.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    garden.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    await eventually('garden control plane', () => output.join('').includes('{"step":"garden","ok":true'), 120_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${output.join('').slice(-4000)}`);
    });
    kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    await createObject(kc, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
    hook = await startTestWebhook(undefined);
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
    garden?.stdin?.end();
    garden?.kill('SIGTERM');
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('an invalid rule: gardener-apiserver refuses the Shoot with our message, naming the field and the fix', async () => {
    const answer = await createShoot(kc, shoot('bad', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '10.0.0.300/8'] } }));
    expect(answer.status).toBe(422);
    expect(answer.message).toContain('admission webhook "shoots.acl.gardener.cloud" denied the request');
    expect(answer.message).toContain('spec.extensions[0].providerConfig.rule.cidrs[1]: "10.0.0.300/8" is not a valid CIDR');
  });

  it('a valid rule is stored; a field the reference extension ignored is stored with a warning the client sees', async () => {
    expect(await createShoot(kc, shoot('good', { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }))).toMatchObject({ status: 201, warnings: [] });
    const lenient = await createShoot(kc, shoot('lenient', { rule: { action: 'allow', type: 'remote_ip', cidrs: ['203.0.113.0/24'] }, comment: 'office' }));
    expect(lenient.status).toBe(201);
    expect(lenient.warnings).toEqual(['spec.extensions[0].providerConfig: unknown field(s) "comment" ignored; remove them or check the spelling']);
  });
});
