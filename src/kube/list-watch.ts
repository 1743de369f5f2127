// The two API calls behind an informer, over rest.ts so that list items and watch objects are the
// same plain JSON (JSON.parse of the server's bytes) — client-node's list deserializer would
// turn timestamps into Date objects while its Watch hands out raw JSON.
import type http from 'node:http';
import { createInterface } from 'node:readline';

import { ApiException, type KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';

import { linkedAbort } from './abort.js';
import { isRecord } from './object-json.js';
import { openResponse, restRequest } from './rest.js';

export interface Selectors {
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ListResult {
  /** The snapshot's resourceVersion, where a watch continues. */
  resourceVersion: string;
  items: Record<string, unknown>[];
}

const listSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: z.looseObject({ resourceVersion: z.string().optional(), continue: z.string().optional() }).optional(),
  items: z.array(z.unknown()).nullable(),
});

export interface ListOptions extends Selectors {
  /** Items per page (limit); default 500. Heavy objects want smaller pages: each page is held whole while it is parsed. */
  pageSize?: number;
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * Lists every page (limit/continue) and hands each item to `onItem` as its page arrives, so that
 * only one page of raw objects is alive at a time. Items of built-in lists lack apiVersion/kind
 * while watch events carry them; they are filled in from the list so both paths yield the same
 * shape. Resolves with the snapshot's resourceVersion.
 */
export async function listEach(kc: KubeConfig, path: string, options: ListOptions, onItem: (item: Record<string, unknown>) => void): Promise<string> {
  let continueToken: string | undefined;
  let resourceVersion = '';
  do {
    const page = listSchema.parse(
      await restRequest(kc, {
        path,
        query: {
          labelSelector: options.labelSelector,
          fieldSelector: options.fieldSelector,
          limit: options.pageSize ?? 500,
          continue: continueToken,
        },
        signal: options.signal,
        timeoutMs: options.timeoutMs,
      }),
    );
    const itemKind = page.kind?.endsWith('List') ? page.kind.slice(0, -'List'.length) : undefined;
    for (const item of page.items ?? []) {
      if (isRecord(item)) onItem({ apiVersion: page.apiVersion, kind: itemKind, ...item });
    }
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken !== undefined);
  if (resourceVersion === '') throw new Error(`list of ${path} returned no resourceVersion`);
  return resourceVersion;
}

/** Every item of every page (listEach), collected. */
export async function listAll(kc: KubeConfig, path: string, options: ListOptions = {}): Promise<ListResult> {
  const items: Record<string, unknown>[] = [];
  const resourceVersion = await listEach(kc, path, options, (item) => items.push(item));
  return { resourceVersion, items };
}

const statusSchema = z.looseObject({
  code: z.number().optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
});

const watchEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.enum(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK']), object: z.record(z.string(), z.unknown()) }),
  z.object({ type: z.literal('ERROR'), object: statusSchema }),
]);
export type WatchObjectEvent = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK'; object: Record<string, unknown> };

export interface WatchOptions extends Selectors {
  path: string;
  resourceVersion: string;
  /** Server-side end of the watch (the server closes it cleanly after this long). */
  timeoutSeconds: number;
  /** Client-side watchdog: the watch fails when no byte arrived for this long. */
  idleTimeoutMs: number;
  /** Deadline for the response headers. */
  connectTimeoutMs?: number;
  signal: AbortSignal;
  onConnected?: () => void;
  /** Called synchronously per event, in order. */
  onEvent: (event: WatchObjectEvent) => void;
}

/**
 * Runs one watch until the server ends it (resolves) or it fails (rejects): HTTP errors and
 * in-stream ERROR events become ApiException (410 = resourceVersion expired), a silent
 * connection becomes a watchdog error, a connection cut mid-stream an Error.
 */
export async function watchOnce(kc: KubeConfig, options: WatchOptions): Promise<void> {
  const connectTimeoutMs = options.connectTimeoutMs ?? 30_000;
  const connecting = linkedAbort(options.signal, connectTimeoutMs);
  let res: http.IncomingMessage;
  try {
    res = await openResponse(kc, {
      path: options.path,
      query: {
        watch: 'true',
        resourceVersion: options.resourceVersion,
        allowWatchBookmarks: 'true',
        timeoutSeconds: options.timeoutSeconds,
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
      },
      signal: connecting.signal,
    });
  } catch (err) {
    connecting.release();
    throw err;
  }
  // The connect deadline no longer applies; the watchdog takes over. Stopping still aborts.
  connecting.release();
  const onAbort = () => res.destroy(new Error('watch aborted'));
  options.signal.addEventListener('abort', onAbort, { once: true });
  options.onConnected?.();
  try {
    const events = consumeEvents(res, options);
    if (options.signal.aborted) onAbort();
    await events;
  } finally {
    options.signal.removeEventListener('abort', onAbort);
  }
}

/** A watch that received nothing for its idle timeout (a half-open connection looks like this). */
export class WatchSilentError extends Error {
  override readonly name = 'WatchSilentError';
}

function consumeEvents(res: http.IncomingMessage, options: WatchOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (error?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(watchdog);
      if (error === undefined) resolve();
      else reject(error);
      // Tear the connection down (no-op when it already ended).
      res.destroy();
    };
    const failed = (err: unknown) => finish(options.signal.aborted ? options.signal.reason : err);
    const armWatchdog = () =>
      setTimeout(
        () => finish(new WatchSilentError(`watch ${options.path}: nothing received for ${options.idleTimeoutMs} ms`)),
        options.idleTimeoutMs,
      );
    let watchdog = armWatchdog();
    res.on('data', () => {
      clearTimeout(watchdog);
      watchdog = armWatchdog();
    });
    res.on('error', failed);
    res.on('close', () => {
      if (!res.complete) failed(new Error(`watch ${options.path}: connection closed mid-stream`));
    });
    const lines = createInterface({ input: res, crlfDelay: Infinity });
    // readline re-emits input errors on itself; unhandled, they would crash the process.
    lines.on('error', failed);
    lines.on('line', (line) => {
      if (settled || line.trim() === '') return;
      const event = watchEventSchema.safeParse(safeJson(line));
      if (!event.success) {
        finish(new Error(`watch ${options.path}: malformed event: ${line.slice(0, 200)}`));
        return;
      }
      if (event.data.type === 'ERROR') {
        const status = event.data.object;
        finish(new ApiException<unknown>(status.code ?? 500, status.message ?? 'watch error', status, {}));
        return;
      }
      try {
        options.onEvent(event.data);
      } catch (err) {
        finish(err);
      }
    });
    // readline closes after the last line; only then is a clean end a clean end.
    lines.on('close', () => {
      if (res.complete) finish();
    });
  });
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
}
