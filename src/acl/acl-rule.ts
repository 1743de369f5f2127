// What a shoot owner's rule is once read: the words it may use and its normalised form. The
// provider config's schema (provider-config.ts) produces it; the warnings, the model and every
// filter builder read it.
import type { Cidr } from './cidr.js';

export const ACTIONS = ['ALLOW', 'DENY'] as const;
export type AclAction = (typeof ACTIONS)[number];

/** How Envoy picks the client address a rule's CIDRs are compared with. */
export const PRINCIPAL_TYPES = ['remote_ip', 'direct_remote_ip', 'source_ip'] as const;
export type PrincipalType = (typeof PRINCIPAL_TYPES)[number];

/** enforce: refuse what the rule does not admit. audit: refuse nothing, count what enforce would refuse. */
export const RULE_MODES = ['enforce', 'audit'] as const;
export type RuleMode = (typeof RULE_MODES)[number];

/** The rule as the shoot owner means it: normalised action/type, canonical CIDR set. */
export interface AclRule {
  readonly action: AclAction;
  readonly type: PrincipalType;
  /** Sorted, deduplicated, IPv4-mapped ranges folded into IPv4, covered ranges dropped. */
  readonly cidrs: readonly Cidr[];
  readonly mode: RuleMode;
}
