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
    const written = new WrittenVersions({ holdMs: 2_000, now: () => now });
    written.note('k', '20');
    written.note('other', undefined);
    now = 1_999;
    expect(written.lagging('k', '19')).toBe(true);
    now = 2_000;
    expect(written.lagging('k', '19')).toBe(false);
    expect(written.lagging('other', undefined)).toBe(false);
    expect(written.size()).toBe(0);
  });

  it('tells our own events from another writer\'s: every version we got back, and our deletes', () => {
    const written = new WrittenVersions();
    written.note('k', '20');
    written.note('k', '22');
    expect(written.isOwn('k', 'update', '20')).toBe(true);
    expect(written.isOwn('k', 'update', '22')).toBe(true);
    expect(written.isOwn('k', 'update', '21')).toBe(false);
    expect(written.isOwn('k', 'delete', undefined)).toBe(false);
    expect(written.isOwn('other', 'add', '20')).toBe(false);
    written.noteDeleted('k');
    expect(written.isOwn('k', 'delete', undefined)).toBe(true);
    expect(written.isOwn('k', 'update', '22')).toBe(false);
  });

  it('a delete lags while the cache holds a copy; a write lags until the copy or the watch position shows its last version', () => {
    const written = new WrittenVersions();
    written.noteDeleted('gone');
    written.note('k', '20');
    written.note('k', '30');
    const cached = new Map<string, string>([['gone', '5'], ['k', '20']]);
    expect(written.caughtUp((k) => cached.get(k), '29')).toBe(false);
    expect(written.size()).toBe(2);
    cached.delete('gone');
    expect(written.caughtUp((k) => cached.get(k), '29')).toBe(false);
    expect(written.size()).toBe(1);
    expect(written.caughtUp((k) => cached.get(k), '30')).toBe(true);
    expect(written.size()).toBe(0);
  });

  it('reports a note given up on after its hold, with how long it waited', () => {
    let now = 0;
    const gaveUp: [string, number][] = [];
    const written = new WrittenVersions({ holdMs: 10_000, now: () => now, onGiveUp: (key, waitedMs) => gaveUp.push([key, waitedMs]) });
    written.note('k', '20');
    now = 9_000;
    expect(written.caughtUp(() => '19')).toBe(false);
    expect(gaveUp).toEqual([]);
    now = 10_500;
    expect(written.caughtUp(() => '19')).toBe(true);
    expect(gaveUp).toEqual([['k', 10_500]]);
  });
});
