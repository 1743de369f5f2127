// One ingress gateway of a seed served live by Istio's own discovery server: `istio-render serve`
// (tools/istio-render/serve.go) runs pilot's xDS server on loopback with the seed's objects, and a
// real Envoy takes listeners, routes, clusters and ECDS resources from it over delta ADS, as a
// gateway takes them from istiod. Changing the EnvoyFilters in Istio's config store makes Istio
// push, exactly as after a write to the API server.
//
// The serve tool changes what a stock Envoy on loopback cannot take (the same changes as
// istio-bootstrap.ts makes to a static render; listed in serve.go): listeners on loopback port 0,
// Istio-only filters dropped, SDS secrets served as static throwaway secrets, every cluster with
// endpoints pointed at an echo server named like it. Which echo servers and secrets are needed is
// read from a static render of the same objects (istio-bootstrap.ts's plan).

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { isLoopbackAddress } from '../envoy/clients.js';
import { EchoUpstreams } from '../envoy/echo-upstreams.js';
import type { EnvoyVersion } from '../envoy/envoy-binary.js';
import { startEnvoy, type BoundAddress } from '../envoy/envoy-process.js';
import { INTERNAL_LISTENER_EXTENSION, ISTIO_PROXY_RUNTIME, staticCluster } from '../envoy/gardener-gateway.js';
import { getString, type JsonObject } from '../envoy/json.js';
import { killOnExit } from '../support/child-processes.js';
import { planStaticGateway } from './istio-bootstrap.js';
import { findIstioRenderBinary, istioInputDocuments, proxyArguments, renderGatewayWithIstio, type GatewayProxy } from './istio-render.js';
import { endpointByLogicalPort, listenerNamesByPort, type IstioGateway } from './istio-rendered-gateway.js';
import { staticSecrets } from './throwaway-certs.js';

const XDS_CLUSTER = 'xds-grpc';
const SERVE_READY_MS = 120_000;
const REPLY_MS = 60_000;
const STOP_GRACE_MS = 5_000;

export interface LiveAdsGatewayOptions {
  /** Kubernetes and Istio objects, as for renderGatewayWithIstio. */
  readonly objects: readonly JsonObject[];
  readonly proxy: GatewayProxy;
  readonly envoyVersion?: EnvoyVersion;
  /** Envoy's `--drain-time-s` (default 1). */
  readonly drainTimeSeconds?: number;
  /** false: do not wait for Envoy to be LIVE with its listeners (a test of a server that may never get there). */
  readonly awaitLive?: boolean;
}

/** What IstioGateway offers (without file-based LDS), and Istio's config store to change. */
export interface LiveAdsGateway extends Omit<IstioGateway, 'replaceListeners'> {
  /**
   * Makes the EnvoyFilters in Istio's config store exactly those among `objects` (other kinds are
   * ignored); Istio's event handlers then push. Resolves with the number of creates, updates and
   * deletes once the store holds them (the push follows after Istio's debounce).
   */
  replaceEnvoyFilters(objects: readonly JsonObject[]): Promise<number>;
  /** As replaceEnvoyFilters, for every kind in `kinds` (EnvoyFilter, Gateway, VirtualService, DestinationRule). */
  replaceIstioConfig(objects: readonly JsonObject[], kinds: readonly IstioReplaceableKind[]): Promise<number>;
  /** Envoy's admin /config_dump. */
  configDump(): Promise<JsonObject>;
  /** What the serve tool wrote to stderr (bounded). */
  serveLog(): string;
}

/** The serve tool's first line (see serve.go). */
export type IstioReplaceableKind = 'EnvoyFilter' | 'Gateway' | 'VirtualService' | 'DestinationRule';

export const readySchema = z.object({ xds: z.string(), node: z.record(z.string(), z.json()) });
const replySchema = z.object({ applied: z.number().optional(), error: z.string().optional() });

/** The serve tool's process: one JSON line out per line in. Exported for benches that drive `istio-render serve` with their own flags (bench/istiod-push.ts). */
export class ServeProcess {
  private readonly lines: string[] = [];
  private waiting: ((line: string | undefined) => void) | undefined;
  private stderr = '';
  private ended = false;
  private readonly exited: Promise<void>;

  constructor(readonly child: ChildProcessWithoutNullStreams) {
    killOnExit(child);
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    createInterface({ input: child.stdout }).on('line', (line) => this.deliver(line));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-64 * 1024);
    });
    child.once('exit', () => {
      this.ended = true;
      this.deliver(undefined);
    });
  }

  private deliver(line: string | undefined): void {
    const waiter = this.waiting;
    this.waiting = undefined;
    if (waiter) waiter(line);
    else if (line !== undefined) this.lines.push(line);
  }

  log(): string {
    return this.stderr;
  }

  async nextLine(what: string, timeoutMs: number): Promise<string> {
    const queued = this.lines.shift();
    if (queued !== undefined) return queued;
    if (this.ended) throw new Error(`istio-render serve exited before ${what}:\n${this.stderr.slice(-4_000)}`);
    const line = await new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.waiting = undefined;
        resolve(undefined);
      }, timeoutMs);
      this.waiting = (l) => {
        clearTimeout(timer);
        resolve(l);
      };
    });
    if (line === undefined) throw new Error(`istio-render serve: no ${what} (${this.ended ? 'exited' : `${timeoutMs} ms`}):\n${this.stderr.slice(-4_000)}`);
    return line;
  }

  async stop(): Promise<void> {
    this.child.stdin.end(); // the tool exits when stdin closes
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
  }
}

/** An Envoy bootstrap taking listeners, clusters (and the ECDS resources they name) over delta ADS from the serve tool at `xds`. */
export function xdsBootstrap(node: JsonObject, xds: BoundAddress, secrets: readonly JsonObject[]): JsonObject {
  return {
    node,
    dynamic_resources: {
      ads_config: { api_type: 'DELTA_GRPC', transport_api_version: 'V3', grpc_services: [{ envoy_grpc: { cluster_name: XDS_CLUSTER } }] },
      lds_config: { ads: {}, resource_api_version: 'V3' },
      cds_config: { ads: {}, resource_api_version: 'V3' },
    },
    static_resources: {
      clusters: [
        {
          ...staticCluster(XDS_CLUSTER, xds.port),
          typed_extension_protocol_options: {
            'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
              '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
              explicit_http_config: { http2_protocol_options: {} },
            },
          },
        },
      ],
      secrets: [...secrets],
    },
    layered_runtime: ISTIO_PROXY_RUNTIME,
    bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION],
  };
}

/** The serve tool's `xds` address; refuses anything outside 127.0.0.0/8. */
export function parseAddress(address: string): BoundAddress {
  const match = /^(127(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(address);
  if (match?.[1] === undefined || match[2] === undefined || !isLoopbackAddress(match[1])) throw new Error(`istio-render serve listens on ${address}, not on 127.0.0.0/8`);
  return { host: match[1], port: Number(match[2]), family: 4 };
}

export async function startLiveAdsGateway(options: LiveAdsGatewayOptions): Promise<LiveAdsGateway> {
  const binary = findIstioRenderBinary();
  const render = await renderGatewayWithIstio(options.objects, options.proxy);
  const plan = planStaticGateway(render);
  const listenersByPort = listenerNamesByPort(plan.listeners);
  const clusters = new Set(render.clusters.map((cluster) => getString(cluster, 'name') ?? ''));
  const dir = await mkdtemp(join(tmpdir(), 'gardener-acl-live-ads-'));
  const echo = await EchoUpstreams.start(plan.upstreams);
  let serve: ServeProcess | undefined;
  try {
    await writeFile(join(dir, 'objects.yaml'), istioInputDocuments(options.objects));
    await writeFile(join(dir, 'upstreams.json'), JSON.stringify(Object.fromEntries(echo.ports())));
    serve = new ServeProcess(spawn(binary, ['serve', ...proxyArguments(options.proxy), '--upstreams', join(dir, 'upstreams.json'), join(dir, 'objects.yaml')], { stdio: ['pipe', 'pipe', 'pipe'] }));
    const ready = readySchema.parse(JSON.parse(await serve.nextLine('ready line', SERVE_READY_MS)));
    const bootstrap = xdsBootstrap(ready.node, parseAddress(ready.xds), await staticSecrets(plan.sdsSecretNames));
    const envoy = await startEnvoy({ bootstrap, awaitListeners: [...listenersByPort.values()], drainTimeSeconds: options.drainTimeSeconds ?? 1, ...(options.awaitLive === false ? { awaitLive: false } : {}), ...(options.envoyVersion ? { envoyVersion: options.envoyVersion } : {}) });
    const running = serve;
    let replies = Promise.resolve(0);
    const replaceIstioConfig = (objects: readonly JsonObject[], kinds: readonly IstioReplaceableKind[]): Promise<number> => {
      const config = istioInputDocuments(objects.filter((o) => (kinds as readonly unknown[]).includes(o['kind'])));
      // One update at a time: replies come back in order.
      replies = replies.catch(() => 0).then(async () => {
        running.child.stdin.write(`${JSON.stringify({ config, kinds })}\n`);
        const reply = replySchema.parse(JSON.parse(await running.nextLine('reply to an update', REPLY_MS)));
        if (reply.error !== undefined || reply.applied === undefined) throw new Error(`istio-render serve refused the update: ${reply.error ?? 'no count'}`);
        return reply.applied;
      });
      return replies;
    };
    return {
      envoy,
      echo,
      plan,
      listenersByPort,
      clusters,
      endpoint: endpointByLogicalPort(envoy, listenersByPort),
      replaceEnvoyFilters: (objects) => replaceIstioConfig(objects, ['EnvoyFilter']),
      replaceIstioConfig,
      async configDump() {
        const response = await fetch(`${envoy.adminUrl}/config_dump`, { signal: AbortSignal.timeout(10_000) });
        return (await response.json()) as JsonObject;
      },
      serveLog: () => running.log(),
      async stop() {
        await Promise.allSettled([envoy.stop(), echo.close(), running.stop()]);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await Promise.allSettled([echo.close(), serve?.stop()]);
    await rm(dir, { recursive: true, force: true });
    if (error instanceof Error && serve) error.message += `\nistio-render serve stderr (tail):\n${serve.log().slice(-4_000)}`;
    throw error;
  }
}

/**
 * Milliseconds from `since` (a performance.now() value) until `attempt` answers `status`, trying
 * every 20 ms; undefined when `timeoutMs` pass first. How long a push takes to reach new CONNECTs.
 */
export async function msUntilStatus(since: number, status: number, attempt: () => Promise<{ readonly status: number }>, timeoutMs: number): Promise<number | undefined> {
  while (performance.now() - since < timeoutMs) {
    if ((await attempt()).status === status) return performance.now() - since;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return undefined;
}
