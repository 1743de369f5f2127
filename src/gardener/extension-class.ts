// Whose an Extension is, as Gardener's extension library decides it for shoot controllers
// (pkg/controllerutils/predicate HasClass with GetExtensionClassOrDefault): an absent class means
// `shoot`, anything else, the empty string included, is the class it names. `seed` and `garden`
// Extensions belong to other controllers, and so does one whose class is "": the controller,
// the combined filters, the webhook and the render all ask this one question.
import { isMigrated, Operation, OPERATION_ANNOTATION } from './extension-contract.js';
import type { Extension } from './objects.js';

export const EXTENSION_TYPE = 'acl';
const SHOOT_CLASS = 'shoot';

export function hasShootClass(ext: Pick<Extension, 'spec'>): boolean {
  return (ext.spec.class ?? SHOOT_CLASS) === SHOOT_CLASS;
}

/** An Extension of ours whose shoot is served by this seed: not deleted, migrated or awaiting restore. */
export function isActive(ext: Extension): boolean {
  if (ext.spec.type !== EXTENSION_TYPE || !hasShootClass(ext) || ext.metadata.deletionTimestamp) return false;
  const annotation = ext.metadata.annotations?.[OPERATION_ANNOTATION];
  if (annotation === Operation.migrate || annotation === Operation.waitForState) return false;
  return !isMigrated(ext);
}
