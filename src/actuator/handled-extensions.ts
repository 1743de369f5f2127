// Which Extensions this controller acts on, as Gardener's extension library decides for its
// controllers (extensions/pkg/controller/extension/controller.go): only class `shoot`
// (hasShootClass), and not while the shoot's last operation is Failed (ShootNotFailedPredicate)
// unless it is being deleted.
import { hasShootClass } from '../gardener/extension-class.js';
import { FORCE_DELETION_ANNOTATION, type Cluster, type Extension } from '../gardener/objects.js';

export { hasShootClass } from '../gardener/extension-class.js';

export function shootFailed(cluster: Cluster | undefined): boolean {
  return cluster?.spec.shoot.status?.lastOperation?.state === 'Failed';
}

/** Why `ext` is left alone, or undefined when this controller handles it now. */
export function skipReason(ext: Extension, cluster: Cluster | undefined): string | undefined {
  if (!hasShootClass(ext)) return `class ${JSON.stringify(ext.spec.class)} is not handled by this controller (only shoot)`;
  if (shootFailed(cluster) && !ext.metadata.deletionTimestamp) return 'the shoot’s last operation failed; Gardener retries it by a new operation';
  return undefined;
}

/** Gardener's ShootNeedsForceDeletion on the shoot the Cluster carries. */
export function shootNeedsForceDeletion(cluster: Cluster | undefined): boolean {
  const value = cluster?.spec.shoot.metadata.annotations?.[FORCE_DELETION_ANNOTATION];
  return value !== undefined && ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value);
}
