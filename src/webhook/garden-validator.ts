// The Garden's `acl` extension (operator.gardener.cloud, in the runtime cluster), checked where the
// operator writes it: the controller's own schema (Gardener does not validate a Garden's
// providerConfig, gardener/gardener#15000), and a guard against locking oneself out of the virtual
// garden. The API server does not tell an admission webhook the client's address, so the guard
// cannot ask whether the editor's own address stays admitted; it asks instead that a rule which
// admits fewer clients than the one in force has been in audit mode first (its shadow_denied
// counter and access log show whom it would refuse), or that the Garden confirms the risk.
import { z } from 'zod';
import { admitsFewer } from '../acl/admission-narrowing.js';
import { canonicalFamily, cidrContains, formatCidr, parseCidr, type Cidr } from '../acl/cidr.js';
import type { AclRule } from '../acl/acl-rule.js';
import { formatFieldErrors } from '../acl/field-errors.js';
import { parseProviderConfig } from '../acl/provider-config.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { EXTENSION_TYPE } from '../gardener/extension-class.js';
import { deny, type AdmissionRequest, type AdmissionVerdict } from './admission-review.js';

/** On the Garden: the operator accepts that a rule which admits fewer clients goes into force without an audit first. */
export const CONFIRM_LOCK_OUT_ANNOTATION = 'acl.gardener.cloud/confirm-lock-out-risk';

const gardenSchema = z.looseObject({
  kind: z.literal('Garden', { error: 'must be "Garden"' }),
  metadata: z.looseObject({ deletionTimestamp: z.string().nullish(), annotations: z.record(z.string(), z.string()).nullish() }).optional(),
  spec: z
    .looseObject({
      extensions: z.array(z.looseObject({ type: z.string(), providerConfig: z.unknown().optional() })).nullish(),
      runtimeCluster: z.looseObject({ networking: z.looseObject({ nodes: z.array(z.string()).nullish(), pods: z.array(z.string()).nullish() }).nullish() }).nullish(),
    })
    .optional(),
});

/** The runtime cluster's ranges the garden ACL always admits, as the Garden names them (unparsable ones are the Garden's own validation's to refuse). */
function runtimeRanges(garden: z.infer<typeof gardenSchema>): { readonly path: string; readonly cidr: Cidr }[] {
  const networking = garden.spec?.runtimeCluster?.networking;
  return (['nodes', 'pods'] as const).flatMap((field) =>
    (networking?.[field] ?? []).flatMap((text, i) => {
      const parsed = parseCidr(text);
      return parsed.ok ? [{ path: `spec.runtimeCluster.networking.${field}[${i}]`, cidr: parsed.cidr }] : [];
    }),
  );
}

function aclEntry(garden: z.infer<typeof gardenSchema>): { readonly index: number; readonly providerConfig: unknown } | undefined {
  const index = (garden.spec?.extensions ?? []).findIndex((e) => e.type === EXTENSION_TYPE);
  return index < 0 ? undefined : { index, providerConfig: garden.spec?.extensions?.[index]?.providerConfig };
}

/** The rule in force before this request: undefined when there was none (everyone admitted) or it cannot be read (then nothing is compared). */
function previousRule(oldObject: unknown, maxCidrs: number): { readonly rule: AclRule | undefined } | undefined {
  const old = gardenSchema.safeParse(oldObject);
  if (!old.success) return { rule: undefined };
  const entry = aclEntry(old.data);
  if (!entry) return { rule: undefined };
  const parsed = parseProviderConfig(entry.providerConfig, maxCidrs, 'spec.providerConfig');
  return parsed.ok ? { rule: parsed.rule } : undefined;
}

function overlaps(a: Cidr, b: Cidr): boolean {
  const x = canonicalFamily(a);
  const y = canonicalFamily(b);
  return x.family === y.family && (cidrContains(x, y) || cidrContains(y, x));
}

const EVERYONE: AclRule = { action: 'DENY', type: 'remote_ip', cidrs: [], mode: 'enforce' };

export function validateGarden(request: AdmissionRequest, maxCidrs: number): AdmissionVerdict {
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') return { allowed: true };
  const garden = gardenSchema.safeParse(request.object);
  if (!garden.success) return deny(400, 'BadRequest', `request.object is not a Garden: ${garden.error.issues[0]?.message ?? 'invalid'}`);
  if (garden.data.metadata?.deletionTimestamp) return { allowed: true };
  const entry = aclEntry(garden.data);
  if (!entry) return { allowed: true };
  const path = `spec.extensions[${entry.index}].providerConfig`;
  const parsed = parseProviderConfig(entry.providerConfig, maxCidrs, path);
  if (!parsed.ok) return deny(422, 'Invalid', formatFieldErrors(parsed.errors));
  const warnings = parsed.warnings.map((w) => `${w.path}: ${w.message}`);
  // A DENY of the runtime cluster's own ranges refuses nobody (they are always admitted: the
  // garden's components reach its API server from there); the owner meant something else.
  if (parsed.rule.action === 'DENY') {
    const denied = runtimeRanges(garden.data).filter(({ cidr }) => parsed.rule.cidrs.some((c) => overlaps(c, cidr)));
    if (denied.length > 0) {
      return deny(
        422,
        'Invalid',
        `${path}.rule.cidrs: a DENY of ${denied.map((d) => `${formatCidr(d.cidr)} (${d.path})`).join(', ')} refuses nobody there: the runtime cluster's nodes and pods are always admitted, since the garden's own components reach the virtual garden's API server from them; remove those ranges from the rule`,
      );
    }
  }
  const before = request.operation === 'UPDATE' ? previousRule(request.oldObject, maxCidrs) : { rule: undefined };
  const rule = parsed.rule;
  // The same rule in audit mode before, now enforced: the documented path.
  const audited = before?.rule !== undefined && before.rule.mode === 'audit' && jsonEqual({ ...before.rule, mode: 'enforce' }, { ...rule, mode: 'enforce' });
  const tightens = before !== undefined && !audited && admitsFewer({ rule: before.rule ?? EVERYONE, alwaysAllowed: [] }, { rule, alwaysAllowed: [] });
  if (tightens) {
    if (garden.data.metadata?.annotations?.[CONFIRM_LOCK_OUT_ANNOTATION] === 'true') {
      return { allowed: true, warnings: [...warnings, `${path}.rule: admits fewer clients than the rule in force, confirmed by the annotation ${CONFIRM_LOCK_OUT_ANNOTATION}; remove it now, so the next tightening is checked again`] };
    }
    return deny(
      422,
      'Invalid',
      `${path}.rule: admits fewer clients than the rule in force${before?.rule ? '' : ' (none: everyone)'} and is not the rule that was in audit mode, so it could lock you and every client it does not list out of the virtual garden's API server; set mode: audit first and switch it to enforce once gardener_acl_garden.virtual-garden.rbac.shadow_denied counts only clients you mean to refuse (docs/operators/garden.md), or confirm with the annotation ${CONFIRM_LOCK_OUT_ANNOTATION}: "true" on the Garden`,
    );
  }
  return warnings.length > 0 ? { allowed: true, warnings } : { allowed: true };
}
