// A child abort signal for one request. Not AbortSignal.any(): each call registers a dependant on
// the (long-lived) parent signal, and a controller runs for months issuing a request every few
// seconds; here the listener is removed explicitly when the request is over.

export interface LinkedAbort {
  signal: AbortSignal;
  abort(reason: unknown): void;
  /** Detaches from the parent and cancels the deadline; call when the request is over. */
  release(): void;
}

/** Aborts when `parent` aborts, when abort() is called, or after `timeoutMs` (TimeoutError). */
export function linkedAbort(parent: AbortSignal | undefined, timeoutMs?: number): LinkedAbort {
  const controller = new AbortController();
  const onParentAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => controller.abort(new DOMException(`request timed out after ${timeoutMs} ms`, 'TimeoutError')), timeoutMs);
  return {
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
    release() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}

/**
 * What a request that failed while `signal` fired should throw: the abort's reason (a timeout, a
 * closed write fence), which says why, rather than the transport's bare "operation was aborted".
 */
export function abortReasonOr(signal: AbortSignal | undefined, error: unknown): unknown {
  return signal?.aborted === true && signal.reason instanceof Error ? signal.reason : error;
}
