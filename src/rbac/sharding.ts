const MASK64 = (1n << 64n) - 1n;

/** FNV-1a (64 bit): a fixed, dependency-free hash so shard assignment never changes between runs. */
export function fnv1a64(text: string): bigint {
  let hash = 0xcbf29ce484222325n;
  for (let i = 0; i < text.length; i++) {
    hash ^= BigInt(text.charCodeAt(i));
    hash = (hash * 0x100000001b3n) & MASK64;
  }
  return hash;
}

/**
 * Jump consistent hash (Lamping and Veach, 2014): maps a key to one of `buckets` buckets so that
 * going from n to n+1 buckets moves only about 1/(n+1) of the keys.
 */
export function jumpHash(key: bigint, buckets: number): number {
  let b = -1;
  let j = 0;
  let k = key;
  while (j < buckets) {
    b = j;
    k = (k * 2862933555777941757n + 1n) & MASK64;
    j = Math.floor((b + 1) * (2 ** 31 / Number((k >> 33n) + 1n)));
  }
  return b;
}

export interface Sized<T> {
  readonly key: string;
  readonly bytes: number;
  readonly item: T;
}

export const MAX_SHARDS = 4096;

/**
 * Splits items into jump-hash buckets that each stay within `budget` bytes, starting from the
 * least count that could fit and growing by about 5% per try. A change to
 * one item touches one bucket; when the count has to grow by one, only ~1/n of the items move.
 * Buckets are in index order, items in key order; empty input yields no buckets.
 */
export function shardByHash<T>(items: readonly Sized<T>[], budget: number): Sized<T>[][] {
  if (items.length === 0) return [];
  const sorted = [...items].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const largest = sorted.reduce((max, item) => (item.bytes > max.bytes ? item : max));
  if (largest.bytes > budget) throw new Error(`cannot shard: "${largest.key}" alone needs ${largest.bytes} bytes, more than the ${budget} one object may hold`);
  const hashes = sorted.map((item) => fnv1a64(item.key));
  const total = sorted.reduce((sum, item) => sum + item.bytes, 0);
  // Grow by ~5% per step: a few more shards at most, but few passes over large seeds.
  for (let count = Math.max(1, Math.ceil(total / budget)); count <= MAX_SHARDS; count = Math.max(count + 1, Math.ceil(count * 1.05))) {
    const buckets: Sized<T>[][] = Array.from({ length: count }, () => []);
    const bytes = new Array<number>(count).fill(0);
    sorted.forEach((item, i) => {
      const b = jumpHash(hashes[i] as bigint, count);
      buckets[b]?.push(item);
      bytes[b] = (bytes[b] ?? 0) + item.bytes;
    });
    if (bytes.every((b) => b <= budget)) return buckets;
  }
  throw new Error(`cannot shard ${items.length} items of ${total} bytes into ${MAX_SHARDS} objects of ${budget} bytes`);
}

/**
 * The non-empty buckets of shardByHash with their index. Empty buckets get no object, and names
 * stay tied to the bucket index, so the other shards keep theirs.
 */
export function indexedShards<T>(items: readonly Sized<T>[], budget: number): { readonly shard: Sized<T>[]; readonly index: number }[] {
  return shardByHash(items, budget)
    .map((shard, index) => ({ shard, index }))
    .filter(({ shard }) => shard.length > 0);
}

/** Where an item is stored now, and how many bytes its stored entry takes there. */
export interface StoredPlace {
  readonly bucket: number;
  readonly bytes: number;
}

/**
 * Items in exactly `count` jump-hash buckets (every bucket, empty ones too), each within `budget`
 * bytes. The bucket names are fixed, so an item that does not fit its bucket is not moved to
 * another but returned as overflow. Items already stored in their own bucket go first, so a
 * newcomer never pushes one of them out; one of them that no longer fits (it grew) keeps its
 * stored bytes reserved there, because its stored entry stays. Then the others, in key order, so
 * the same ones overflow on every run.
 */
export function fixedBuckets<T>(
  items: readonly Sized<T>[],
  count: number,
  budget: number,
  stored: ReadonlyMap<string, StoredPlace> = new Map(),
): { readonly buckets: Sized<T>[][]; readonly overflow: { readonly item: Sized<T>; readonly bucket: number }[] } {
  if (!Number.isInteger(count) || count < 1) throw new Error(`bucket count ${count}: must be a whole number of at least 1`);
  const buckets: Sized<T>[][] = Array.from({ length: count }, () => []);
  const bytes = new Array<number>(count).fill(0);
  const overflow: { item: Sized<T>; bucket: number }[] = [];
  const sorted = [...items].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map((item) => ({ item, bucket: jumpHash(fnv1a64(item.key), count) }));
  const settled = sorted.filter(({ item, bucket }) => stored.get(item.key)?.bucket === bucket);
  const newcomers = sorted.filter(({ item, bucket }) => stored.get(item.key)?.bucket !== bucket);
  for (const [placing, reserveStored] of [
    [settled, true],
    [newcomers, false],
  ] as const) {
    for (const { item, bucket } of placing) {
      if ((bytes[bucket] ?? 0) + item.bytes <= budget) {
        buckets[bucket]?.push(item);
        bytes[bucket] = (bytes[bucket] ?? 0) + item.bytes;
        continue;
      }
      overflow.push({ item, bucket });
      if (reserveStored) bytes[bucket] = (bytes[bucket] ?? 0) + (stored.get(item.key)?.bytes ?? 0);
    }
  }
  for (const bucket of buckets) bucket.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { buckets, overflow };
}
