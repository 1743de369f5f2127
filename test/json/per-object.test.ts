// perObject reads each object once: the combined readings rely on it to parse only the stored
// filters that changed (a changed filter is a new object in the cache).
import { describe, expect, it } from 'vitest';

import { perObject } from '../../src/json/per-object.js';

describe('perObject', () => {
  it('reads an object once and a new object (a stored change) again, undefined results included', () => {
    const reads: string[] = [];
    const read = perObject((o: { name: string }) => {
      reads.push(o.name);
      return o.name === 'none' ? undefined : o.name.toUpperCase();
    });
    const a = { name: 'a' };
    const none = { name: 'none' };
    expect([read(a), read(a), read(none), read(none)]).toEqual(['A', 'A', undefined, undefined]);
    // The same content in a new object is read again: identity, not content, keys the memo.
    expect(read({ name: 'a' })).toBe('A');
    expect(reads).toEqual(['a', 'none', 'a']);
  });
});
