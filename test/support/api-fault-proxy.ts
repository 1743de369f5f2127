/**
 * An HTTPS proxy in front of the test kube-apiserver that can answer in the API server's place,
 * for faults a TCP proxy cannot make: throttling (429 with Retry-After, as an API server
 * answers while its storage (re)initializes or under priority-and-fairness limits) and slow
 * errors (5xx after a delay). Every request it receives is counted with its arrival time.
 *
 * It terminates TLS with a serving certificate of the cluster CA (clients keep verifying with
 * the same kubeconfig CA), asks for the client's certificate, and forwards with the admin
 * credentials impersonating the client's user and groups, so RBAC still judges the client.
 */
import { X509Certificate } from 'node:crypto';
import type http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';

import { KubeConfig } from '@kubernetes/client-node';

import { issueServingCert, type ControlPlane } from '../kube/control-plane.js';

export type FaultMode =
  | { kind: 'forward' }
  | { kind: 'throttle'; retryAfterSeconds: number }
  | { kind: 'slow-error'; status: number; delayMs: number }
  // Watches go half-open: open ones stop delivering (the connection stays up), new ones are
  // accepted and never deliver; other requests pass. Stalled watches stay stalled for good.
  | { kind: 'stall-watches' }
  // Requests reach the API server at once (writes take effect), their responses come back
  // `delayMs` later (watches are not delayed): a client that believes its writes still in flight.
  | { kind: 'delay-responses'; delayMs: number };

export interface ApiFaultProxy {
  readonly url: string;
  /** A copy of `kc` (same credentials) whose current cluster points at the proxy. */
  kubeConfigVia(kc: KubeConfig): KubeConfig;
  setMode(mode: FaultMode): void;
  /** Arrival times (ms, performance.now()) and paths of every request received. */
  readonly requests: readonly { at: number; method: string; path: string; watch: boolean }[];
  close(): Promise<void>;
}

/** CN and O entries of a client certificate subject ("CN=x\nO=a\nO=b"). */
function subjectOf(cert: X509Certificate): { user?: string; groups: string[] } {
  const lines = cert.subject.split('\n');
  const user = lines.find((l) => l.startsWith('CN='))?.slice(3);
  return { ...(user ? { user } : {}), groups: lines.filter((l) => l.startsWith('O=')).map((l) => l.slice(2)) };
}

export async function startApiFaultProxy(cp: ControlPlane): Promise<ApiFaultProxy> {
  let mode: FaultMode = { kind: 'forward' };
  const requests: { at: number; method: string; path: string; watch: boolean }[] = [];
  const serving = await issueServingCert(cp.ca, { commonName: 'api-fault-proxy', ips: ['127.0.0.1'] });
  const admin: https.RequestOptions = {};
  await cp.kubeConfig.applyToHTTPSOptions(admin);
  const target = new URL(cp.server);
  // No keep-alive upstream: a pooled connection the API server closed as idle would make the
  // proxy hang up on its client, a fault of the proxy, not one the test injects.
  const agent = new https.Agent({ keepAlive: false });
  /** Open watch responses, so that `stall-watches` can cut their flow. */
  const openWatches = new Set<{ up: http.IncomingMessage; res: http.ServerResponse }>();

  const server = https.createServer({ cert: serving.cert, key: serving.key, ca: cp.ca.cert, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const path = req.url ?? '/';
    const isWatch = /[?&]watch=(true|1)/.test(path);
    requests.push({ at: performance.now(), method: req.method ?? 'GET', path, watch: isWatch });
    const status = (code: number, message: string, headers: Record<string, string> = {}) => {
      res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, message, reason: code === 429 ? 'TooManyRequests' : 'ServiceUnavailable' }));
    };
    const current = mode;
    if (current.kind === 'throttle') {
      req.resume();
      status(429, 'storage is (re)initializing', { 'Retry-After': String(current.retryAfterSeconds) });
      return;
    }
    if (current.kind === 'slow-error') {
      req.resume();
      setTimeout(() => status(current.status, 'injected slow error'), current.delayMs);
      return;
    }
    const peer = (req.socket as TLSSocket).getPeerX509Certificate();
    const identity = peer ? subjectOf(peer) : { groups: [] };
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) if (value !== undefined && !/^impersonate-/i.test(name)) headers[name] = value;
    if (identity.user) {
      headers['impersonate-user'] = identity.user;
      if (identity.groups.length > 0) headers['impersonate-group'] = identity.groups;
    }
    headers['host'] = target.host;
    const upstream = https.request(
      { protocol: 'https:', hostname: target.hostname, port: target.port, path, method: req.method, headers, cert: admin.cert, key: admin.key, ca: admin.ca, agent },
      (up) => {
        const delay = !isWatch && current.kind === 'delay-responses' ? current.delayMs : 0;
        if (delay > 0) {
          up.pause();
          setTimeout(() => {
            if (res.destroyed) return;
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
          }, delay);
          up.on('error', () => res.destroy());
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        // The API server sends a watch's headers at once, events maybe minutes later: without
        // this, Node holds the headers back until the first event and the client sees nothing.
        res.flushHeaders();
        if (isWatch && mode.kind === 'stall-watches') {
          // Accepted, then silent: headers go out, events never do.
          up.resume();
          res.on('close', () => up.destroy());
          return;
        }
        up.pipe(res);
        if (isWatch) {
          const entry = { up, res };
          openWatches.add(entry);
          res.on('close', () => openWatches.delete(entry));
        }
        // An API server that goes away mid-response (restart) closes its connections: so does
        // the proxy, or every watch through it would hang half-open.
        up.on('error', () => res.destroy());
        up.on('close', () => {
          if (!up.complete) res.destroy();
        });
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    kubeConfigVia(kc) {
      const copy = new KubeConfig();
      copy.loadFromString(kc.exportConfig());
      const current = copy.getCurrentCluster();
      if (!current) throw new Error('kubeconfig has no current cluster');
      copy.clusters = copy.clusters.map((c) => (c.name === current.name ? { ...c, server: url } : c));
      return copy;
    },
    setMode(next) {
      mode = next;
      if (next.kind === 'stall-watches') {
        for (const { up, res } of openWatches) {
          up.unpipe(res);
          up.resume(); // drained and dropped: the client sees silence on a live connection
        }
        openWatches.clear();
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
