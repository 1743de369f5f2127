/** FNV-1a (32 bit): a fixed, dependency-free hash so shard assignment never changes between runs. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

export interface Sized<T> {
  readonly key: string;
  readonly bytes: number;
  readonly item: T;
}

export const MAX_SHARDS = 4096;

/**
 * Splits items into 2^k buckets by hash(key) mod 2^k, with the smallest k whose buckets all fit
 * `fits`. A change to one item touches one bucket; only crossing a size threshold doubles the
 * count (and then each bucket splits in two, keeping the rest of the layout). Buckets are in index
 * order, items in key order. An empty input yields no buckets.
 */
export function shardByHash<T>(items: readonly Sized<T>[], fits: (bytes: number, count: number) => boolean): Sized<T>[][] {
  if (items.length === 0) return [];
  const sorted = [...items].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const hashes = sorted.map((item) => fnv1a32(item.key));
  for (let count = 1; count <= MAX_SHARDS; count *= 2) {
    const buckets: Sized<T>[][] = Array.from({ length: count }, () => []);
    sorted.forEach((item, i) => buckets[(hashes[i] as number) % count]?.push(item));
    if (buckets.every((bucket) => fits(bucket.reduce((sum, item) => sum + item.bytes, 0), count))) return buckets;
  }
  const largest = sorted.reduce((max, item) => (item.bytes > max.bytes ? item : max));
  throw new Error(`cannot shard: "${largest.key}" alone needs ${largest.bytes} bytes, more than one object may hold`);
}
