// The controller process's /readyz and /healthz follow its informers: a real `gardener-acl
// controller` reaches the test kube-apiserver through a loopback proxy that is then cut, so its
// watches fail while the API server itself keeps serving.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_GW, allowRule, createSeed } from '../actuator/seed-fixture.js';
import { getFreePort, type ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { startTcpProxy, type TcpProxy } from '../kube/tcp-proxy.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

async function probe(port: number, endpoint: '/readyz' | '/healthz'): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${endpoint}`);
  return { status: res.status, body: await res.text() };
}

describe('controller probes reflect its caches', () => {
  let cp: ControlPlane;
  let proxy: TcpProxy;
  let child: ChildProcess | undefined;
  let dir: string;
  let port: number;
  const output: string[] = [];

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [{ project: 'probe', name: 'a', providerConfig: allowRule('203.0.113.0/24') }]);
    proxy = await startTcpProxy(Number(new URL(cp.kubeConfig.getCurrentCluster()?.server ?? '').port));
    dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-probes-'));
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, proxy.kubeConfigVia(cp.kubeConfig).exportConfig());
    port = await getFreePort();
    child = spawn(
      process.execPath,
      [
        '--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller',
        '--kubeconfig', kubeconfig, '--leader-elect', 'false', '--probe-port', String(port),
        '--cache-unready-after', '2s', '--cache-unhealthy-after', '5s',
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const collect = (chunk: Buffer): void => void output.push(chunk.toString('utf8'));
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
  }, 120_000);

  afterAll(async () => {
    child?.kill('SIGKILL');
    await proxy?.close();
    await cp?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ready and healthy once synced; unready after 2 s without watches, unhealthy after 5 s; both back when the API server is reachable again', async () => {
    await eventually('ready', async () => (await probe(port, '/readyz').catch(() => ({ status: 0, body: '' }))).status === 200, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}\ncontroller output:\n${output.join('').slice(-3000)}`);
    });
    expect(await probe(port, '/healthz')).toEqual({ status: 200, body: 'ok\n' });

    const cutAt = Date.now();
    proxy.setMode('refuse');
    // Each cache notices on its own schedule; wait until both named ones are reported.
    const unready = await eventually('unready', async () => {
      const r = await probe(port, '/readyz');
      return r.status === 503 && r.body.includes('cache extensions') && r.body.includes('cache envoyFilters') && r;
    }, 30_000);
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(2_000);
    expect(unready.body).toContain('[-] cache extensions: no open watch for over 2 s\n');
    expect(unready.body).toContain('[-] cache envoyFilters: no open watch for over 2 s\n');
    const unhealthy = await eventually('unhealthy', async () => {
      const r = await probe(port, '/healthz');
      return r.status === 503 && r.body.includes('cache extensions') && r;
    }, 30_000);
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(5_000);
    expect(unhealthy.body).toContain('[-] cache extensions: no open watch for over 5 s\n');

    proxy.setMode('forward');
    // The informers' backoff after a refused connection is at most 30 s.
    await eventually('ready again', async () => (await probe(port, '/readyz')).status === 200, 60_000);
    expect(await probe(port, '/healthz')).toEqual({ status: 200, body: 'ok\n' });
  }, 180_000);
});
