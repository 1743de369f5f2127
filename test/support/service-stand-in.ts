// Stand-ins for what a seed's nodes do around a webhook Deployment, since no kubelet, endpoints
// controller or kube-proxy runs here:
// - ServiceStandIn: one loopback address for several replicas. Like kube-proxy with the
//   EndpointSlice controller, it sends each new connection to a ready backend (readiness polled
//   from /readyz, as the kubelet probes it) and leaves established connections alone.
// - SecretVolumeStandIn: a Secret projected into a directory the way the kubelet's atomic writer
//   does it (a new timestamped directory, then the `..data` symlink swapped), polled from the API.
import { mkdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, connect, type Server, type Socket } from 'node:net';
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { getObject } from '../../src/kube/objects-client.js';

interface Backend {
  readonly port: number;
  readonly probePort: number;
  ready: boolean;
}

export class ServiceStandIn {
  private readonly backends = new Map<string, Backend>();
  private server: Server | undefined;
  private timer: NodeJS.Timeout | undefined;
  private next = 0;
  /** Connections that found no ready backend (each would fail an admission call). */
  refused = 0;
  port = 0;

  async start(probeIntervalMs = 250): Promise<void> {
    this.server = createServer((client) => this.route(client));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    this.timer = setInterval(() => void this.probe(), probeIntervalMs);
  }

  add(name: string, port: number, probePort: number): void {
    this.backends.set(name, { port, probePort, ready: false });
  }

  remove(name: string): void {
    this.backends.delete(name);
  }

  ready(name: string): boolean {
    return this.backends.get(name)?.ready ?? false;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  private async probe(): Promise<void> {
    await Promise.all(
      [...this.backends.values()].map(async (b) => {
        try {
          b.ready = (await fetch(`http://127.0.0.1:${b.probePort}/readyz`, { signal: AbortSignal.timeout(1_000) })).ok;
        } catch {
          b.ready = false;
        }
      }),
    );
  }

  private route(client: Socket): void {
    const ready = [...this.backends.values()].filter((b) => b.ready);
    const backend = ready[this.next++ % Math.max(1, ready.length)];
    if (!backend) {
      this.refused++;
      client.destroy();
      return;
    }
    const upstream = connect(backend.port, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  }
}

export class SecretVolumeStandIn {
  private timer: NodeJS.Timeout | undefined;
  private written = '';
  private generation = 0;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly secret: { namespace: string; name: string },
    readonly dir: string,
  ) {}

  /** Projects the Secret once it exists, then keeps following it. */
  async start(pollMs = 500): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (;;) {
      if (await this.sync()) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    this.timer = setInterval(() => void this.sync(), pollMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async sync(): Promise<boolean> {
    const secret = await getObject(this.kubeConfig, { apiVersion: 'v1', kind: 'Secret', ...this.secret });
    const data = secret?.['data'] as Record<string, string> | undefined;
    if (!data) return false;
    const serialized = JSON.stringify(data);
    if (serialized === this.written) return true;
    const version = path.join(this.dir, `..${Date.now()}_${this.generation++}`);
    await mkdir(version);
    for (const [key, value] of Object.entries(data)) await writeFile(path.join(version, key), Buffer.from(value, 'base64'));
    const previous = await readlink(path.join(this.dir, '..data')).catch(() => undefined);
    await symlink(path.basename(version), path.join(this.dir, '..data_tmp'));
    await rename(path.join(this.dir, '..data_tmp'), path.join(this.dir, '..data'));
    for (const key of Object.keys(data)) await symlink(path.join('..data', key), path.join(this.dir, key)).catch(() => undefined);
    if (previous) await rm(path.join(this.dir, previous), { recursive: true, force: true });
    this.written = serialized;
    return true;
  }
}
