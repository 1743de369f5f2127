// What this process last wrote per key, until its informer cache shows that write. A decision
// taken on an older cached copy would repeat writes already made (a status patch, an apply), or
// worse, take the copy from before a write for what is stored now.
import { performance } from 'node:perf_hooks';

/** etcd-backed resourceVersions are increasing integers (comparable since Kubernetes 1.35); anything else only by equality. */
export function resourceVersionAtLeast(have: string | undefined, want: string): boolean {
  if (have === undefined) return false;
  if (have === want) return true;
  return /^\d+$/.test(have) && /^\d+$/.test(want) && BigInt(have) >= BigInt(want);
}

interface Note {
  /** undefined: the write was a delete. */
  readonly resourceVersion: string | undefined;
  readonly at: number;
  readonly until: number;
}

/** What a cache event shows of `key`: that it is gone, or a copy with this resourceVersion. */
export type CachedChange = { readonly deleted: true } | { readonly deleted: false; readonly resourceVersion: string | undefined };

export class WrittenVersions {
  private readonly notes = new Map<string, Note>();

  /**
   * `holdMs`: how long a note stands while the cache does not show it (Infinity: until it does).
   * Past it the caller decides on the cached copy again: a watch that lost the event must not hold
   * the key for ever when the next decision does not depend on it.
   */
  constructor(
    private readonly holdMs = Infinity,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The server answered a write of `key` with `resourceVersion` (a write that reported none is not noted). */
  note(key: string, resourceVersion: string | undefined): void {
    if (resourceVersion === undefined || resourceVersion === '') return;
    this.notes.set(key, { resourceVersion, at: this.now(), until: this.now() + this.holdMs });
  }

  /** The server answered a delete of `key`: the cache lags while it still holds a copy. */
  noteDeleted(key: string): void {
    this.notes.set(key, { resourceVersion: undefined, at: this.now(), until: this.now() + this.holdMs });
  }

  /** Whether a cache event shows the write last noted for `key` (not someone else's change, nor one we have not noted). */
  isNoted(key: string, change: CachedChange): boolean {
    const note = this.notes.get(key);
    if (note === undefined) return false;
    return change.deleted ? note.resourceVersion === undefined : note.resourceVersion !== undefined && note.resourceVersion === change.resourceVersion;
  }

  /**
   * Whether the cache's copy of `key` (its resourceVersion, undefined when the cache holds none)
   * is older than the last write noted for it (for a delete: whether the cache still holds a copy),
   * within the hold. `progress`, the informer's watch position, shows a write as well. A note the
   * cache has caught up with, or whose hold has passed, is dropped; `onGiveUp` hears of the latter.
   */
  lagging(key: string, cachedVersion: string | undefined, progress?: string, onGiveUp?: (waitedMs: number) => void): boolean {
    const note = this.notes.get(key);
    if (note === undefined) return false;
    const behind =
      note.resourceVersion === undefined ? cachedVersion !== undefined : !resourceVersionAtLeast(cachedVersion, note.resourceVersion) && !resourceVersionAtLeast(progress, note.resourceVersion);
    const now = this.now();
    if (behind && now < note.until) return true;
    this.notes.delete(key);
    if (behind) onGiveUp?.(now - note.at);
    return false;
  }

  /** Keys with a note, in the order they were first noted. */
  keys(): string[] {
    return [...this.notes.keys()];
  }

  forget(key: string): void {
    this.notes.delete(key);
  }

  /** Keys with a note (for tests and diagnostics). */
  size(): number {
    return this.notes.size;
  }
}
