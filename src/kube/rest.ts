// A small JSON-over-HTTPS transport to the Kubernetes API, built on node:https and on client-node's
// KubeConfig for credentials (client certificates, tokens, exec/OIDC plugins, impersonation).
//
// Why not client-node's generated APIs everywhere (see also docs in informer.ts):
// - they deserialize built-in kinds into model classes (Date objects, unknown fields dropped)
//   while watch events stay raw JSON; this transport yields plain JSON for every path;
// - client-node 1.4.0 builds a new https.Agent per request and per watch (fixed only in 2.x,
//   kubernetes-client/javascript#2893); here one keep-alive agent per KubeConfig is shared, and the
//   per-request TLS options are part of the agent's socket pool key, so rotated credentials still
//   get their own connections;
// - requests need deadlines (a leader must give up before its lease runs out) and watches need
//   to be abortable; 1.4.0 has neither for watches.
import http from 'node:http';
import https from 'node:https';

import { ApiException, type KubeConfig } from '@kubernetes/client-node';

import { abortReasonOr, linkedAbort } from './abort.js';
import { ServerPushback } from './server-pushback.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type QueryValue = string | number | boolean | undefined;

export interface RestRequest {
  method?: HttpMethod;
  /** Absolute API path, e.g. '/apis/coordination.k8s.io/v1/namespaces/default/leases/x'. */
  path: string;
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  body?: unknown;
  /** Defaults to application/json when there is a body. */
  contentType?: string;
  signal?: AbortSignal;
  /**
   * Sent at once even while the server asks the others to wait: the leader's lease renewal, which
   * must not miss its deadline because of a Retry-After some other request got (its own answer
   * still tells it to back off).
   */
  ignorePushback?: boolean;
}

/** Default deadline for a whole request (headers and body); watches use their own. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

interface Agents {
  http: http.Agent;
  https: https.Agent;
}
const agentsByConfig = new WeakMap<KubeConfig, Agents>();
const pushbackByConfig = new WeakMap<KubeConfig, ServerPushback>();

/** The shared Retry-After gate of everything this process sends with `kc` (watches excepted). */
export function serverPushback(kc: KubeConfig): ServerPushback {
  let gate = pushbackByConfig.get(kc);
  if (!gate) {
    gate = new ServerPushback();
    pushbackByConfig.set(kc, gate);
  }
  return gate;
}

function agentsFor(kc: KubeConfig): Agents {
  let agents = agentsByConfig.get(kc);
  if (!agents) {
    // keepAlive: list/patch requests reuse connections; idle sockets are unref'd by Node, so
    // they never keep a process alive. No agent `timeout`: it would also cut idle watches.
    agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
    agentsByConfig.set(kc, agents);
  }
  return agents;
}

function buildUrl(kc: KubeConfig, path: string, query: Record<string, QueryValue> = {}): URL {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + path);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  return url;
}

// RequestOptions.headers may also be a raw [name, value, ...] array; KubeConfig never sets one.
function isHeaderRecord(headers: unknown): headers is http.OutgoingHttpHeaders {
  return typeof headers === 'object' && headers !== null && !Array.isArray(headers);
}

function headerRecord(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value !== undefined) out[key] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function readText(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (chunk: Buffer) => chunks.push(chunk));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error('connection closed before the response was complete'));
    });
  });
}

function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function statusMessage(body: unknown, code: number): string {
  if (typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string') {
    return body.message;
  }
  return typeof body === 'string' && body.length > 0 ? body : (http.STATUS_CODES[code] ?? `HTTP ${code}`);
}

/** Turns a non-2xx response into client-node's ApiException (body = the parsed Status if JSON). */
async function toApiException(res: http.IncomingMessage): Promise<ApiException<unknown>> {
  const code = res.statusCode ?? 0;
  const body = parseJson(await readText(res).catch(() => ''));
  return new ApiException<unknown>(code, statusMessage(body, code), body, headerRecord(res.headers));
}

/**
 * Sends a request and resolves with the response once its headers arrived with a 2xx status.
 * Rejects with ApiException for other statuses, and with the abort reason when `signal` fires
 * (the signal also tears down a response that is still streaming).
 */
export async function openResponse(kc: KubeConfig, req: RestRequest): Promise<http.IncomingMessage> {
  const url = buildUrl(kc, req.path, req.query);
  const options: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  // applyToHTTPSOptions also builds a fresh agent; only a proxy agent is worth keeping.
  const { agent: freshAgent, headers: authHeaders, ...tls } = options;
  const useProxyAgent = Boolean(kc.getCurrentCluster()?.proxyUrl);
  const agents = agentsFor(kc);
  const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body), 'utf8');
  const headers: http.OutgoingHttpHeaders = { ...(isHeaderRecord(authHeaders) ? authHeaders : {}), Accept: 'application/json' };
  if (payload) {
    headers['Content-Type'] = req.contentType ?? 'application/json';
    headers['Content-Length'] = payload.length;
  }
  const requestOptions: https.RequestOptions = {
    ...tls,
    method: req.method ?? 'GET',
    headers,
    agent: useProxyAgent ? freshAgent : url.protocol === 'http:' ? agents.http : agents.https,
    signal: req.signal,
  };
  const send = url.protocol === 'http:' ? http.request : https.request;

  const attempt = () =>
    new Promise<http.IncomingMessage>((resolve, reject) => {
      const clientRequest = send(url, requestOptions, resolve);
      clientRequest.on('error', (error: NodeJS.ErrnoException) => {
        if (req.signal?.aborted === true) return reject(abortReasonOr(req.signal, error));
        reject(Object.assign(error, { reusedSocket: clientRequest.reusedSocket }));
      });
      clientRequest.end(payload);
    });
  let res: http.IncomingMessage;
  try {
    res = await attempt();
  } catch (error) {
    // A kept-alive connection that broke as we reused it: usually the server closed it as idle and
    // never saw the request, so it is sent once more on a new connection (as Go's transport does
    // for client-go). Node cannot tell whether the server read it first, so only a request that
    // may safely arrive twice is resent; the caller's retry reads the object again.
    if (!isStaleKeepAlive(error) || !resendable(req) || req.signal?.aborted) throw error;
    res = await attempt();
  }
  const code = res.statusCode ?? 0;
  if (code < 200 || code > 299) throw await toApiException(res);
  return res;
}

/**
 * Whether sending the request twice does what sending it once does. A JSON patch (an `add` to
 * a list) and a create are not: the server may have applied the first before the connection
 * dropped.
 */
function resendable(req: RestRequest): boolean {
  const method = req.method ?? 'GET';
  if (method === 'POST') return false;
  return method !== 'PATCH' || req.contentType !== 'application/json-patch+json';
}

function isStaleKeepAlive(error: unknown): boolean {
  return error instanceof Error && (error as { reusedSocket?: boolean }).reusedSocket === true && (error as NodeJS.ErrnoException).code === 'ECONNRESET';
}

/**
 * One JSON request with a deadline covering headers and body. Resolves with the parsed body
 * (undefined when empty). Errors: ApiException for HTTP errors, TimeoutError/AbortError otherwise.
 * While the server asks this process to wait (429/503 with Retry-After), the request waits first.
 */
export async function restRequest(
  kc: KubeConfig,
  req: RestRequest & { timeoutMs?: number },
): Promise<unknown> {
  const deadline = linkedAbort(req.signal, req.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS);
  const gate = serverPushback(kc);
  try {
    if (req.ignorePushback === true) {
      const res = await openResponse(kc, { ...req, signal: deadline.signal });
      return parseJson(await readText(res));
    }
    // The wait for a server-requested pause counts against the request's deadline.
    const ticket = await gate.enter(deadline.signal);
    let failure: unknown;
    try {
      const res = await openResponse(kc, { ...req, signal: deadline.signal });
      return parseJson(await readText(res));
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      gate.settle(ticket, failure, deadline.signal.aborted);
    }
  } catch (error) {
    // The body read can fail on an abort too; the caller learns the abort's reason either way.
    throw abortReasonOr(deadline.signal, error);
  } finally {
    deadline.release();
  }
}
