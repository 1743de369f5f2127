// Garden-side validation of a Shoot's `acl` extension with the controller's own schema, so a
// typo is refused when the owner writes it instead of surfacing later as the Extension's
// lastError.
import { z } from 'zod';
import { formatFieldErrors, type FieldError } from '../acl/field-errors.js';
import { parseProviderConfig } from '../acl/provider-config.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { isEnabledAclEntry } from '../gardener/shoot-manifest.js';
import { deny, type AdmissionRequest, type AdmissionVerdict } from './admission-review.js';

const shootSchema = z.looseObject({
  kind: z.literal('Shoot', { error: 'must be "Shoot"' }),
  metadata: z.looseObject({ deletionTimestamp: z.string().nullish() }).optional(),
  spec: z
    .looseObject({
      extensions: z.array(z.looseObject({ type: z.string(), providerConfig: z.unknown().optional(), disabled: z.boolean().nullish() })).nullish(),
    })
    .optional(),
});
type ShootExtensions = NonNullable<NonNullable<z.infer<typeof shootSchema>['spec']>['extensions']>;

function aclEntries(extensions: ShootExtensions | null | undefined) {
  return (extensions ?? []).map((entry, index) => ({ entry, index })).filter(({ entry }) => isEnabledAclEntry(entry));
}

function oldAclEntries(oldObject: unknown): unknown {
  const old = shootSchema.safeParse(oldObject);
  return old.success ? aclEntries(old.data.spec?.extensions).map(({ entry }) => entry) : undefined;
}

export function validateShoot(request: AdmissionRequest, maxCidrs: number): AdmissionVerdict {
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') return { allowed: true };
  const shoot = shootSchema.safeParse(request.object);
  if (!shoot.success) return deny(400, 'BadRequest', `request.object is not a Shoot: ${shoot.error.issues[0]?.message ?? 'invalid'}`);
  // A Shoot being deleted must be able to lose its finalizers whatever its configuration says.
  if (shoot.data.metadata?.deletionTimestamp) return { allowed: true };
  const entries = aclEntries(shoot.data.spec?.extensions);
  const results = entries.map(({ entry, index }) => parseProviderConfig(entry.providerConfig, maxCidrs, `spec.extensions[${index}].providerConfig`));
  const errors: FieldError[] = results.flatMap((result) => (result.ok ? [] : result.errors));
  if (errors.length === 0) {
    const warnings = results.flatMap((result) => (result.ok ? result.warnings : [])).map((w) => `${w.path}: ${w.message}`);
    return warnings.length > 0 ? { allowed: true, warnings } : { allowed: true };
  }
  // An update that leaves the ACL as it was (e.g. after the operator lowered maxCIDRs) must not
  // block unrelated changes to the Shoot; the owner is warned instead.
  if (request.operation === 'UPDATE' && jsonEqual(entries.map(({ entry }) => entry), oldAclEntries(request.oldObject))) {
    return { allowed: true, warnings: errors.map((e) => `${e.path}: ${e.message} (unchanged by this update)`) };
  }
  return deny(422, 'Invalid', formatFieldErrors(errors));
}
