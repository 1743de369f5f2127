/**
 * A request this side gives up on says why: a closed write fence or the request's own deadline,
 * whether the server had not answered yet or was still sending the body. (A bare "The operation
 * was aborted" hid that a leader's write in flight was stopped by its fence.)
 */
import http from 'node:http';

import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';

import { FenceRefusedError, LeaseFence } from '../../src/kube/lease-fence.js';
import { restRequest } from '../../src/kube/rest.js';
import { listenScripted } from './scripted-server.js';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** Never answers, or answers the headers and never ends the body. */
function hangingServer(phase: 'headers' | 'body'): Promise<KubeConfig> {
  const server = http.createServer((_req, res) => {
    if (phase === 'body') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"kind":');
    }
  });
  return listenScripted(server, servers);
}

describe('an aborted request rejects with the reason it was aborted', () => {
  for (const phase of ['headers', 'body'] as const) {
    it(`fence closed while waiting for the ${phase}: FenceRefusedError naming the lease`, async () => {
      const kubeConfig = await hangingServer(phase);
      const fence = new LeaseFence('garden/acl-leader');
      fence.admit(performance.now() + 60_000);
      const write = restRequest(kubeConfig, { method: 'PUT', path: '/api/v1/namespaces/x/configmaps/y', body: {}, signal: fence.signal() });
      await new Promise((resolve) => setTimeout(resolve, 100));
      fence.revoke('leadership lost');
      const error: unknown = await write.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(FenceRefusedError);
      expect((error as Error).message).toBe('write aborted: the lease garden/acl-leader may have passed to another replica (leadership lost)');
    });

    it(`deadline passed while waiting for the ${phase}: TimeoutError with the deadline`, async () => {
      const kubeConfig = await hangingServer(phase);
      const error: unknown = await restRequest(kubeConfig, { path: '/api/v1/namespaces', timeoutMs: 300 }).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'TimeoutError', message: 'request timed out after 300 ms' });
    });
  }
});
