// What this process last wrote per key, until its informer cache shows that write. A decision
// taken on an older cached copy would repeat writes already made (a status patch, an apply), or
// worse, take the copy from before a write for what is stored now. The one record of "the cache
// shows my write": the reconciles' Extension and ManagedResource writes and the combined
// syncer's filters all keep theirs here.
import { performance } from 'node:perf_hooks';

/** etcd-backed resourceVersions are increasing integers (comparable since Kubernetes 1.35); anything else only by equality. */
export function resourceVersionAtLeast(have: string | undefined, want: string): boolean {
  if (have === undefined) return false;
  if (have === want) return true;
  return /^\d+$/.test(have) && /^\d+$/.test(want) && BigInt(have) >= BigInt(want);
}

const MAX_VERSIONS = 8;

interface Note {
  /** The versions our writes got since the cache last caught up, oldest first; empty for a delete. */
  readonly versions: readonly string[];
  readonly deleted: boolean;
  readonly at: number;
  readonly until: number;
}

export interface WrittenVersionsOptions {
  /**
   * How long a note stands while the cache does not show it (Infinity: until it does). Past it
   * the caller decides on the cached copy again: a watch that lost the event must not hold the
   * key for ever when the next decision does not depend on it.
   */
  readonly holdMs?: number;
  readonly now?: () => number;
  /** Told of a note dropped because its hold passed before the cache showed it. */
  readonly onGiveUp?: (key: string, waitedMs: number) => void;
}

export class WrittenVersions {
  private readonly notes = new Map<string, Note>();
  private readonly holdMs: number;
  private readonly now: () => number;

  constructor(private readonly options: WrittenVersionsOptions = {}) {
    this.holdMs = options.holdMs ?? Infinity;
    this.now = options.now ?? (() => performance.now());
  }

  /** The server answered a write of `key` with `resourceVersion` (a write that reported none is not noted). */
  note(key: string, resourceVersion: string | undefined): void {
    if (resourceVersion === undefined || resourceVersion === '') return;
    const earlier = this.notes.get(key);
    // A few are enough to tell our own events from another writer's; the last decides lagging.
    const versions = earlier && !earlier.deleted ? [...earlier.versions.slice(1 - MAX_VERSIONS), resourceVersion] : [resourceVersion];
    const now = this.now();
    this.notes.set(key, { versions, deleted: false, at: now, until: now + this.holdMs });
  }

  /** The server deleted `key` for us: the cache lags while it still holds a copy. */
  noteDeleted(key: string): void {
    const now = this.now();
    this.notes.set(key, { versions: [], deleted: true, at: now, until: now + this.holdMs });
  }

  /**
   * Whether a cache event is one of our own noted writes: a delete we made, or a write whose
   * version we got back. Anything else (another writer's delete or edit) may have opened a gap.
   */
  isOwn(key: string, event: 'add' | 'update' | 'delete', resourceVersion: string | undefined): boolean {
    const note = this.notes.get(key);
    if (note === undefined) return false;
    if (event === 'delete') return note.deleted;
    return !note.deleted && resourceVersion !== undefined && note.versions.includes(resourceVersion);
  }

  /**
   * Whether the cache's copy of `key` (its resourceVersion, undefined when the cache holds none)
   * is older than the last write noted for it, within the hold. `progress`, the cache's watch
   * position, shows the write as well. A note the cache has caught up with, or whose hold has
   * passed, is dropped.
   */
  lagging(key: string, cachedVersion: string | undefined, progress?: string): boolean {
    const note = this.notes.get(key);
    if (note === undefined) return false;
    if (!this.shows(note, cachedVersion, progress)) {
      const now = this.now();
      if (now < note.until) return true;
      this.options.onGiveUp?.(key, now - note.at);
    }
    this.notes.delete(key);
    return false;
  }

  /** Drops every note the cache shows or whose hold passed (see lagging); true when none is left. */
  caughtUp(cachedVersion: (key: string) => string | undefined, progress?: string): boolean {
    for (const key of [...this.notes.keys()]) this.lagging(key, cachedVersion(key), progress);
    return this.notes.size === 0;
  }

  forget(key: string): void {
    this.notes.delete(key);
  }

  /** Keys with a note (for tests and diagnostics). */
  size(): number {
    return this.notes.size;
  }

  private shows(note: Note, cachedVersion: string | undefined, progress: string | undefined): boolean {
    if (note.deleted) return cachedVersion === undefined;
    const last = note.versions[note.versions.length - 1];
    return last === undefined || resourceVersionAtLeast(progress, last) || resourceVersionAtLeast(cachedVersion, last);
  }
}
