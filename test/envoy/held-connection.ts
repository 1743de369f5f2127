// A raw connection through Envoy to an echo upstream that stays open, for the tests that change
// the configuration under open connections and watch which ones Envoy closes.
import { connect as netConnect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { isLoopbackAddress, proxyV2From } from './clients.js';
import { parseIdentityLine, type EchoIdentity } from './echo-upstreams.js';
import type { BoundAddress } from './envoy-process.js';

const IO_TIMEOUT_MS = 3_000;

/** A CONNECT request with the client's PROXY v2 header in front. */
export function connectRequestBytes(client: string, destination: string, header: string): Buffer {
  const head = `CONNECT api.shoot.example.test:443 HTTP/1.1\r\nHost: api.shoot.example.test:443\r\n${header}: ${destination}\r\n\r\n`;
  return Buffer.concat([proxyV2From(client), Buffer.from(head)]);
}

/**
 * A raw connection through Envoy to an echo upstream that stays open, so the test can see when
 * Envoy closes it and whether it still carries data. Only ever connects to loopback.
 */
export class HeldConnection {
  private received = '';
  private closedAtMs: number | undefined;
  private wake: () => void = () => undefined;
  private probes = 0;

  private constructor(
    readonly label: string,
    private readonly socket: Socket,
  ) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.received += chunk;
      this.wake();
    });
    socket.on('close', () => {
      this.closedAtMs = performance.now();
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static async open(label: string, endpoint: BoundAddress, firstBytes: Buffer): Promise<HeldConnection> {
    if (!isLoopbackAddress(endpoint.host)) throw new Error(`refusing to connect to ${endpoint.host}`);
    const socket = netConnect({ host: endpoint.host, port: endpoint.port });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.write(firstBytes);
    return new HeldConnection(label, socket);
  }

  /** performance.now() when Envoy closed the connection, if it did. */
  get closedAt(): number | undefined {
    return this.closedAtMs;
  }

  /** Waits until the bytes received so far contain `text`; false if the connection closed or time ran out. */
  private async waitFor(text: string, timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (!this.received.includes(text)) {
      const remaining = deadline - performance.now();
      if (this.closedAtMs !== undefined || remaining <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return true;
  }

  /** The status line of the CONNECT response, once the whole head arrived. */
  async connectStatus(): Promise<string> {
    if (!(await this.waitFor('\r\n\r\n', IO_TIMEOUT_MS))) throw new Error(`${this.label}: no CONNECT response`);
    return this.received.slice(0, this.received.indexOf('\r\n'));
  }

  /** Sends a line and reads back the upstream's identity, which it writes when the first bytes arrive. */
  async identity(): Promise<EchoIdentity | undefined> {
    if (!(await this.echoes())) return undefined;
    const line = this.received.split('\n').find((candidate) => parseIdentityLine(candidate) !== undefined);
    return line === undefined ? undefined : parseIdentityLine(line);
  }

  /** Whether a fresh line written now comes back from the echo upstream through Envoy. */
  async echoes(): Promise<boolean> {
    if (this.closedAtMs !== undefined) return false;
    this.probes += 1;
    const line = `${this.label} probe ${this.probes}\n`;
    this.socket.write(line);
    return this.waitFor(line, IO_TIMEOUT_MS);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

