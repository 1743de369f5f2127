// One answer to "is this Extension a shoot's?" everywhere (issue 33): Gardener's own predicate
// (HasClass with GetExtensionClassOrDefault) treats only an absent class as `shoot`. Before, the
// controller also took class "" for a shoot while the combined filters and the render did not:
// such an Extension was reconciled but never entered the CONNECT filters.
import { describe, expect, it } from 'vitest';
import { isActive } from '../../src/gardener/extension-class.js';
import { skipReason } from '../../src/actuator/handled-extensions.js';
import { hasShootClass } from '../../src/gardener/extension-class.js';
import { extensionSchema } from '../../src/gardener/objects.js';

const extension = (spec: Record<string, unknown>) => extensionSchema.parse({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', metadata: { name: 'acl', namespace: 'shoot--p--a' }, spec: { type: 'acl', ...spec } });

describe('which Extensions are a shoot’s', () => {
  it('an absent or null class and `shoot` are; "", `seed` and `garden` are not', () => {
    const verdicts = [{}, { class: null }, { class: 'shoot' }, { class: '' }, { class: 'seed' }, { class: 'garden' }].map((spec) => hasShootClass(extension(spec)));
    expect(verdicts).toEqual([true, true, true, false, false, false]);
  });

  it('the controller and the combined filters agree on class ""', () => {
    const empty = extension({ class: '' });
    expect(skipReason(empty, undefined)).toBe('class "" is not handled by this controller (only shoot)');
    expect(isActive(empty)).toBe(false);
    expect(skipReason(extension({}), undefined)).toBeUndefined();
    expect(isActive(extension({}))).toBe(true);
  });
});
