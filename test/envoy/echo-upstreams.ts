// Local TCP servers standing in for a shoot's control-plane Services (kube-apiserver,
// vpn-seed-server, ...), one per Envoy cluster, so a test can tell which shoot a connection reached.
//
// Protocol: the server stays silent until it receives the first bytes from the client, then writes
// one identification line (JSON) and echoes everything it receives. Writing only after data arrived
// makes "the client read an identification line" equivalent to "Envoy forwarded client bytes to
// this upstream" — exactly the event an RBAC filter must allow or prevent. (Envoy's tcp_proxy may
// open the upstream connection before a network RBAC filter has seen the first byte and denied it;
// such a connection never receives data, so it never identifies itself.)

import { createServer, type Server, type Socket } from 'node:net';
import { z } from 'zod';

export interface EchoIdentity {
  /** Technical ID of the shoot this upstream belongs to (or another owner, e.g. `garden`). */
  shoot: string;
  /** The Envoy cluster name the upstream serves. */
  cluster: string;
}

export interface EchoConnection {
  /** All bytes received so far on this connection. */
  received: Buffer;
}

export interface EchoUpstream {
  readonly identity: EchoIdentity;
  readonly port: number;
  /** Connections accepted so far, including ones that never carried data. */
  readonly connections: readonly EchoConnection[];
}

const IDENTITY_TAG = 'gardener-acl-echo';

const identityLineSchema = z.object({ tag: z.literal(IDENTITY_TAG), shoot: z.string(), cluster: z.string() });

export function identityLine(identity: EchoIdentity): string {
  return `${JSON.stringify({ tag: IDENTITY_TAG, shoot: identity.shoot, cluster: identity.cluster })}\n`;
}

/** Parses an identification line (without or with its trailing newline); undefined if it is none. */
export function parseIdentityLine(line: string): EchoIdentity | undefined {
  try {
    const parsed = identityLineSchema.safeParse(JSON.parse(line.trim()));
    return parsed.success ? { shoot: parsed.data.shoot, cluster: parsed.data.cluster } : undefined;
  } catch {
    return undefined;
  }
}

class EchoServer implements EchoUpstream {
  readonly connections: EchoConnection[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly server: Server = createServer((socket) => this.accept(socket));
  port = 0;

  constructor(readonly identity: EchoIdentity) {}

  private accept(socket: Socket): void {
    const connection: EchoConnection = { received: Buffer.alloc(0) };
    this.connections.push(connection);
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => {
      if (connection.received.length === 0) socket.write(identityLine(this.identity));
      connection.received = Buffer.concat([connection.received, chunk]);
      socket.write(chunk);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('echo server has no TCP address');
    this.port = address.port;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A set of echo upstreams, looked up by Envoy cluster name. */
export class EchoUpstreams {
  private constructor(private readonly byCluster: ReadonlyMap<string, EchoServer>) {}

  static async start(identities: readonly EchoIdentity[]): Promise<EchoUpstreams> {
    const servers = new Map<string, EchoServer>();
    try {
      for (const identity of identities) {
        if (servers.has(identity.cluster)) throw new Error(`duplicate echo upstream for cluster ${identity.cluster}`);
        const server = new EchoServer(identity);
        servers.set(identity.cluster, server);
        await server.listen();
      }
    } catch (error) {
      await Promise.all([...servers.values()].map((server) => server.close().catch(() => undefined)));
      throw error;
    }
    return new EchoUpstreams(servers);
  }

  get all(): EchoUpstream[] {
    return [...this.byCluster.values()];
  }

  upstream(cluster: string): EchoUpstream {
    const server = this.byCluster.get(cluster);
    if (server === undefined) throw new Error(`no echo upstream for cluster ${cluster}`);
    return server;
  }

  /** Cluster name → port, to point Envoy's STATIC clusters at the echo servers. */
  ports(): Map<string, number> {
    return new Map([...this.byCluster].map(([cluster, server]) => [cluster, server.port]));
  }

  /** Total bytes all upstreams have received; a denied connection must not change it. */
  bytesReceived(): number {
    return this.all.reduce(
      (sum, upstream) => sum + upstream.connections.reduce((inner, c) => inner + c.received.length, 0),
      0,
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.byCluster.values()].map((server) => server.close()));
  }
}
