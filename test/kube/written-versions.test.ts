// The one "the cache shows my write" record (src/kube/written-versions.ts): what it compares, and
// how long a note stands.
import { describe, expect, it } from 'vitest';
import { WrittenVersions, resourceVersionAtLeast } from '../../src/kube/written-versions.js';

describe('resourceVersionAtLeast', () => {
  it('compares etcd revisions as integers, anything else only by equality', () => {
    expect(resourceVersionAtLeast('10', '9')).toBe(true);
    expect(resourceVersionAtLeast('9', '10')).toBe(false);
    expect(resourceVersionAtLeast('123456789012345678901', '123456789012345678900')).toBe(true);
    expect(resourceVersionAtLeast('abc', 'abc')).toBe(true);
    expect(resourceVersionAtLeast('abd', 'abc')).toBe(false);
    expect(resourceVersionAtLeast(undefined, '1')).toBe(false);
  });
});

describe('WrittenVersions', () => {
  it('lags until the cache shows the write or a later one, then forgets it', () => {
    const written = new WrittenVersions();
    written.note('k', '20');
    expect(written.lagging('k', undefined)).toBe(true);
    expect(written.lagging('k', '19')).toBe(true);
    expect(written.lagging('k', '21')).toBe(false);
    expect(written.size()).toBe(0);
    expect(written.lagging('k', '5')).toBe(false);
  });

  it('a note stands for its hold only, and a write that reported no version is not noted', () => {
    let now = 0;
    const written = new WrittenVersions(2_000, () => now);
    written.note('k', '20');
    written.note('other', undefined);
    now = 1_999;
    expect(written.lagging('k', '19')).toBe(true);
    now = 2_000;
    expect(written.lagging('k', '19')).toBe(false);
    expect(written.lagging('other', undefined)).toBe(false);
    expect(written.size()).toBe(0);
  });
});
