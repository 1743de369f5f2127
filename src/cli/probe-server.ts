// Plain-HTTP endpoints for kubelet probes and Prometheus, apart from any TLS serving port.
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface ProbeServerOptions {
  readonly port: number;
  readonly host?: string;
  readonly registry: Registry;
  /** /readyz answers 200 only when this says so. */
  readonly ready: () => boolean;
}

export async function startProbeServer(options: ProbeServerOptions): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const ready = options.ready();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ok\n' : 'not ready\n');
    } else if (path === '/metrics') {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': options.registry.contentType }).end(text),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  return server;
}
