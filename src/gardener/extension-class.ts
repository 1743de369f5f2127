// Whose an Extension is, as Gardener's extension library decides it for shoot controllers
// (pkg/controllerutils/predicate HasClass with GetExtensionClassOrDefault): an absent class means
// `shoot`, anything else, the empty string included, is the class it names. `seed` and `garden`
// Extensions belong to other controllers, and so does one whose class is "": the controller,
// the combined filters, the webhook and the render all ask this one question.
import type { Extension } from './objects.js';

const SHOOT_CLASS = 'shoot';

export function hasShootClass(ext: Pick<Extension, 'spec'>): boolean {
  return (ext.spec.class ?? SHOOT_CLASS) === SHOOT_CLASS;
}
