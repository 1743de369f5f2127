// The mutating webhook for EnvoyFilters:
// (a) Gardener's per-shoot legacy apiserver-proxy filters (names `shoot-...`) get the shoot's
//     network RBAC filter first in their chain (an EnvoyFilter cannot patch a chain another one
//     added, istio#41536), or lose it when the shoot has no active ACL;
// (b) combined CONNECT filters (`acl-connect-...`) written by anyone but the controller are
//     rewritten to the authoritative content, so no stale writer can install a filter that
//     misses a shoot or a header. A name the authoritative set does not contain is refused on
//     CREATE (the controller would only delete it again) and emptied on UPDATE (so metadata-only
//     updates such as removing a finalizer still pass, and the object enforces nothing wrong
//     until the controller deletes it).
// fast-json-patch is CommonJS: under Node's ESM loader only its default export exists.
import jsonpatch, { type Operation } from 'fast-json-patch';
import { z } from 'zod';
import type { OperatorConfig } from '../acl/operator-config.js';
import { CONNECT_FILTER_PREFIX } from '../rbac/combined-connect-filters.js';
import { legacyProxyPatch } from '../rbac/legacy-proxy-patch.js';
import { deny, type AdmissionRequest, type AdmissionVerdict } from './admission-review.js';
import type { AclIndex } from './acl-index.js';

export const LEGACY_FILTER_PREFIX = 'shoot-';

const envoyFilterSchema = z.looseObject({
  kind: z.literal('EnvoyFilter', { error: 'must be "EnvoyFilter"' }),
  metadata: z.looseObject({ name: z.string().optional(), namespace: z.string().optional(), labels: z.record(z.string(), z.string()).optional() }),
  spec: z.looseObject({}).optional(),
});
type EnvoyFilter = z.infer<typeof envoyFilterSchema>;

const ALLOW: AdmissionVerdict = { allowed: true };

/**
 * `controllerUsername`: the AUTHENTICATED user (request.userInfo.username, set by the API
 * server) whose writes of combined filters are let through unchanged: the controller, which
 * writes them from recorded state. Nothing a client sends about itself (such as
 * `fieldManager`) is trusted. Without it, every write of a combined filter is rewritten.
 */
export function mutateEnvoyFilter(request: AdmissionRequest, index: AclIndex, operator: OperatorConfig, controllerUsername?: string): AdmissionVerdict {
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
  // Refusing is safer than guessing: an empty cache would strip every legacy filter's RBAC.
  if (!index.synced()) return deny(503, 'ServiceUnavailable', 'the webhook caches are not synced yet; retry shortly');
  if (isLegacy) return { allowed: true, patch: legacyProxyPatch(request.object, (id) => index.legacyAcl(id), operator.legacyProxyPort) };
  if (controllerUsername !== undefined && request.userInfo?.username === controllerUsername) return ALLOW;
  return authoritativeCombined(request, filter, index);
}

function authoritativeCombined(request: AdmissionRequest, filter: EnvoyFilter, index: AclIndex): AdmissionVerdict {
  const namespace = filter.metadata.namespace ?? request.namespace ?? '';
  const name = filter.metadata.name ?? request.name ?? '';
  const desired = index.combinedFilter(namespace, name);
  if (!desired && request.operation === 'CREATE') {
    return deny(
      403,
      'Forbidden',
      `EnvoyFilter ${namespace}/${name}: names starting "${CONNECT_FILTER_PREFIX}" are reserved for gardener-acl's combined CONNECT filters, and the current ACLs of this seed need no filter of this name`,
    );
  }
  const wanted = desired
    ? { ...filter, metadata: { ...filter.metadata, labels: { ...filter.metadata.labels, ...desired.metadata.labels } }, spec: desired.spec }
    : { ...filter, spec: {} };
  const patch: Operation[] = jsonpatch.compare(filter, JSON.parse(JSON.stringify(wanted)) as object);
  const warning = desired
    ? `EnvoyFilter ${namespace}/${name} is managed by gardener-acl; its content was replaced by the authoritative combined CONNECT filter`
    : `EnvoyFilter ${namespace}/${name} is not part of gardener-acl's current combined CONNECT filters; its spec was emptied`;
  return patch.length > 0 ? { allowed: true, patch, warnings: [warning] } : ALLOW;
}
