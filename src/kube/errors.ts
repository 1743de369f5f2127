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
  return error instanceof Error ? error.message : String(error);
}
