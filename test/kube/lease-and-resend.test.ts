/**
 * Two transport rules a leader depends on, against scripted HTTP servers on loopback:
 * - the lease renewal goes out at once while a Retry-After another request got holds the rest of
 *   the process (waiting would lose the lease: a Retry-After may be minutes, the lease 15 s);
 * - a request that breaks on a reused keep-alive connection is sent again only when a second
 *   arrival is harmless: a JSON patch (`add` to the finalizers) or a create may already have been
 *   applied by the server, so it is not resent (the caller reads the object again and retries).
 */
import http from 'node:http';

import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';

import { LeaderElector } from '../../src/kube/leader-election.js';
import { restRequest, serverPushback } from '../../src/kube/rest.js';
import { testLogger } from './kube-test-helpers.js';
import { listenScripted } from './scripted-server.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

const kubeConfigFor = (server: http.Server): Promise<KubeConfig> => listenScripted(server, servers);

const json = (res: http.ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

describe('the lease and the server’s pushback', () => {
  it('a leader candidate takes the lease at once while a 60 s Retry-After holds every other request', async () => {
    const leases: string[] = [];
    let lease: Record<string, unknown> | undefined;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (!req.url?.includes('/leases')) return json(res, 429, { kind: 'Status', code: 429, message: 'slow down' }, { 'Retry-After': '60' });
        leases.push(`${req.method} ${req.url}`);
        if (req.method === 'GET') return lease ? json(res, 200, lease) : json(res, 404, { kind: 'Status', code: 404, reason: 'NotFound' });
        lease = { ...(JSON.parse(body) as Record<string, unknown>), metadata: { name: 'l', namespace: 'ns', resourceVersion: String(leases.length) } };
        return json(res, req.method === 'POST' ? 201 : 200, lease);
      });
    });
    const kubeConfig = await kubeConfigFor(server);
    await expect(restRequest(kubeConfig, { path: '/api/v1/namespaces/ns/configmaps/x' })).rejects.toMatchObject({ code: 429 });
    expect(serverPushback(kubeConfig).remainingMs()).toBeGreaterThan(50_000);
    const started: number[] = [];
    const elector = new LeaderElector({
      kubeConfig,
      namespace: 'ns',
      name: 'l',
      identity: 'a',
      onStartedLeading: () => started.push(Date.now()),
      onStoppedLeading: () => undefined,
      logger: testLogger(),
    });
    const begin = Date.now();
    const running = elector.run();
    try {
      for (let i = 0; i < 100 && started.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(started.length, `lease requests seen: ${leases.join(', ')}`).toBe(1);
      expect((started[0] ?? Infinity) - begin).toBeLessThan(5_000);
      expect(leases.slice(0, 2)).toEqual(['GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/l', 'POST /apis/coordination.k8s.io/v1/namespaces/ns/leases']);
      // Everything else still waits for the server.
      expect(serverPushback(kubeConfig).remainingMs()).toBeGreaterThan(40_000);
    } finally {
      await elector.stop();
      await running;
    }
  }, 30_000);
});

describe('a lost lease, in a process that exits after it', () => {
  it('campaignAfterLoss false: run() ends at the loss and the elector never takes the lease again while the process shuts down', async () => {
    let failing = false;
    const leases: { at: number; what: string }[] = [];
    let lease: Record<string, unknown> | undefined;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        leases.push({ at: Date.now(), what: `${req.method}` });
        if (failing) return json(res, 500, { kind: 'Status', code: 500, message: 'etcd unavailable' });
        if (req.method === 'GET') return lease ? json(res, 200, lease) : json(res, 404, { kind: 'Status', code: 404, reason: 'NotFound' });
        lease = { ...(JSON.parse(body) as Record<string, unknown>), metadata: { name: 'l', namespace: 'ns', resourceVersion: String(leases.length) } };
        return json(res, req.method === 'POST' ? 201 : 200, lease);
      });
    });
    const kubeConfig = await kubeConfigFor(server);
    const events: string[] = [];
    const elector = new LeaderElector({
      kubeConfig,
      namespace: 'ns',
      name: 'l',
      identity: 'a',
      leaseDurationMs: 1_500,
      renewDeadlineMs: 1_000,
      retryPeriodMs: 200,
      campaignAfterLoss: false,
      onStartedLeading: () => events.push('started'),
      onStoppedLeading: (reason) => events.push(`stopped ${reason}`),
      logger: testLogger(),
    });
    let ended = false;
    const running = elector.run().then(() => (ended = true));
    for (let i = 0; i < 40 && !events.includes('started'); i++) await new Promise((r) => setTimeout(r, 50));
    failing = true;
    for (let i = 0; i < 60 && !ended; i++) await new Promise((r) => setTimeout(r, 50));
    expect(ended).toBe(true);
    const lostAt = Date.now();
    // The API server answers again: a campaigning elector would take its own expired lease back at once.
    failing = false;
    await new Promise((r) => setTimeout(r, 2_000));
    expect(events).toEqual(['started', 'stopped lost']);
    expect(leases.filter((l) => l.at > lostAt)).toEqual([]);
    await elector.stop();
    await running;
  }, 30_000);
});

describe('a request broken on a reused keep-alive connection', () => {
  /** Answers the first request of each connection; reads the second, then drops the connection unanswered. */
  async function droppingServer(): Promise<{ kubeConfig: KubeConfig; arrived: string[] }> {
    const arrived: string[] = [];
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        arrived.push(`${req.method} ${req.headers['content-type'] ?? ''}`);
        const socket = req.socket as typeof req.socket & { served?: number };
        socket.served = (socket.served ?? 0) + 1;
        if (socket.served === 2) {
          socket.destroy();
          return;
        }
        json(res, 200, { kind: 'Extension', metadata: { name: 'acl', resourceVersion: String(arrived.length) } });
      });
    });
    return { kubeConfig: await kubeConfigFor(server), arrived };
  }

  it('a JSON patch is not sent twice: the server may have applied it', async () => {
    const { kubeConfig, arrived } = await droppingServer();
    await restRequest(kubeConfig, { path: '/x' });
    const patch = restRequest(kubeConfig, {
      method: 'PATCH',
      path: '/x',
      contentType: 'application/json-patch+json',
      body: [{ op: 'add', path: '/metadata/finalizers/-', value: 'extensions.gardener.cloud/acl' }],
    });
    await expect(patch).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(arrived).toEqual(['GET ', 'PATCH application/json-patch+json']);
  });

  it('a create is not sent twice either; a GET and a merge patch are (a second arrival changes nothing)', async () => {
    const { kubeConfig, arrived } = await droppingServer();
    await restRequest(kubeConfig, { path: '/x' });
    await expect(restRequest(kubeConfig, { method: 'POST', path: '/x', body: {} })).rejects.toMatchObject({ code: 'ECONNRESET' });
    await restRequest(kubeConfig, { path: '/x' });
    await restRequest(kubeConfig, { path: '/x' });
    await restRequest(kubeConfig, { method: 'PATCH', path: '/x', contentType: 'application/merge-patch+json', body: {} });
    await restRequest(kubeConfig, { method: 'PATCH', path: '/x', contentType: 'application/merge-patch+json', body: {} });
    expect(arrived.filter((a) => a.startsWith('POST'))).toHaveLength(1);
    // The GET and the merge patch that broke were each sent again on a new connection and answered there.
    expect(arrived.filter((a) => a.startsWith('GET')).length).toBeGreaterThanOrEqual(4);
    expect(arrived.filter((a) => a.startsWith('PATCH')).length).toBeGreaterThanOrEqual(3);
  });
});
