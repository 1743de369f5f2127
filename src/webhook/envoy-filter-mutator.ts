// The mutating webhook for EnvoyFilters:
// (a) Gardener's per-shoot legacy apiserver-proxy filters (names `shoot-...`) get the shoot's
//     network RBAC filter first in their chain (an EnvoyFilter cannot patch a chain another one
//     added, istio#41536), or lose it when the shoot has no active ACL. Anyone who can reach the
//     webhook can send it a review, so the ACL goes only into an update of a filter the API server
//     stores (the review's old object has the stored object's uid, which only those who can read
//     EnvoyFilters know, and they can read the ACL in the stored filter anyway). A create, or a
//     made-up review, gets for an ACL shoot a filter that refuses everyone: it reveals no range,
//     and the controller's next write of the stored filter (it watches them) brings the ACL;
// (b) combined CONNECT filters (`acl-connect-...`) may be written only by the controller (its
//     authenticated user); anyone else's create or spec change is refused, so no stale or foreign
//     writer can install a filter that misses a shoot or a header, and no answer ever carries the
//     combined content (every shoot's ranges, the seed's networks) to whoever can reach the port.
//     Metadata-only updates (a finalizer removed) pass.
import { z } from 'zod';
import type { OperatorConfig } from '../config/operator-config.js';
import { CONNECT_FILTER_PREFIX } from '../rbac/combined-connect-filters.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { describeError } from '../kube/errors.js';
import { LEGACY_FILTER_PREFIX, SEALED, findLegacyChains, legacyProxyPatch } from '../rbac/legacy-proxy-patch.js';
import { deny, type AdmissionRequest, type AdmissionVerdict } from './admission-review.js';
import type { AclIndex } from './acl-index.js';


const envoyFilterSchema = z.looseObject({
  kind: z.literal('EnvoyFilter', { error: 'must be "EnvoyFilter"' }),
  metadata: z.looseObject({ name: z.string().optional(), namespace: z.string().optional(), labels: z.record(z.string(), z.string()).optional() }),
  spec: z.looseObject({}).optional(),
});
type EnvoyFilter = z.infer<typeof envoyFilterSchema>;

const ALLOW: AdmissionVerdict = { allowed: true };

/** The uid of the stored EnvoyFilter namespace/name (undefined: none is stored); throws when it cannot be read. */
export type StoredUidLookup = (namespace: string, name: string) => Promise<string | undefined>;

const oldMetadata = z.looseObject({ metadata: z.looseObject({ uid: z.string().min(1) }) });

/**
 * The webhook's answer, after telling whether the review is of a stored legacy filter: an update
 * whose old object carries the uid the API server stores for that namespace and name. Without a
 * lookup, no review is. A lookup that fails is a refusal to retry, never a guess. Only a review
 * whose chains lead to a shoot with an active ACL costs the lookup: for any other the answer
 * reveals nothing either way.
 */
export async function admitEnvoyFilter(
  request: AdmissionRequest,
  index: AclIndex,
  operator: OperatorConfig,
  controllerUsername: string | undefined,
  storedUid: StoredUidLookup | undefined,
): Promise<AdmissionVerdict> {
  const name = (request.object as { metadata?: { name?: unknown } } | undefined)?.metadata?.name ?? request.name;
  const oldUid = oldMetadata.safeParse(request.oldObject).data?.metadata.uid;
  let ofStoredFilter = false;
  const leadsToAcl = () => findLegacyChains(request.object, operator.legacyProxyPort).some((target) => index.legacyAcl(target.technicalID) !== undefined);
  if (request.operation === 'UPDATE' && typeof name === 'string' && name.startsWith(LEGACY_FILTER_PREFIX) && oldUid !== undefined && storedUid !== undefined && leadsToAcl()) {
    const namespace = request.namespace ?? '';
    try {
      ofStoredFilter = (await storedUid(namespace, name)) === oldUid;
    } catch (error) {
      return deny(503, 'ServiceUnavailable', `cannot read the stored EnvoyFilter ${namespace}/${name} to check the review against it: ${describeError(error)}; retry shortly`);
    }
  }
  return mutateEnvoyFilter(request, index, operator, controllerUsername, ofStoredFilter);
}

/**
 * `ofStoredFilter`: the review is of a stored legacy filter (admitEnvoyFilter); otherwise an ACL
 * shoot's legacy chain gets a filter that refuses everyone.
 * `controllerUsername`: the AUTHENTICATED user (request.userInfo.username, set by the API
 * server) whose writes of combined filters are let through unchanged: the controller, which
 * writes them from recorded state. Nothing a client sends about itself (such as
 * `fieldManager`) is trusted. Without it, every create or spec change of a combined filter is
 * refused (the webhook configuration's matchConditions normally spare the controller the call).
 */
export function mutateEnvoyFilter(request: AdmissionRequest, index: AclIndex, operator: OperatorConfig, controllerUsername?: string, ofStoredFilter = false): AdmissionVerdict {
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') return ALLOW;
  const parsed = envoyFilterSchema.safeParse(request.object);
  if (!parsed.success) return deny(400, 'BadRequest', `request.object is not an EnvoyFilter: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'object'} ${i.message}`).join('; ')}`);
  const filter = parsed.data;
  const name = filter.metadata.name ?? request.name ?? '';
  const isLegacy = name.startsWith(LEGACY_FILTER_PREFIX);
  const isCombined = name.startsWith(CONNECT_FILTER_PREFIX);
  // The API server's matchConditions already narrow the calls to these names; anything else
  // (a broader registration, a direct call) passes untouched.
  if (!isLegacy && !isCombined) return ALLOW;
  if (isCombined) {
    if (controllerUsername !== undefined && request.userInfo?.username === controllerUsername) return ALLOW;
    return guardCombined(request, filter);
  }
  // Refusing is safer than guessing: an empty cache would strip every legacy filter's RBAC.
  if (!index.synced()) return deny(503, 'ServiceUnavailable', 'the webhook caches are not synced yet; retry shortly');
  const aclOf = ofStoredFilter ? (id: string) => index.legacyAcl(id) : (id: string) => (index.legacyAcl(id) === undefined ? undefined : SEALED);
  return { allowed: true, patch: legacyProxyPatch(request.object, aclOf, operator.legacyProxyPort, request.oldObject) };
}

function guardCombined(request: AdmissionRequest, filter: EnvoyFilter): AdmissionVerdict {
  const namespace = filter.metadata.namespace ?? request.namespace ?? '';
  const name = filter.metadata.name ?? request.name ?? '';
  // Metadata-only updates (labels, finalizers) pass; the content is the controller's alone.
  const oldSpec = (request.oldObject as { spec?: unknown } | undefined)?.spec;
  if (request.operation === 'UPDATE' && jsonEqual(oldSpec ?? {}, filter.spec ?? {})) return ALLOW;
  return deny(
    403,
    'Forbidden',
    `EnvoyFilter ${namespace}/${name}: names starting "${CONNECT_FILTER_PREFIX}" are reserved for gardener-acl's combined CONNECT filters, whose content only its controller writes ` +
      `(it repairs any difference within seconds); other users may change their metadata only. If this request comes from the controller, give the webhook its user ` +
      `(webhook --controller-username, or the controller user of the webhook configuration)`,
  );
}
