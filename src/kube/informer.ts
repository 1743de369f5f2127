// An informer (list, then watch from the list's resourceVersion, keep a cache, report changes)
// that keeps running through API server restarts, dropped connections and expired
// resourceVersions.
//
// Own list+watch (list-watch.ts) instead of wrapping client-node's makeInformer, because in 1.4.0
// that informer stops for good on any error (ECONNRESET, apiserver restart, 401) and would need
// an outer restart loop anyway; its cache mixes deserialized list objects (Date timestamps) with
// raw watch JSON; its watches have neither timeoutSeconds nor a client-side timeout (the 30 s
// AbortSignal in watch.ts is overwritten); and every reconnect builds a new https.Agent.
// Owning the loop makes the rules explicit:
// - one loop, so at most one list or watch is in flight and restarts never pile up;
// - failures back off exponentially with jitter (initialBackoffMs → maxBackoffMs), and never
//   less than a `Retry-After` the server sent; only a watch that was ACCEPTED (2xx) and then ran
//   for a while or delivered events resets the backoff — a 429 or 5xx, however slow, never does;
// - the server ends each watch after timeoutSeconds (clean re-watch from the last
//   resourceVersion, no relist); a watchdog ends a watch silent for longer than
//   watchIdleTimeoutMs (90 s; a half-open TCP connection is silent forever) and re-opens it from
//   its resourceVersion. The API server sends bookmarks while the cluster's resourceVersion
//   moves (about once a minute on a busy seed), but may send none for minutes in a quiet
//   cluster (seen: one in 290 s), so silence costs one watch request, not a backoff or a relist;
// - 410 Gone relists; the relist is diffed against the cache: `delete` for objects gone,
//   `add` only for objects not cached, `update` only when resourceVersion changed.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';

import { jitteredDelay, sleep } from './backoff.js';
import { describeError, isGone, retryAfterMs } from './errors.js';
import { WatchSilentError, listEach, watchOnce, type WatchObjectEvent } from './list-watch.js';
import { objectKey, objectMetadataSchema } from './object-json.js';

export type ChangeEvent = 'add' | 'update' | 'delete';

export interface ResilientInformerOptions<T> {
  kubeConfig: KubeConfig;
  /** List/watch path, e.g. '/apis/extensions.gardener.cloud/v1alpha1/extensions' or '/apis/apps/v1/deployments'. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Turns a raw object into T (e.g. a zod safeParse); undefined = ignore the object (logged). */
  parse: (raw: unknown) => T | undefined;
  /**
   * A client-side selector for what the server cannot select (e.g. a CRD field): objects it
   * refuses are not cached, as if a server-side selector had left them out (a cached object that
   * stops matching is deleted from the cache). Default: every object.
   */
  keep?: (obj: T) => boolean;
  /** Called for every change after parse (the cache already shows it); errors are logged. */
  onChange?: (event: ChangeEvent, obj: T, old?: T) => void;
  /** Periodic full resync: calls onResync with every cached object (controller-runtime SyncPeriod). */
  resyncPeriodMs?: number;
  onResync?: (objects: T[]) => void;
  logger: Logger;
  /** Server-side watch timeout (default 300 s). */
  watchTimeoutSeconds?: number;
  /** Watchdog grace beyond watchTimeoutSeconds (default 30 s). */
  watchdogGraceMs?: number;
  /**
   * A watch silent for this long is ended and re-opened (default 90 s: on a busy seed bookmarks
   * arrive about every 60 s). Never more than watchTimeoutSeconds + watchdogGraceMs.
   */
  watchIdleTimeoutMs?: number;
  /** Backoff after failures (defaults 500 ms → 30 s). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Deadline of each list page request (default 60 s). */
  listTimeoutMs?: number;
  /**
   * Objects per list page (default 500). One page of raw objects is alive at a time while the
   * cache is (re)built, so kinds with large objects want smaller pages.
   */
  listPageSize?: number;
}

type Named = { metadata: { name: string; namespace?: string | undefined } };

interface Entry<T> {
  obj: T;
  resourceVersion: string | undefined;
}

/** An accepted watch counts as healthy (resets the backoff) after this long or after its first event. */
const HEALTHY_WATCH_MS = 1_000;

/** What one watch attempt came to. */
interface WatchOutcome {
  /** The server accepted the watch and it then ran for a while or delivered events. */
  healthy: boolean;
  error?: unknown;
}

export class ResilientInformer<T extends Named> {
  private readonly opts: ResilientInformerOptions<T>;
  private readonly log: Logger;
  private cache = new Map<string, Entry<T>>();
  /** The cache's entries by namespace (cluster-scoped objects under ''), so that a namespace lists without a pass over every object. */
  private byNamespace = new Map<string, Map<string, Entry<T>>>();
  private resourceVersion: string | undefined;
  private synced = false;
  private watching = false;
  /** Monotonic time the cache last stopped following the server (undefined while watching). */
  private notWatchingSince: number | undefined = performance.now();
  private loop: Promise<void> | undefined;
  private readonly stopController = new AbortController();
  private resyncTimer: NodeJS.Timeout | undefined;
  private syncWaiter: { resolve: () => void; reject: (err: Error) => void } | undefined;
  private syncPromise: Promise<void> | undefined;

  constructor(options: ResilientInformerOptions<T>) {
    this.opts = options;
    this.log = options.logger.child({ informer: options.path });
  }

  /** Starts list+watch; resolves after the first successful list, rejects if stop() comes first. */
  start(): Promise<void> {
    if (this.syncPromise) return this.syncPromise;
    if (this.stopController.signal.aborted) return Promise.reject(new Error('informer was stopped'));
    this.syncPromise = new Promise<void>((resolve, reject) => {
      this.syncWaiter = { resolve, reject };
    });
    this.loop = this.run();
    if (this.opts.resyncPeriodMs !== undefined && this.opts.onResync) {
      this.resyncTimer = setInterval(() => this.resync(), this.opts.resyncPeriodMs);
    }
    return this.syncPromise;
  }

  async stop(): Promise<void> {
    this.stopController.abort(new Error('informer stopped'));
    clearInterval(this.resyncTimer);
    this.syncWaiter?.reject(new Error('informer stopped before its first list'));
    this.syncWaiter = undefined;
    await this.loop;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** A watch is open right now: changes reach the cache as they happen (not while backing off). */
  isWatching(): boolean {
    return this.watching;
  }

  /** How long the cache has gone without an open watch (0 while watching): short gaps are every re-open, long ones a stuck informer. */
  notWatchingForMs(): number {
    return this.notWatchingSince === undefined ? 0 : performance.now() - this.notWatchingSince;
  }

  private setWatching(watching: boolean): void {
    if (watching) this.notWatchingSince = undefined;
    else this.notWatchingSince ??= performance.now();
    this.watching = watching;
  }

  /** Cached objects, optionally of one namespace. */
  list(namespace?: string): T[] {
    const entries = namespace === undefined ? this.cache : this.byNamespace.get(namespace);
    return entries ? Array.from(entries.values(), (e) => e.obj) : [];
  }

  /** Number of cached objects. */
  size(): number {
    return this.cache.size;
  }

  private setEntry(key: string, entry: Entry<T>): void {
    this.cache.set(key, entry);
    this.index(key, entry);
  }

  private index(key: string, entry: Entry<T>): void {
    const namespace = entry.obj.metadata.namespace ?? '';
    let entries = this.byNamespace.get(namespace);
    if (!entries) this.byNamespace.set(namespace, (entries = new Map()));
    entries.set(key, entry);
  }

  private deleteEntry(key: string, entry: Entry<T>): void {
    this.cache.delete(key);
    const namespace = entry.obj.metadata.namespace ?? '';
    const entries = this.byNamespace.get(namespace);
    entries?.delete(key);
    if (entries?.size === 0) this.byNamespace.delete(namespace);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.cache.get(objectKey(name, namespace))?.obj;
  }

  /** The resourceVersion the next watch starts from (undefined = next round relists). */
  lastResourceVersion(): string | undefined {
    return this.resourceVersion;
  }

  private get stopping(): boolean {
    return this.stopController.signal.aborted;
  }

  private async run(): Promise<void> {
    let failures = 0;
    const backoff = (error: unknown) => {
      const delay = Math.max(
        jitteredDelay(this.opts.initialBackoffMs ?? 500, this.opts.maxBackoffMs ?? 30_000, failures - 1),
        retryAfterMs(error) ?? 0,
      );
      return sleep(delay, this.stopController.signal);
    };
    while (!this.stopping) {
      if (this.resourceVersion === undefined) {
        try {
          await this.relist();
        } catch (err) {
          if (this.stopping) break;
          failures++;
          this.log.warn({ err: describeError(err), failures, retryAfterMs: retryAfterMs(err) }, 'list failed; retrying with backoff');
          await backoff(err);
          continue;
        }
      }
      this.setWatching(false);
      const outcome = await this.watch();
      this.setWatching(false);
      if (this.stopping) break;
      if (outcome.healthy) failures = 0;
      // An accepted watch that fell silent is re-opened at once from its resourceVersion: in a
      // quiet cluster the API server may send no bookmark for minutes, so silence alone is no failure.
      const quietEnd = outcome.healthy && outcome.error instanceof WatchSilentError;
      if (outcome.error !== undefined && isGone(outcome.error)) {
        this.log.info('resourceVersion expired; relisting');
        this.resourceVersion = undefined;
      } else if (quietEnd) {
        this.log.debug({ err: describeError(outcome.error) }, 'watch silent; re-opening it from its resourceVersion');
      } else if (outcome.error !== undefined) {
        this.log.warn({ err: describeError(outcome.error), retryAfterMs: retryAfterMs(outcome.error) }, 'watch failed; restarting with backoff');
      }
      if (outcome.healthy && (outcome.error === undefined || isGone(outcome.error) || quietEnd)) continue;
      failures++;
      await backoff(outcome.error);
    }
  }

  private async watch(): Promise<WatchOutcome> {
    let accepted: number | undefined;
    let events = 0;
    const timeoutSeconds = this.opts.watchTimeoutSeconds ?? 300;
    const idleTimeoutMs = Math.min(this.opts.watchIdleTimeoutMs ?? 90_000, timeoutSeconds * 1000 + (this.opts.watchdogGraceMs ?? 30_000));
    const resourceVersion = this.resourceVersion ?? '';
    let error: unknown;
    try {
      await watchOnce(this.opts.kubeConfig, {
        path: this.opts.path,
        resourceVersion,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        timeoutSeconds,
        idleTimeoutMs,
        signal: this.stopController.signal,
        onConnected: () => {
          accepted = performance.now();
          this.setWatching(true);
          this.log.debug({ resourceVersion }, 'watching');
        },
        onEvent: (event) => {
          events++;
          this.applyWatchEvent(event);
        },
      });
    } catch (err) {
      error = err;
    }
    // A refused watch (429, 5xx, ...) is a failure however long the refusal took to arrive:
    // only a watch the server accepted can count as healthy.
    const healthy = accepted !== undefined && (events > 0 || performance.now() - accepted >= HEALTHY_WATCH_MS);
    return { healthy, error };
  }

  private async relist(): Promise<void> {
    const previous = this.cache;
    const next = new Map<string, Entry<T>>();
    // Each item becomes its cache entry as its page arrives: the raw page can go before the next one.
    const resourceVersion = await listEach(
      this.opts.kubeConfig,
      this.opts.path,
      {
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        signal: this.stopController.signal,
        timeoutMs: this.opts.listTimeoutMs ?? 60_000,
        ...(this.opts.listPageSize !== undefined ? { pageSize: this.opts.listPageSize } : {}),
      },
      (raw) => {
        const meta = objectMetadataSchema.safeParse(raw['metadata']);
        if (!meta.success) return;
        const key = objectKey(meta.data.name, meta.data.namespace);
        const cached = previous.get(key);
        // Unchanged since cached: the cached entry serves, so a relist does not hold two copies of the seed.
        if (cached !== undefined && meta.data.resourceVersion !== undefined && cached.resourceVersion === meta.data.resourceVersion) {
          next.set(key, cached);
          return;
        }
        const entry = this.entryFor(raw, meta.data.resourceVersion, cached);
        if (entry) next.set(key, entry);
      },
    );
    if (this.stopping) return;
    const changes: [ChangeEvent, T, T?][] = [];
    for (const [key, old] of previous) if (!next.has(key)) changes.push(['delete', old.obj, old.obj]);
    for (const [key, entry] of next) {
      const old = previous.get(key);
      if (!old) changes.push(['add', entry.obj]);
      else if (old !== entry && old.resourceVersion !== entry.resourceVersion) changes.push(['update', entry.obj, old.obj]);
    }
    this.cache = next;
    this.byNamespace = new Map();
    for (const [key, entry] of next) this.index(key, entry);
    this.resourceVersion = resourceVersion;
    this.log.debug({ objects: next.size, changes: changes.length, resourceVersion }, 'listed');
    for (const [event, obj, old] of changes) this.emit(event, obj, old);
    if (!this.synced) {
      this.synced = true;
      this.syncWaiter?.resolve();
      this.syncWaiter = undefined;
    }
  }

  /**
   * The parsed object as a new entry, or else the cached entry as it is: a version that does not
   * parse must not make the object look deleted (that could drop a shoot's protection).
   * Undefined: not to be cached (`keep` refuses it, or it does not parse and was not cached).
   */
  private entryFor(raw: unknown, resourceVersion: string | undefined, cached: Entry<T> | undefined): Entry<T> | undefined {
    const obj = this.opts.parse(raw);
    if (obj === undefined) {
      this.log.warn({ object: describeObject(raw), keptCached: cached !== undefined }, 'ignoring object that does not parse');
      return cached;
    }
    return this.opts.keep && !this.opts.keep(obj) ? undefined : { obj, resourceVersion };
  }

  private applyWatchEvent(event: WatchObjectEvent): void {
    const meta = objectMetadataSchema.partial().safeParse(event.object.metadata);
    const resourceVersion = meta.success ? meta.data.resourceVersion : undefined;
    if (event.type !== 'BOOKMARK') this.applyObjectEvent(event);
    if (resourceVersion !== undefined) this.resourceVersion = resourceVersion;
  }

  private applyObjectEvent(event: WatchObjectEvent): void {
    const meta = objectMetadataSchema.safeParse(event.object.metadata);
    if (!meta.success) {
      this.log.warn({ type: event.type }, 'watch event without object metadata');
      return;
    }
    const key = objectKey(meta.data.name, meta.data.namespace);
    const old = this.cache.get(key);
    if (event.type === 'DELETED') {
      if (!old) return;
      this.deleteEntry(key, old);
      this.emit('delete', this.opts.parse(event.object) ?? old.obj, old.obj);
      return;
    }
    const entry = this.entryFor(event.object, meta.data.resourceVersion, old);
    if (!entry) {
      // No longer selected (`keep`): gone from the cache, as a server-side selector would have it.
      if (!old) return;
      this.deleteEntry(key, old);
      this.emit('delete', old.obj, old.obj);
      return;
    }
    if (entry === old) return;
    this.setEntry(key, entry);
    // ADDED after a reconnect for an object already cached is not a new object.
    if (!old) this.emit('add', entry.obj);
    else if (old.resourceVersion !== entry.resourceVersion) this.emit('update', entry.obj, old.obj);
  }

  private emit(event: ChangeEvent, obj: T, old?: T): void {
    try {
      this.opts.onChange?.(event, obj, old);
    } catch (err) {
      this.log.error({ err: describeError(err), event, object: describeObject(obj) }, 'onChange handler failed');
    }
  }

  private resync(): void {
    if (!this.synced || this.stopping) return;
    try {
      this.opts.onResync?.(this.list());
    } catch (err) {
      this.log.error({ err: describeError(err) }, 'onResync handler failed');
    }
  }
}

function describeObject(raw: unknown): string {
  const meta = typeof raw === 'object' && raw !== null && 'metadata' in raw ? objectMetadataSchema.safeParse(raw.metadata) : undefined;
  return meta?.success ? objectKey(meta.data.name, meta.data.namespace) : '(unnamed object)';
}
