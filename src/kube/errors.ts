// Status-code helpers for errors from the Kubernetes API. They accept errors from client-node's
// generated APIs (ApiException: `.code`), from its Watch (`.statusCode`) and from this package's
// own transport (rest.ts throws ApiException too), so callers need not care who sent the request.
import { ApiException } from '@kubernetes/client-node';

/** The HTTP status of a failed API request, or undefined for other errors (ECONNRESET, timeouts, ...). */
export function apiStatusCode(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  if (typeof error !== 'object' || error === null) return undefined;
  // Node system errors carry string codes ('ECONNRESET'); only numbers are HTTP statuses.
  const code = 'statusCode' in error ? error.statusCode : 'code' in error ? error.code : undefined;
  return typeof code === 'number' ? code : undefined;
}

export function isNotFound(error: unknown): boolean {
  return apiStatusCode(error) === 404;
}

export function isConflict(error: unknown): boolean {
  return apiStatusCode(error) === 409;
}

/** 410 Gone: a watch or list continuation asked for a resourceVersion the server no longer has. */
export function isGone(error: unknown): boolean {
  return apiStatusCode(error) === 410;
}

/** A one-line description for logs (ApiException's own message embeds headers and the body). */
export function describeError(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = error.body;
    const message =
      typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string'
        ? body.message
        : String(body);
    return `HTTP ${error.code}: ${message}`;
  }
  if (error instanceof Error) return error.message;
  // Some libraries reject with non-Error events that carry a message (a WebSocket's ErrorEvent).
  const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? message : String(error);
}

/** Longest server-requested wait honoured; a larger Retry-After is clamped to it (a typo must not park a cache for hours). */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

/**
 * The wait a 429/503 response asked for in `Retry-After` (seconds or an HTTP date), in ms;
 * undefined when the error carries none. Clamped to MAX_RETRY_AFTER_MS.
 */
export function retryAfterMs(error: unknown, now: () => number = Date.now): number | undefined {
  // An error that wraps the API's answer (for example a sync that failed in some namespaces) carries its wait.
  if (!(error instanceof ApiException)) return error instanceof Error && error.cause !== undefined ? retryAfterMs(error.cause, now) : undefined;
  const headers: unknown = error.headers;
  if (typeof headers !== 'object' || headers === null) return undefined;
  const entry = Object.entries(headers).find(([name]) => name.toLowerCase() === 'retry-after');
  const value: unknown = entry?.[1];
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const seconds = Number(value.trim());
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - now();
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}
