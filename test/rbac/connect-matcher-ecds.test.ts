// The ECDS delivery's objects: the listener part never depends on the shoots, every bucket exists
// (the listeners name them all), one shoot's change touches its own bucket only, and a bucket
// over the size budget is an error that names the fix.
import { describe, expect, it } from 'vitest';
import { buildEcdsConnectObjects, ecdsBucketOf, ecdsBucketObjectName, ecdsListenerObjectName } from '../../src/rbac/connect-matcher-ecds.js';
import { testSeed, type TestShoot } from '../support/test-seed.js';

const shoot = (i: number, cidr = `203.0.${i}.0/24`): TestShoot => ({ id: `shoot--p--s${i}`, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [cidr] } });
const objectsFor = (shoots: readonly TestShoot[], buckets = 8, maxObjectBytes?: number) =>
  buildEcdsConnectObjects(testSeed(shoots, { operator: { combinedForm: 'ecds', ...(maxObjectBytes ? { maxObjectBytes } : {}) } }).seed, buckets);
const byName = (objects: ReturnType<typeof objectsFor>) => new Map(objects.map((o) => [o.metadata.name, JSON.stringify(o)]));

describe('ECDS delivery objects', () => {
  it('the listener parts are the same whatever the shoots; every bucket object exists', () => {
    const few = byName(objectsFor([shoot(1)]));
    const many = byName(objectsFor(Array.from({ length: 40 }, (_, i) => shoot(i))));
    for (const port of [8132, 8443]) expect(many.get(ecdsListenerObjectName(port))).toBe(few.get(ecdsListenerObjectName(port)));
    expect([...many.keys()].filter((n) => n.startsWith('acl-connect-ecds-b'))).toEqual(Array.from({ length: 8 }, (_, b) => ecdsBucketObjectName(b)));
    // With no ACL shoot the listener parts and (empty) buckets stay: their coming and going would drain every tunnel.
    expect(byName(objectsFor([])).get(ecdsListenerObjectName(8443))).toBe(few.get(ecdsListenerObjectName(8443)));
    expect(objectsFor([])).toHaveLength(2 + 8);
  });

  it('a change of one shoot rewrites exactly its bucket; the output is deterministic', () => {
    const shoots = Array.from({ length: 40 }, (_, i) => shoot(i));
    const before = byName(objectsFor(shoots));
    expect(byName(objectsFor([...shoots].reverse()))).toEqual(before);
    const after = byName(objectsFor(shoots.map((s, i) => (i === 7 ? shoot(7, '198.51.100.0/24') : s))));
    const changed = [...after].filter(([name, json]) => before.get(name) !== json).map(([name]) => name);
    expect(changed).toEqual([ecdsBucketObjectName(ecdsBucketOf('shoot--p--s7', 8))]);
  });

  it('a bucket count that is not a whole number of at least 1 is refused (jump hashing into 0 buckets would drop every shoot)', () => {
    for (const buckets of [0, -1, 1.5, Number.NaN]) expect(() => objectsFor([shoot(1)], buckets)).toThrow(/^bucket count .*: must be a whole number of at least 1$/);
  });

  it('resources are named by bucket alone; each port checks every header in turn against every bucket', () => {
    const objects = objectsFor([shoot(1)], 2);
    const resources = objects.flatMap((o) => o.spec.configPatches.filter((p) => p.applyTo === 'EXTENSION_CONFIG').map((p) => p.patch.value.name));
    expect(resources).toEqual(['gardener-acl-connect-bucket-000', 'gardener-acl-connect-bucket-001']);
    const part = objects.find((o) => o.metadata.name === ecdsListenerObjectName(8443));
    // INSERT_FIRST patches are listed last-first.
    const chain = [...(part?.spec.configPatches ?? [])].reverse().map((p) => p.patch.value.name);
    expect(chain).toEqual([
      'gardener-acl-connect-address-8443',
      'gardener-acl-connect-extract-8443',
      'gardener-acl-connect-target-8443',
      'gardener-acl-connect-target-8443-reversed-vpn',
      'gardener-acl-connect-bucket-000',
      'gardener-acl-connect-bucket-001',
      'gardener-acl-connect-target-8443-x-gardener-destination',
      'gardener-acl-connect-bucket-000',
      'gardener-acl-connect-bucket-001',
    ]);
  });

  it('a shoot that does not fit its bucket is an error that names the shoot, the bucket and the fix', () => {
    const big = Array.from({ length: 60 }, (_, i) => shoot(i));
    expect(() => objectsFor(big, 1, 16 * 1024)).toThrow(
      /^shoot--p--s\d+ needs \d+ bytes in ECDS bucket 0 of 1, which other shoots fill up to the 8721 bytes one object may hold; raise ecdsBuckets or maxObjectBytes in the OperatorConfiguration$/,
    );
  });

  it('the bucket count defaults to the OperatorConfiguration ecdsBuckets', () => {
    const seed = testSeed([shoot(1)], { operator: { combinedForm: 'ecds', ecdsBuckets: 3 } }).seed;
    expect(buildEcdsConnectObjects(seed).filter((o) => o.metadata.name.startsWith('acl-connect-ecds-b'))).toHaveLength(3);
  });
});
