// What the reference extension (stackitcloud/gardener-extension-acl) leaves on a seed when an
// operator switches to this one, and how each piece is retired once this controller protects the
// shoot (add before remove): its finalizer on the Extension (a shoot deletion would otherwise hang
// on it), its ManagedResource `acl-seed` (class seed, keepObjects false: the resource manager
// deletes its acl-api-/acl-vpn-/acl-http-proxy-/acl-ingress- filters with it), and its
// MutatingWebhookConfiguration `acl` from the releases before v1.10 (failurePolicy Fail on every
// EnvoyFilter write, pointing at a webhook that no longer runs).
import type { Logger } from 'pino';
import { describeError } from '../kube/errors.js';
import type { ClusterClient, ObjectRef } from './cluster-client.js';

export const REFERENCE_FINALIZER = 'extensions.gardener.cloud/acl-extension-service';
export const REFERENCE_MANAGED_RESOURCE = 'acl-seed';
const REFERENCE_WEBHOOK_CONFIGURATION = 'acl';
const REFERENCE_WEBHOOK_NAME = 'acl.stackit.cloud';

/**
 * The reference's Secret from Gardener's managed-resource helper before immutable Secrets; the
 * only Secret this controller may delete (RBAC names it). Later, hash-named ones carry the garbage
 * collector's label, so the resource manager deletes them once the ManagedResource is gone.
 */
export const REFERENCE_SECRET = 'managedresource-acl-seed';

const managedResourceRef = (namespace: string): ObjectRef => ({ apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: REFERENCE_MANAGED_RESOURCE, namespace });

/**
 * Deletes the reference's ManagedResource of one shoot and its mutable Secret. Called only once
 * this controller's own filters protect the shoot as stored, or when the shoot leaves the seed.
 * Returns whether there was one.
 */
export async function retireReferenceManagedResource(client: ClusterClient, namespace: string, surelyAbsent?: (ref: ObjectRef) => boolean): Promise<boolean> {
  // Almost every shoot never had one: the cache answers that without a GET per reconcile.
  if (surelyAbsent?.(managedResourceRef(namespace))) return false;
  const stored = await client.get(managedResourceRef(namespace));
  if (!stored) return false;
  const spec = stored['spec'] as { secretRefs?: { name?: string }[] } | undefined;
  await client.delete(managedResourceRef(namespace));
  if (spec?.secretRefs?.some((ref) => ref.name === REFERENCE_SECRET)) await client.delete({ apiVersion: 'v1', kind: 'Secret', name: REFERENCE_SECRET, namespace });
  return true;
}

/** The reference's webhook registration, deleted only when it is recognisably the reference's. */
export async function retireReferenceWebhook(client: ClusterClient, logger: Logger): Promise<void> {
  const ref: ObjectRef = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', name: REFERENCE_WEBHOOK_CONFIGURATION };
  try {
    const stored = await client.get(ref);
    const webhooks = (stored?.['webhooks'] as { name?: string }[] | undefined) ?? [];
    if (!webhooks.some((w) => w.name === REFERENCE_WEBHOOK_NAME)) return;
    await client.delete(ref);
    logger.info({ webhookConfiguration: REFERENCE_WEBHOOK_CONFIGURATION }, 'deleted the reference extension’s MutatingWebhookConfiguration');
  } catch (error) {
    logger.warn({ err: describeError(error) }, 'could not check or delete the reference extension’s MutatingWebhookConfiguration acl');
  }
}
