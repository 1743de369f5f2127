// What the controller last applied for a shoot, kept in Extension.status.state. The combined
// CONNECT filters are rebuilt from it, so an invalid providerConfig or a missing input never
// removes a shoot's protection, and a restore after migration starts from it.
import { z } from 'zod';
import { formatCidr, type Cidr } from '../acl/cidr.js';
import { cidrStringSchema } from '../acl/cidr-schema.js';
import { ACTIONS, PRINCIPAL_TYPES, RULE_MODES } from '../acl/provider-config.js';
import type { ShootAcl } from '../acl/model.js';

const appliedSchema = z.object({
  rule: z.object({
    action: z.enum(ACTIONS),
    type: z.enum(PRINCIPAL_TYPES),
    cidrs: z.array(cidrStringSchema).min(1),
    // Always recorded, so that a status merge patch built from a stale cache can never leave an
    // old `audit` behind; states written before modes existed read as enforce.
    mode: z.enum(RULE_MODES).default('enforce'),
  }),
  alwaysAllowed: z.array(cidrStringSchema),
  legacyProxyAllowed: z.array(cidrStringSchema).default([]),
});

export const stateSchema = z.looseObject({
  /** Gateway namespaces the shoot's own EnvoyFilters were written to. */
  gatewayNamespaces: z.array(z.string()).default([]),
  applied: appliedSchema.optional(),
});

export type ExtensionState = z.output<typeof stateSchema>;

/** The part of a shoot's ACL the combined filters need (they carry no SNI chains). */
export type AppliedAcl = Pick<ShootAcl, 'technicalID' | 'rule' | 'alwaysAllowed' | 'legacyProxyAllowed'>;

const strings = (cidrs: readonly Cidr[]): string[] => cidrs.map(formatCidr);

export function stateFor(acl: ShootAcl): { gatewayNamespaces: string[]; applied: z.input<typeof appliedSchema> } {
  return {
    gatewayNamespaces: [...new Set(acl.sniChains.map((c) => c.gateway.namespace))].sort(),
    applied: {
      rule: { action: acl.rule.action, type: acl.rule.type, cidrs: strings(acl.rule.cidrs), mode: acl.rule.mode },
      alwaysAllowed: strings(acl.alwaysAllowed),
      legacyProxyAllowed: strings(acl.legacyProxyAllowed),
    },
  };
}

/** The last applied ACL from status.state; undefined if none was ever applied or it is unreadable. */
export function appliedFromState(technicalID: string, state: unknown): AppliedAcl | undefined {
  const parsed = stateSchema.safeParse(state ?? {});
  const applied = parsed.success ? parsed.data.applied : undefined;
  if (!applied) return undefined;
  return { technicalID, rule: applied.rule, alwaysAllowed: applied.alwaysAllowed, legacyProxyAllowed: applied.legacyProxyAllowed };
}
