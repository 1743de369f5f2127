// A client for the filter chains on which Istio terminates TLS (Gardener's HTTPS Gateway servers:
// kube-apiserver with Istio TLS termination, observability hosts 1.141+): optional PROXY v2
// header, a complete TLS handshake with the given SNI, then one HTTP/1.1 request carrying a
// marker. A network RBAC filter decides on the first decrypted bytes, so a denied client sees
// the handshake succeed and the connection close without a response; an admitted one gets an
// HTTP response (whatever the upstream made of it) and its request reaches an upstream.
//
// Like test/envoy/clients.ts it only ever talks between loopback addresses.

import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { isLoopbackAddress, type GatewayTarget } from '../envoy/clients.js';

const DEFAULT_TIMEOUT_MS = 5_000;

export interface HttpsProbeOptions extends GatewayTarget {
  sni: string;
  /** Sent as the request path, so the upstream that received the request can be found. */
  marker: string;
}

export interface HttpsProbeResult {
  /** CN of the certificate Envoy presented (the throwaway certificates carry the credential name). */
  readonly servedCertificate: string | undefined;
  /** The HTTP status, or undefined if the connection closed without a response (RBAC denial). */
  readonly status: number | undefined;
}

function assertLoopback(address: string, role: string): void {
  if (!isLoopbackAddress(address)) throw new Error(`refusing to use ${address} as ${role}: test clients only talk between loopback addresses`);
}

async function connected(target: GatewayTarget, deadline: number): Promise<Socket> {
  assertLoopback(target.host, 'destination');
  if (target.localAddress !== undefined) assertLoopback(target.localAddress, 'source');
  const socket = netConnect({ host: target.host, port: target.port, localAddress: target.localAddress });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`connect to ${target.host}:${target.port} timed out`)), deadline - Date.now());
    socket.once('connect', () => (clearTimeout(timer), resolve()));
    socket.once('error', (error) => (clearTimeout(timer), reject(error)));
  }).catch((error: unknown) => {
    socket.destroy();
    throw error;
  });
  if (target.proxyHeader !== undefined) socket.write(target.proxyHeader);
  return socket;
}

async function handshake(tls: TLSSocket, deadline: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('TLS handshake timed out')), deadline - Date.now());
    tls.once('secureConnect', () => (clearTimeout(timer), resolve()));
    tls.once('error', (error) => (clearTimeout(timer), reject(error)));
  });
}

/** Reads until a complete status line arrives or the peer closes; the status, or undefined on close. */
async function statusOrClose(tls: TLSSocket, deadline: number): Promise<number | undefined> {
  return new Promise<number | undefined>((resolve, reject) => {
    let received = '';
    const timer = setTimeout(() => reject(new Error('no HTTP response and no close before the deadline')), deadline - Date.now());
    const finish = (value: number | undefined): void => {
      clearTimeout(timer);
      resolve(value);
    };
    tls.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const line = /^HTTP\/1\.[01] (\d{3})/.exec(received);
      if (line?.[1] !== undefined) finish(Number(line[1]));
    });
    tls.once('end', () => finish(undefined));
    tls.once('close', () => finish(undefined));
    // A reset after the handshake is the same verdict as a close: no response.
    tls.once('error', () => finish(undefined));
  });
}

export async function probeHttps(options: HttpsProbeOptions): Promise<HttpsProbeResult> {
  const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const socket = await connected(options, deadline);
  // The certificates are throwaway stand-ins; which one was served is checked by its CN instead.
  const tls = tlsConnect({ socket, servername: options.sni, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
  try {
    await handshake(tls, deadline);
    const servedCertificate = tls.getPeerCertificate().subject?.CN;
    const response = statusOrClose(tls, deadline);
    tls.write(`GET /${options.marker} HTTP/1.1\r\nHost: ${options.sni}\r\nConnection: close\r\n\r\n`);
    return { servedCertificate: typeof servedCertificate === 'string' ? servedCertificate : undefined, status: await response };
  } finally {
    tls.destroy();
    socket.destroy();
  }
}
