// Clients that play the shoot side (and attackers) against a live gateway Envoy:
// a PROXY protocol v2 encoder, a TLS ClientHello probe for the SNI listener, and raw HTTP/1.1
// (CONNECT) requests for the HTTP-CONNECT listeners.
//
// Client addresses come only from PROXY headers (arbitrary bytes in a header, never contacted) or
// from loopback source addresses. Every socket this module opens goes to a loopback address and is
// bound to a loopback address if bound at all; anything else throws before a packet is sent.

import { isIPv4, isIPv6, connect as netConnect, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { parseIdentityLine, type EchoIdentity } from './echo-upstreams.js';

const DEFAULT_TIMEOUT_MS = 5_000;

// ---------------------------------------------------------------------------------------------
// Addresses

function ipv4Bytes(address: string): Buffer {
  if (!isIPv4(address)) throw new Error(`not an IPv4 address: ${address}`);
  return Buffer.from(address.split('.').map(Number));
}

function ipv6Bytes(address: string): Buffer {
  if (!isIPv6(address) || address.includes('%')) throw new Error(`not an IPv6 address without zone: ${address}`);
  let text = address;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    // Dotted IPv4 tail (e.g. ::ffff:10.1.2.3): rewrite it as two hex groups.
    const v4 = ipv4Bytes(tail);
    text = `${text.slice(0, lastColon + 1)}${v4.readUInt16BE(0).toString(16)}:${v4.readUInt16BE(2).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const restGroups = rest === undefined || rest === '' ? [] : rest.split(':');
  const zeros = rest === undefined ? 0 : 8 - headGroups.length - restGroups.length;
  const groups = [...headGroups, ...Array<string>(zeros).fill('0'), ...restGroups];
  const bytes = Buffer.alloc(16);
  groups.forEach((group, index) => bytes.writeUInt16BE(parseInt(group, 16), index * 2));
  return bytes;
}

export function isLoopbackAddress(address: string): boolean {
  if (isIPv4(address)) return address.startsWith('127.');
  if (!isIPv6(address) || address.includes('%')) return false;
  const bytes = ipv6Bytes(address);
  return bytes.subarray(0, 15).every((byte) => byte === 0) && bytes[15] === 1;
}

function assertLoopback(address: string, role: string): void {
  if (!isLoopbackAddress(address)) {
    throw new Error(`refusing to use ${address} as ${role}: test clients only talk between loopback addresses`);
  }
}

// ---------------------------------------------------------------------------------------------
// PROXY protocol v2 (haproxy proxy-protocol.txt, section 2.2)

export interface ProxyEndpoint {
  address: string;
  port: number;
}

export interface ProxyV2Options {
  source: ProxyEndpoint;
  destination: ProxyEndpoint;
  /**
   * Address family of the header. Default: TCP4 if both addresses are IPv4, else TCP6 (an IPv4
   * address in a TCP6 header is written IPv4-mapped, ::ffff:a.b.c.d). Force TCP6 to send IPv4
   * clients the way a dual-stack load balancer may.
   */
  family?: 'TCP4' | 'TCP6';
}

const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const PROXY_V2_COMMAND_PROXY = 0x21; // version 2, command PROXY
const PROXY_V2_TCP4 = 0x11;
const PROXY_V2_TCP6 = 0x21;

function asIpv6Bytes(address: string): Buffer {
  return isIPv4(address) ? ipv6Bytes(`::ffff:${address}`) : ipv6Bytes(address);
}

function portBytes(port: number): Buffer {
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port ${port}`);
  const bytes = Buffer.alloc(2);
  bytes.writeUInt16BE(port);
  return bytes;
}

export function encodeProxyV2Header(options: ProxyV2Options): Buffer {
  const { source, destination } = options;
  const bothIpv4 = isIPv4(source.address) && isIPv4(destination.address);
  const family = options.family ?? (bothIpv4 ? 'TCP4' : 'TCP6');
  if (family === 'TCP4' && !bothIpv4) throw new Error('a TCP4 PROXY header needs two IPv4 addresses');
  const addresses =
    family === 'TCP4'
      ? [ipv4Bytes(source.address), ipv4Bytes(destination.address)]
      : [asIpv6Bytes(source.address), asIpv6Bytes(destination.address)];
  const body = Buffer.concat([...addresses, portBytes(source.port), portBytes(destination.port)]);
  const length = Buffer.alloc(2);
  length.writeUInt16BE(body.length);
  const familyByte = family === 'TCP4' ? PROXY_V2_TCP4 : PROXY_V2_TCP6;
  return Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([PROXY_V2_COMMAND_PROXY, familyByte]), length, body]);
}

// Documentation addresses (RFC 5737 / RFC 3849): only ever bytes inside a PROXY header.
const PLACEHOLDER_DESTINATION_V4: ProxyEndpoint = { address: '192.0.2.1', port: 443 };
const PLACEHOLDER_DESTINATION_V6: ProxyEndpoint = { address: '2001:db8::1', port: 443 };

/** A PROXY v2 header claiming the client is `sourceAddress` (the usual case on PROXY-protocol seeds). */
export function proxyV2From(sourceAddress: string, destination?: ProxyEndpoint): Buffer {
  const defaultDestination = isIPv4(sourceAddress) ? PLACEHOLDER_DESTINATION_V4 : PLACEHOLDER_DESTINATION_V6;
  return encodeProxyV2Header({ source: { address: sourceAddress, port: 40_000 }, destination: destination ?? defaultDestination });
}

// ---------------------------------------------------------------------------------------------
// Raw connections

export interface GatewayTarget {
  /** Loopback address of the Envoy listener. */
  host: string;
  port: number;
  /** Loopback source address to bind (e.g. 127.0.0.5 or ::1), the client IP Envoy sees without PROXY header. */
  localAddress?: string;
  /** Bytes sent before anything else, normally `proxyV2From(...)`. */
  proxyHeader?: Buffer;
  timeoutMs?: number;
}

async function openConnection(target: GatewayTarget): Promise<Socket> {
  assertLoopback(target.host, 'destination');
  if (target.localAddress !== undefined) assertLoopback(target.localAddress, 'source');
  const timeoutMs = target.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const socket = netConnect({ host: target.host, port: target.port, localAddress: target.localAddress });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`connect to ${target.host}:${target.port} timed out`)), timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  } catch (error) {
    socket.destroy();
    throw error;
  }
  if (target.proxyHeader !== undefined) socket.write(target.proxyHeader);
  return socket;
}

/** Accumulates what a socket receives, so callers can await "a line" or "N more bytes". */
class ReceivedBytes {
  private buffer = Buffer.alloc(0);
  private closed = false;
  private wake: (() => void) | undefined;

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.feed(chunk));
    socket.on('close', () => this.close());
    socket.on('error', () => this.close());
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  feed(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    this.notify();
  }

  close(): void {
    this.closed = true;
    this.notify();
  }

  /** Resolves with the consumed bytes once `take` finds enough, or with undefined once the peer closed. */
  private async consume(what: string, deadline: number, take: (buffer: Buffer) => number | undefined): Promise<Buffer | undefined> {
    for (;;) {
      const length = take(this.buffer);
      if (length !== undefined) {
        const consumed = this.buffer.subarray(0, length);
        this.buffer = this.buffer.subarray(length);
        return consumed;
      }
      if (this.closed) return undefined;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  async until(delimiter: string, deadline: number): Promise<Buffer | undefined> {
    return this.consume(JSON.stringify(delimiter), deadline, (buffer) => {
      const index = buffer.indexOf(delimiter);
      return index < 0 ? undefined : index + delimiter.length;
    });
  }

  async bytes(count: number, deadline: number): Promise<Buffer | undefined> {
    return this.consume(`${count} bytes`, deadline, (buffer) => (buffer.length >= count ? count : undefined));
  }
}

async function readIdentity(received: ReceivedBytes, deadline: number): Promise<EchoIdentity | undefined> {
  const line = await received.until('\n', deadline);
  if (line === undefined) return undefined;
  const identity = parseIdentityLine(line.toString('utf8'));
  if (identity === undefined) throw new Error(`upstream sent something other than an echo identity: ${line.toString('utf8')}`);
  return identity;
}

// ---------------------------------------------------------------------------------------------
// Plain TCP (legacy apiserver-proxy port: the shoot's proxy forwards opaque bytes)

export interface TcpProbeOptions extends GatewayTarget {
  /** First bytes after the PROXY header. Default: a short text line. */
  payload?: Buffer;
}

export interface ProbeResult {
  /** The upstream that received the client's first bytes, or undefined if Envoy closed the connection first. */
  reached: EchoIdentity | undefined;
}

/** Opens a connection, lets `send` write the client's first bytes, reads the echo identity, cleans up. */
async function probeUpstream(target: GatewayTarget, send: (socket: Socket) => () => void): Promise<ProbeResult> {
  const deadline = Date.now() + (target.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const socket = await openConnection(target);
  const received = new ReceivedBytes(socket);
  const cleanUp = send(socket);
  try {
    return { reached: await readIdentity(received, deadline) };
  } finally {
    cleanUp();
    socket.destroy();
  }
}

export async function probeTcp(options: TcpProbeOptions): Promise<ProbeResult> {
  return probeUpstream(options, (socket) => {
    socket.write(options.payload ?? Buffer.from('gardener-acl-tcp-probe\n'));
    return () => undefined;
  });
}

// ---------------------------------------------------------------------------------------------
// TLS (SNI listener)

export interface TlsProbeOptions extends GatewayTarget {
  sni: string;
}

/**
 * Sends a real TLS ClientHello with the given SNI (node:tls over the pre-connected socket, after an
 * optional PROXY header) and reports which echo upstream Envoy forwarded it to. The raw bytes from
 * Envoy are tapped before TLS sees them: the echo's identification line is not TLS, so the handshake
 * itself always fails; that failure is expected and ignored.
 */
export async function probeTls(options: TlsProbeOptions): Promise<ProbeResult> {
  return probeUpstream(options, (raw) => {
    const tap = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        raw.write(chunk, callback);
      },
      final(callback) {
        raw.end();
        callback();
      },
      destroy(error, callback) {
        raw.destroy();
        callback(error);
      },
    });
    raw.on('data', (chunk: Buffer) => tap.push(chunk));
    raw.on('end', () => tap.push(null));
    // No certificate can be checked: the upstream is a plain echo, the handshake is never completed.
    const tls = tlsConnect({ socket: tap, servername: options.sni, rejectUnauthorized: false });
    tls.on('error', () => undefined);
    return () => tls.destroy();
  });
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 (HTTP-CONNECT listeners)

/** Header lines in wire order; names keep their casing, repeats are separate lines. */
export type HeaderList = ReadonlyArray<readonly [name: string, value: string]>;

export interface HttpRequestOptions extends GatewayTarget {
  method: string;
  /** Request target: `host:port` for CONNECT, a path otherwise. */
  target: string;
  /** Sent verbatim, in order (no validation, so tests can send odd casing, repeats or junk). */
  headers?: HeaderList;
}

export interface HttpResponse {
  status: number;
  headers: Array<[name: string, value: string]>;
  body: string;
}

const MAX_BODY_BYTES = 64 * 1024;

export function headerValue(response: HttpResponse, name: string): string | undefined {
  return response.headers.find(([candidate]) => candidate.toLowerCase() === name.toLowerCase())?.[1];
}

function requestHead(options: HttpRequestOptions): string {
  const lines = [`${options.method} ${options.target} HTTP/1.1`, ...(options.headers ?? []).map(([n, v]) => `${n}: ${v}`)];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

function parseResponseHead(head: string): Omit<HttpResponse, 'body'> {
  const [statusLine = '', ...headerLines] = head.split('\r\n').filter((line) => line !== '');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  if (match?.[1] === undefined) throw new Error(`not an HTTP/1.x response: ${JSON.stringify(statusLine)}`);
  const headers = headerLines.map((line): [string, string] => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon).trim(), line.slice(colon + 1).trim()];
  });
  return { status: Number(match[1]), headers };
}

interface OpenExchange {
  socket: Socket;
  received: ReceivedBytes;
  response: Omit<HttpResponse, 'body'>;
  deadline: number;
}

async function exchangeHead(options: HttpRequestOptions): Promise<OpenExchange> {
  const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const socket = await openConnection(options);
  const received = new ReceivedBytes(socket);
  // latin1: one byte per character, so a test can send bytes that are not UTF-8.
  socket.write(requestHead(options), 'latin1');
  const head = await received.until('\r\n\r\n', deadline);
  if (head === undefined) {
    socket.destroy();
    throw new Error(`connection closed before an HTTP response to ${options.method} ${options.target}`);
  }
  return { socket, received, response: parseResponseHead(head.toString('latin1')), deadline };
}

async function readBody(exchange: OpenExchange): Promise<string> {
  const length = Number(headerValue({ ...exchange.response, body: '' }, 'content-length') ?? '0');
  if (!Number.isInteger(length) || length <= 0) return '';
  const body = await exchange.received.bytes(Math.min(length, MAX_BODY_BYTES), exchange.deadline);
  return body?.toString('utf8') ?? '';
}

/** One raw HTTP/1.1 request; returns status, headers (wire order) and a Content-Length body. */
export async function sendHttpRequest(options: HttpRequestOptions): Promise<HttpResponse> {
  const exchange = await exchangeHead(options);
  try {
    return { ...exchange.response, body: await readBody(exchange) };
  } finally {
    exchange.socket.destroy();
  }
}

export interface ConnectOptions extends GatewayTarget {
  /** CONNECT target; Gardener's shoots send `<api fqdn>:443` and the seed ignores it. */
  authority?: string;
  /** Sent verbatim and in order; a `Host: <authority>` line goes first unless the list has a Host header. */
  headers?: HeaderList;
}

export interface ConnectResult extends HttpResponse {
  /** On 200: the upstream at the far end of the tunnel (undefined if the tunnel closed without data). */
  tunnel: EchoIdentity | undefined;
}

const PROBE_LINE = 'gardener-acl-probe\n';

/**
 * `CONNECT authority HTTP/1.1` with the given headers. On 200 a probe line is sent through the
 * tunnel and the echo upstream's identification line is read back.
 */
export async function httpConnect(options: ConnectOptions): Promise<ConnectResult> {
  const authority = options.authority ?? 'api.shoot.example.test:443';
  const headers = options.headers ?? [];
  const hasHost = headers.some(([name]) => name.toLowerCase() === 'host');
  const exchange = await exchangeHead({
    ...options,
    method: 'CONNECT',
    target: authority,
    headers: hasHost ? headers : [['Host', authority], ...headers],
  });
  try {
    if (exchange.response.status !== 200) {
      return { ...exchange.response, body: await readBody(exchange), tunnel: undefined };
    }
    exchange.socket.write(PROBE_LINE);
    return { ...exchange.response, body: '', tunnel: await readIdentity(exchange.received, exchange.deadline) };
  } finally {
    exchange.socket.destroy();
  }
}
