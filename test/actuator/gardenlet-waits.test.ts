// Which Extension events the controller serves before a resync (issue 31 point 3): those gardenlet's
// Extension Wait is running for. The queue's side is in test/kube/work-queue.test.ts.
import { describe, expect, it } from 'vitest';
import { gardenletWaits, OPERATION_ANNOTATION } from '../../src/gardener/extension-contract.js';
import type { Extension } from '../../src/gardener/objects.js';

const ext = (metadata: Partial<Extension['metadata']>, status?: Record<string, unknown>): Extension => ({
  apiVersion: 'extensions.gardener.cloud/v1alpha1',
  kind: 'Extension',
  metadata: { name: 'acl', namespace: 'shoot--p--a', generation: 2, ...metadata },
  spec: { type: 'acl' },
  ...(status ? { status } : {}),
});

describe('gardenletWaits', () => {
  it('an operation annotation, a generation not yet observed or a deletion: gardenlet waits', () => {
    expect(gardenletWaits(ext({ annotations: { [OPERATION_ANNOTATION]: 'reconcile' } }, { observedGeneration: 2, lastOperation: { state: 'Succeeded' } }))).toBe(true);
    expect(gardenletWaits(ext({}, { observedGeneration: 1, lastOperation: { state: 'Succeeded' } }))).toBe(true);
    expect(gardenletWaits(ext({}))).toBe(true);
    expect(gardenletWaits(ext({ deletionTimestamp: '2026-11-29T00:00:00Z' }, { observedGeneration: 2 }))).toBe(true);
  });

  it('an observed generation without annotation is a resync or a repair, even after an error (its retry has a backoff)', () => {
    expect(gardenletWaits(ext({}, { observedGeneration: 2, lastOperation: { state: 'Succeeded' } }))).toBe(false);
    expect(gardenletWaits(ext({}, { observedGeneration: 2, lastOperation: { state: 'Error' } }))).toBe(false);
  });
});
