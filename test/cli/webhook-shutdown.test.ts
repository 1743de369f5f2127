// A rolling restart of the webhook must reject no admission call (failurePolicy Fail): on SIGTERM
// the real `gardener-acl webhook` process turns unready at once, keeps answering admission
// requests (on new and kept-alive connections) for --shutdown-delay while the endpoint would be
// taken out of the Service, then closes and exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificates } from '../../src/webhook/serving-certs.js';
import { getFreePort } from '../kube/control-plane.js';
import { eventually, sleep } from '../kube/kube-test-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DELAY_MS = 3_000;

const review = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u-1', kind: { group: 'core.gardener.cloud', version: 'v1beta1', kind: 'Shoot' }, operation: 'CREATE', object: { kind: 'Shoot', spec: { extensions: [] } } },
});

describe('webhook process shutdown drains before it closes', () => {
  let dir: string;
  let child: ChildProcess | undefined;
  let port: number;
  let probePort: number;
  let ca: string;
  const output: string[] = [];
  let exited: Promise<number | null>;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-shutdown-'));
    const { ca: authority, serving } = await selfSignedCertificates([], ['127.0.0.1']);
    ca = authority.cert;
    await writeFile(path.join(dir, 'tls.crt'), serving.cert);
    await writeFile(path.join(dir, 'tls.key'), serving.key);
    [port, probePort] = [await getFreePort(), await getFreePort()];
    child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'webhook', '--webhooks', 'shoot', '--host', '127.0.0.1', '--port', String(port), '--cert-dir', dir, '--probe-port', String(probePort), '--shutdown-delay', `${DELAY_MS}ms`],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
    child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
    exited = new Promise((resolve) => child?.once('exit', (code) => resolve(code)));
    await eventually('ready', async () => (await fetch(`http://127.0.0.1:${probePort}/readyz`).catch(() => undefined))?.status === 200, 60_000);
  }, 90_000);

  afterAll(async () => {
    child?.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const admit = (viaAgent: boolean): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: '/validate-shoot', method: 'POST', ca, headers: { 'content-type': 'application/json' }, ...(viaAgent ? { agent } : { agent: false }) },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(review);
    });

  it('SIGTERM: unready at once, every admission request answered during the delay, then exit 0', async () => {
    expect(await admit(true)).toBe(200); // a kept-alive connection, as the API server holds one
    const termAt = Date.now();
    child?.kill('SIGTERM');
    await eventually('unready', async () => (await fetch(`http://127.0.0.1:${probePort}/readyz`)).status === 503, 2_000);
    const answers: number[] = [];
    while (Date.now() - termAt < DELAY_MS - 500) {
      answers.push(await admit(true), await admit(false));
      await sleep(100);
    }
    expect(answers.length).toBeGreaterThan(10);
    expect(answers.every((status) => status === 200), JSON.stringify(answers)).toBe(true);
    expect(await exited).toBe(0);
    expect(Date.now() - termAt).toBeGreaterThanOrEqual(DELAY_MS);
  }, 60_000);
});
