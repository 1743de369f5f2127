// A gateway pod's Envoy config dump, read as istioctl reads it: an HTTP GET to Envoy's admin
// port (Istio binds it to the pod's loopback, 15000) through a port-forward of the API server.
// One forwarded connection per read, closed after the response; Node's HTTP client speaks over
// it, so chunked and length-delimited responses are both read correctly.
import { request } from 'node:http';
import { Duplex, PassThrough } from 'node:stream';
import { PortForward, type KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import type { GatewayWorkload } from '../acl/model.js';
import { describeError } from '../kube/errors.js';
import { restRequest } from '../kube/rest.js';

/** Istio's admin port of a gateway's Envoy (proxyAdminPort). */
export const ENVOY_ADMIN_PORT = 15000;

/** An answer longer than the caller's budget (the read is aborted before it is held whole). */
export class ReadBudgetExceeded extends Error {}

export interface GatewayPod {
  readonly namespace: string;
  readonly name: string;
}

interface ClosableSocket {
  close(): void;
  on(event: 'close', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

function isClosable(value: unknown): value is ClosableSocket {
  return typeof value === 'object' && value !== null && typeof (value as { close?: unknown }).close === 'function' && typeof (value as { on?: unknown }).on === 'function';
}

/** Reads `path` (e.g. /config_dump) from the pod's Envoy admin port; rejects on a non-2xx answer, a closed tunnel, `signal`, or an answer longer than `maxBytes`. */
export async function readEnvoyAdmin(kc: KubeConfig, pod: GatewayPod, path: string, signal: AbortSignal, maxBytes = Number.MAX_SAFE_INTEGER, port = ENVOY_ADMIN_PORT): Promise<string> {
  const toPod = new PassThrough();
  const fromPod = new PassThrough();
  const errors = new PassThrough();
  let forwardError = '';
  errors.on('data', (chunk: Buffer) => (forwardError += chunk.toString('utf8')));
  const where = `${pod.namespace}/${pod.name}:${port}`;
  // client-node rejects with the WebSocket's ErrorEvent (e.g. "Unexpected server response: 403"), not an Error.
  const socket = await new PortForward(kc, true).portForward(pod.namespace, pod.name, [port], fromPod, errors, toPod).catch((error: unknown) => {
    throw new Error(`port-forward to ${where}: ${describeError(error)}`);
  });
  const ws = isClosable(socket) ? socket : undefined;
  const tunnel = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      toPod.write(chunk, callback);
    },
    final(callback) {
      callback();
    },
    destroy(error, callback) {
      ws?.close();
      callback(error);
    },
  });
  fromPod.on('data', (chunk: Buffer) => tunnel.push(chunk));
  ws?.on('close', () => tunnel.push(null));
  ws?.on('error', (error) => tunnel.destroy(error));
  try {
    return await new Promise<string>((resolve, reject) => {
      const req = request({ createConnection: () => tunnel, path, method: 'GET', headers: { host: 'localhost', connection: 'close' }, signal }, (res) => {
        const chunks: Buffer[] = [];
        let length = 0;
        res.on('data', (chunk: Buffer) => {
          length += chunk.length;
          // Stop before holding more than the caller can afford to parse.
          if (length > maxBytes) req.destroy(new ReadBudgetExceeded(`${path} on ${where} is larger than the read budget of ${maxBytes} bytes`));
          else chunks.push(chunk);
        });
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) reject(new Error(`GET ${path} on ${where}: HTTP ${status} ${body.slice(0, 200)}`));
          else resolve(body);
        });
      });
      req.on('error', (error) => reject(error instanceof ReadBudgetExceeded ? error : new Error(`port-forward to ${where}: ${forwardError.trim() || 'closed before an answer'} (${error.message})`)));
      req.end();
    });
  } finally {
    tunnel.destroy();
  }
}

/**
 * What the served check reads of a pod's Envoy: its listeners and route configurations, and the
 * names of the ECDS resources it holds (not their configs, which reach tens of MiB on a large
 * seed), each in Envoy's per-resource dump form; clusters, endpoints and secrets are never read.
 */
export const SERVED_CHECK_READS = ['/config_dump?resource=dynamic_listeners', '/config_dump?resource=dynamic_route_configs', '/config_dump?resource=ecds_filters&mask=ecds_filter.name'] as const;

const configsSchema = z.looseObject({ configs: z.array(z.unknown()).default([]) });

/** The pod's Envoy config, as one dump of the SERVED_CHECK_READS (read with servedGateway); at most `maxBytes` in all. */
export async function readGatewayConfigDump(kc: KubeConfig, pod: GatewayPod, signal: AbortSignal, maxBytes = Number.MAX_SAFE_INTEGER): Promise<unknown> {
  const configs: unknown[] = [];
  let budget = maxBytes;
  for (const path of SERVED_CHECK_READS) {
    const text = await readEnvoyAdmin(kc, pod, path, signal, budget);
    budget -= Buffer.byteLength(text);
    const parsed = configsSchema.safeParse(JSON.parse(text));
    if (!parsed.success) throw new Error(`GET ${path} on ${pod.namespace}/${pod.name}: not an Envoy config dump`);
    configs.push(...parsed.data.configs);
  }
  return { configs };
}

const podListSchema = z.object({
  items: z.array(
    z.looseObject({
      metadata: z.looseObject({ name: z.string(), deletionTimestamp: z.string().optional() }),
      status: z.looseObject({ phase: z.string().optional(), conditions: z.array(z.looseObject({ type: z.string(), status: z.string() })).optional() }).optional(),
    }),
  ),
});

/** The gateway's running, ready pods (by its workload selector), by name. */
export async function readyGatewayPods(kc: KubeConfig, gateway: GatewayWorkload, signal: AbortSignal): Promise<string[]> {
  const selector = Object.entries(gateway.selector)
    .map(([k, v]) => `${k}=${v}`)
    .sort()
    .join(',');
  const raw = await restRequest(kc, { path: `/api/v1/namespaces/${gateway.namespace}/pods`, query: { labelSelector: selector }, signal });
  return podListSchema
    .parse(raw)
    .items.filter((p) => p.metadata.deletionTimestamp === undefined && p.status?.phase === 'Running' && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
    .map((p) => p.metadata.name)
    .sort();
}
