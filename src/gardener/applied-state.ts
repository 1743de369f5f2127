// What the controller last applied for a shoot, kept in Extension.status.state. The combined
// CONNECT filters are rebuilt from it, so an invalid providerConfig or a missing input never
// removes a shoot's protection, and a restore after migration starts from it.
import { z } from 'zod';
import { formatCidr, type Cidr } from '../acl/cidr.js';
import { cidrStringSchema } from '../acl/cidr-schema.js';
import { perObject } from '../json/per-object.js';
import { ACTIONS, PRINCIPAL_TYPES, RULE_MODES } from '../acl/acl-rule.js';
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

/**
 * With tunnelRevocation hop: the generation of the shoot's tunnel hops, and the widest ACL the
 * CONNECT filters may have admitted a tunnel under since it was raised (see tunnel-generation.ts).
 */
export const tunnelsSchema = z.object({
  generation: z.number().int().min(1),
  /**
   * A raise recorded before the CONNECT filters hold the tightened ACL: the hop stays at this
   * generation until they do (the combined syncer checks), then takes `generation`.
   */
  raiseFrom: z.number().int().min(1).optional(),
  admitted: appliedSchema.pick({ rule: true, alwaysAllowed: true }),
});

export const stateSchema = z.looseObject({
  /** Gateway namespaces the shoot's own EnvoyFilters were written to. */
  gatewayNamespaces: z.array(z.string()).default([]),
  /**
   * The API server hosts the SNI filters were written for: while the shoot has no Gateway (before
   * it is created, on a seed it was restored to) they stay protected with the predicted ones.
   */
  sniHosts: z.array(z.string()).default([]),
  applied: appliedSchema.optional(),
  // Read on its own (tunnel-generation.ts): an unreadable entry must not make `applied` unreadable,
  // which would take the shoot out of the combined filters.
  tunnels: z.unknown().optional(),
  /** With tunnelRevocation hop: gateway namespaces the shoot's hops were written to (every gateway of the seed). */
  hopNamespaces: z.array(z.string()).default([]),
});

/** status.state.tunnels as written (CIDRs as strings). */
export type RecordedTunnelState = z.input<typeof tunnelsSchema>;

export type ExtensionState = z.output<typeof stateSchema>;

/** The part of a shoot's ACL the combined filters need (they carry no SNI chains). */
export type AppliedAcl = Pick<ShootAcl, 'technicalID' | 'rule' | 'alwaysAllowed' | 'legacyProxyAllowed'>;

const strings = (cidrs: readonly Cidr[]): string[] => cidrs.map(formatCidr);

/** What is recorded for an ACL: a shoot's, or the virtual garden's (no legacy path). */
export function stateFor(acl: Pick<ShootAcl, 'rule' | 'alwaysAllowed' | 'sniChains'> & Partial<Pick<ShootAcl, 'legacyProxyAllowed'>>): { gatewayNamespaces: string[]; sniHosts: string[]; applied: z.input<typeof appliedSchema> } {
  return {
    gatewayNamespaces: [...new Set(acl.sniChains.map((c) => c.gateway.namespace))].sort(),
    sniHosts: [...new Set(acl.sniChains.flatMap((c) => c.hosts))].sort(),
    applied: {
      rule: { action: acl.rule.action, type: acl.rule.type, cidrs: strings(acl.rule.cidrs), mode: acl.rule.mode },
      alwaysAllowed: strings(acl.alwaysAllowed),
      legacyProxyAllowed: strings(acl.legacyProxyAllowed ?? []),
    },
  };
}

/**
 * The cached Extensions keep the same status.state object until it changes, and every combined
 * sync, health recheck and served check reads all of them: parsed once per object.
 */
const parsedState = perObject((state: object) => stateSchema.safeParse(state));

function recordedApplied(state: unknown): ExtensionState['applied'] | undefined {
  const parsed = typeof state === 'object' && state !== null ? parsedState(state) : stateSchema.safeParse(state ?? {});
  return parsed.success ? parsed.data.applied : undefined;
}

/** The last applied ACL from status.state; undefined if none was ever applied or it is unreadable. */
export function appliedFromState(technicalID: string, state: unknown): AppliedAcl | undefined {
  const applied = recordedApplied(state);
  if (!applied) return undefined;
  return { technicalID, rule: applied.rule, alwaysAllowed: applied.alwaysAllowed, legacyProxyAllowed: applied.legacyProxyAllowed };
}
