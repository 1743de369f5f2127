/**
 * The shared Retry-After gate of rest.ts, against a scripted HTTP server that throttles for a
 * while: a throttled server sees one probe per Retry-After, not one request per waiting caller.
 */
import http from 'node:http';

import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';

import { apiStatusCode } from '../../src/kube/errors.js';
import { restRequest, serverPushback } from '../../src/kube/rest.js';
import { listenScripted } from './scripted-server.js';

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

const kubeConfigFor = (server: http.Server): Promise<KubeConfig> => listenScripted(server, servers);

/** A server that answers 429 Retry-After: 1 until `throttleMs` after start, then 200 {}. */
async function throttlingServer(throttleMs: number): Promise<{ kubeConfig: KubeConfig; hits: number[] }> {
  const started = performance.now();
  const hits: number[] = [];
  const server = http.createServer((_req, res) => {
    const at = performance.now() - started;
    hits.push(at);
    if (at < throttleMs) {
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '1' });
      res.end(JSON.stringify({ kind: 'Status', code: 429, message: 'slow down' }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
  return { kubeConfig: await kubeConfigFor(server), hits };
}

/** Retries like a controller worker: at once after every failure. */
async function persistentCaller(kc: KubeConfig): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      await restRequest(kc, { path: '/api/v1/namespaces/default/configmaps/x', timeoutMs: 10_000 });
      return attempt;
    } catch (error) {
      if (apiStatusCode(error) !== 429) throw error;
    }
  }
}

describe('server pushback (Retry-After shared by all requests of a KubeConfig)', () => {
  it('sends one probe per Retry-After while throttled, then lets every waiting caller through', async () => {
    const { kubeConfig, hits } = await throttlingServer(2_500);
    const results = await Promise.all(Array.from({ length: 10 }, () => persistentCaller(kubeConfig)));
    expect(results).toHaveLength(10);
    // The 10 first requests race the first answer; after it, one probe per second (at ~1 s and
    // ~2 s, both throttled, then ~3 s, allowed) and then the 10 callers, each once.
    const afterFirstWave = hits.slice(10);
    const probes = afterFirstWave.filter((t) => t < 2_500);
    expect(probes.length).toBe(2);
    expect(probes[0]).toBeGreaterThanOrEqual(950);
    expect((probes[1] ?? 0) - (probes[0] ?? 0)).toBeGreaterThanOrEqual(950);
    expect(hits.length).toBe(10 + 2 + 10);
    expect(serverPushback(kubeConfig).remainingMs()).toBe(0);
  });

  it('a probe that hangs holds the others back for 2 s at most', async () => {
    let calls = 0;
    const server = http.createServer((_req, res) => {
      calls++;
      if (calls === 1) {
        res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '0' });
        res.end('{}');
        return;
      }
      if (calls === 2) return; // the probe: never answered
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
    const kubeConfig = await kubeConfigFor(server);
    await expect(restRequest(kubeConfig, { path: '/a' })).rejects.toMatchObject({ code: 429 });
    const hanging = restRequest(kubeConfig, { path: '/probe', timeoutMs: 20_000 }).catch(() => 'aborted');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = performance.now();
    await restRequest(kubeConfig, { path: '/b', timeoutMs: 10_000 });
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(1_900);
    expect(waited).toBeLessThan(3_000);
    server.closeAllConnections();
    expect(await hanging).toBe('aborted');
  });

  it('counts the wait against the request deadline', async () => {
    const { kubeConfig, hits } = await throttlingServer(60_000);
    await expect(restRequest(kubeConfig, { path: '/api/v1/namespaces' })).rejects.toMatchObject({ code: 429 });
    const second = restRequest(kubeConfig, { path: '/api/v1/namespaces', timeoutMs: 200 });
    await expect(second).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(hits.length).toBe(1);
  });
});
