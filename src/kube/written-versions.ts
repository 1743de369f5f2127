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
  readonly resourceVersion: string;
  readonly until: number;
}

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
    this.notes.set(key, { resourceVersion, until: this.now() + this.holdMs });
  }

  /**
   * Whether the cache's copy of `key` (its resourceVersion, undefined when the cache holds none)
   * is older than the last write noted for it, within the hold. A note the cache has caught up
   * with, or whose hold has passed, is dropped.
   */
  lagging(key: string, cachedVersion: string | undefined): boolean {
    const note = this.notes.get(key);
    if (note === undefined) return false;
    if (!resourceVersionAtLeast(cachedVersion, note.resourceVersion) && this.now() < note.until) return true;
    this.notes.delete(key);
    return false;
  }

  forget(key: string): void {
    this.notes.delete(key);
  }

  /** Keys with a note (for tests and diagnostics). */
  size(): number {
    return this.notes.size;
  }
}
