// One Fastify HTTPS server for the admission webhooks, shaped after controller-runtime's
// webhook server: 7 MiB body limit (an UPDATE review carries object and oldObject), request
// and idle timeouts, every answer an HTTP 200 AdmissionReview (any other status counts as a
// webhook failure, which the API server reports without our message), and the serving
// certificate swapped in place for new handshakes when it is rotated.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { fastify, LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { admissionResponse, deny, parseAdmissionReview, type AdmissionRequest, type AdmissionVerdict } from './admission-review.js';
import type { KeyPair } from './serving-certs.js';
import type { WebhookMetrics } from './webhook-metrics.js';

export const BODY_LIMIT_BYTES = 7 * 1024 * 1024;

export type AdmissionHandler = (request: AdmissionRequest) => AdmissionVerdict | Promise<AdmissionVerdict>;

export interface WebhookRoute {
  /** Metric label. */
  readonly name: string;
  readonly path: string;
  readonly handle: AdmissionHandler;
}

export interface WebhookServerOptions {
  readonly tls: KeyPair;
  readonly routes: readonly WebhookRoute[];
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
  readonly requestTimeoutMs?: number;
}

export type WebhookServer = FastifyInstance<HttpsServer, IncomingMessage, ServerResponse, FastifyBaseLogger>;

const REASONS: Readonly<Record<number, string>> = { 400: 'BadRequest', 413: 'RequestEntityTooLarge', 415: 'UnsupportedMediaType', 408: 'Timeout' };

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function createWebhookServer(options: WebhookServerOptions): WebhookServer {
  const app = fastify({
    https: { cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2' },
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: options.requestTimeoutMs ?? 30_000,
    keepAliveTimeout: 90_000,
    // A request that reaches a kept-alive connection while the server closes is still answered:
    // a 503 would be a failed webhook call, and with failurePolicy Fail a rejected write.
    return503OnClosing: false,
    // Another extension's providerConfig may legitimately carry `__proto__` or
    // `constructor.prototype` keys; refusing such a review (Fastify's default, 400) would block
    // every update of that Shoot. The keys are dropped from our parsed copy instead: we never
    // write that part back, and no object of ours gets a prototype from the request.
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
    loggerInstance: options.logger as FastifyBaseLogger,
    // Refusals are logged by the handler; a line per admission request would drown everything else.
    logController: new LogController({ disableRequestLogging: true }),
  });
  // AdmissionReviews are JSON; anything else is refused as an unsupported media type.
  app.removeContentTypeParser('text/plain');
  const routeByPath = new Map(options.routes.map((r) => [r.path, r]));
  const timers = new WeakMap<FastifyRequest, (code: number) => void>();
  const codes = new WeakMap<FastifyRequest, number>();

  const answer = (request: FastifyRequest, reply: FastifyReply, uid: string, verdict: AdmissionVerdict) => {
    codes.set(request, verdict.allowed ? 200 : verdict.code);
    if (!verdict.allowed) request.log.info({ uid, code: verdict.code, reason: verdict.message }, 'admission refused');
    return reply.code(200).header('content-type', 'application/json').send(admissionResponse(uid, verdict));
  };

  app.addHook('onRequest', async (request) => {
    const route = routeByPath.get(request.url.split('?')[0] ?? '');
    if (route) timers.set(request, options.metrics.begin(route.name));
  });
  app.addHook('onResponse', async (request, reply) => {
    timers.get(request)?.(codes.get(request) ?? reply.statusCode);
  });

  // Parser and transport errors (garbage JSON, empty or oversized body, wrong media type) are
  // answered as refusals too, so the API server shows our message rather than "status 400".
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const code = error.statusCode ?? 500;
    if (!routeByPath.has(request.url.split('?')[0] ?? '')) return reply.code(code).send({ error: error.message });
    const message = code === 413 ? `request body exceeds ${BODY_LIMIT_BYTES} bytes` : `cannot read the AdmissionReview: ${error.message}`;
    return answer(request, reply, '', deny(code, REASONS[code] ?? 'InternalError', message));
  });

  for (const route of options.routes) {
    app.post(route.path, async (request, reply) => {
      const review = parseAdmissionReview(request.body);
      if (!review.ok) return answer(request, reply, review.uid, deny(400, 'BadRequest', review.message));
      let verdict: AdmissionVerdict;
      try {
        verdict = await route.handle(review.request);
      } catch (error) {
        request.log.error({ err: error, uid: review.request.uid }, 'webhook handler failed');
        verdict = deny(500, 'InternalError', `${route.name} failed: ${describe(error)}`);
      }
      return answer(request, reply, review.request.uid, verdict);
    });
  }
  return app;
}

/** New handshakes use the new pair; established connections keep theirs. */
export function rotateServingCertificate(app: WebhookServer, pair: KeyPair): void {
  app.server.setSecureContext({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' });
}
