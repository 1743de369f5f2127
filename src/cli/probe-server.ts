// Plain-HTTP endpoints for kubelet probes and Prometheus, apart from any TLS serving port.
// /healthz and /readyz answer 200 "ok", or 503 with one line per failing check (as the Kubernetes
// components do), so `kubectl describe pod` shows why a probe failed.
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

/** A probe's failing checks; empty when it passes. */
export type ProbeChecks = () => readonly string[];

export interface ProbeServerOptions {
  readonly port: number;
  readonly host?: string;
  readonly registry: Registry;
  /** Liveness: failing checks make the kubelet restart the container. Default: none. */
  readonly healthz?: ProbeChecks;
  /** Readiness. */
  readonly readyz: ProbeChecks;
}

function answer(checks: ProbeChecks | undefined, res: import('node:http').ServerResponse): void {
  const failing = checks?.() ?? [];
  if (failing.length === 0) res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
  else res.writeHead(503, { 'content-type': 'text/plain' }).end(failing.map((f) => `[-] ${f}\n`).join(''));
}

export async function startProbeServer(options: ProbeServerOptions): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return;
    }
    if (path === '/healthz') {
      answer(options.healthz, res);
    } else if (path === '/readyz') {
      answer(options.readyz, res);
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
