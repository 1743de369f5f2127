/**
 * A loopback TCP proxy in front of the test kube-apiserver, to take one client's network away
 * while the API server keeps serving everybody else:
 *   forward   – pass bytes both ways (default);
 *   refuse    – close every connection (as if the server were unreachable);
 *   blackhole – keep connections (existing and new) open but pass nothing, like a half-open
 *               connection: only a client-side timeout notices.
 * TLS passes through untouched (the serving certificate is for 127.0.0.1, so it still verifies).
 */
import net from 'node:net';

import { KubeConfig } from '@kubernetes/client-node';

export type ProxyMode = 'forward' | 'refuse' | 'blackhole';

export interface TcpProxy {
  port: number;
  /** A copy of `kc` whose current cluster points at the proxy. */
  kubeConfigVia(kc: KubeConfig): KubeConfig;
  /**
   * Switches mode. 'blackhole' silences existing connections too; 'forward' and 'refuse' cut
   * every existing connection (a silenced TLS stream cannot be resumed).
   */
  setMode(mode: ProxyMode): void;
  connections(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let mode: ProxyMode = 'forward';
  interface Connection {
    client: net.Socket;
    upstream: net.Socket;
    swallow: boolean;
  }
  const open = new Set<Connection>();

  const server = net.createServer((client) => {
    if (mode === 'refuse') {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, '127.0.0.1');
    const conn: Connection = { client, upstream, swallow: mode === 'blackhole' };
    open.add(conn);
    // Manual forwarding so that a blackholed connection can swallow bytes.
    client.on('data', (d: Buffer) => {
      if (!conn.swallow) upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (!conn.swallow) client.write(d);
    });
    const close = () => {
      open.delete(conn);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('close', close);
      s.on('error', close);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');

  return {
    port: address.port,
    kubeConfigVia(kc) {
      const copy = new KubeConfig();
      copy.loadFromOptions({
        clusters: kc.clusters.map((c) => (c.name === kc.getCurrentCluster()?.name ? { ...c, server: `https://127.0.0.1:${address.port}` } : c)),
        users: kc.users,
        contexts: kc.contexts,
        currentContext: kc.getCurrentContext(),
      });
      return copy;
    },
    setMode(next) {
      mode = next;
      for (const conn of open) {
        if (next === 'blackhole') conn.swallow = true;
        else conn.client.destroy();
      }
    },
    connections: () => open.size,
    async close() {
      for (const conn of open) conn.client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
