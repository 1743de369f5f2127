// The subset of Envoy's RBAC API (envoy.config.rbac.v3) that the generator emits, field for
// field as in the protos, so that nothing Istio would silently drop is ever written.

export interface CidrRange {
  readonly address_prefix: string;
  readonly prefix_len: number;
}

export type StringMatcher =
  | { readonly exact: string; readonly ignore_case?: boolean }
  | { readonly prefix: string; readonly ignore_case?: boolean }
  | { readonly suffix: string; readonly ignore_case?: boolean }
  | { readonly contains: string; readonly ignore_case?: boolean }
  | { readonly safe_regex: { readonly regex: string } };

export interface HeaderMatcher {
  readonly name: string;
  readonly string_match: StringMatcher;
}

export type Principal =
  | { readonly any: true }
  | { readonly remote_ip: CidrRange }
  | { readonly direct_remote_ip: CidrRange }
  | { readonly source_ip: CidrRange }
  | { readonly and_ids: { readonly ids: readonly Principal[] } }
  | { readonly or_ids: { readonly ids: readonly Principal[] } }
  | { readonly not_id: Principal };

/** Dynamic metadata a filter before the RBAC filter set (envoy.type.matcher.v3.MetadataMatcher). */
export interface MetadataMatcher {
  readonly filter: string;
  readonly path: readonly { readonly key: string }[];
  readonly value: { readonly present_match: true };
}

export type Permission =
  | { readonly any: true }
  | { readonly metadata: MetadataMatcher }
  | { readonly header: HeaderMatcher }
  | { readonly requested_server_name: StringMatcher }
  | { readonly and_rules: { readonly rules: readonly Permission[] } }
  | { readonly or_rules: { readonly rules: readonly Permission[] } }
  | { readonly not_rule: Permission };

export interface Policy {
  readonly permissions: readonly Permission[];
  readonly principals: readonly Principal[];
}

export interface RbacRules {
  readonly action: 'ALLOW' | 'DENY';
  readonly policies: Readonly<Record<string, Policy>>;
}

export const NETWORK_RBAC_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';
export const HTTP_RBAC_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';

/** A shoot in audit mode has its policy in `shadow_rules` (counted, never enforced) instead of `rules`. */
export interface NetworkRbacFilter {
  readonly name: string;
  readonly typed_config: {
    readonly '@type': typeof NETWORK_RBAC_TYPE;
    readonly stat_prefix: string;
    readonly rules?: RbacRules;
    readonly shadow_rules?: RbacRules;
  };
}

/** The rules of a combined filter; policies are typed loosely where stored policies are copied verbatim. */
export interface HttpRbacConfig<P = Policy> {
  readonly '@type': typeof HTTP_RBAC_TYPE;
  readonly rules: { readonly action: 'DENY'; readonly policies: Readonly<Record<string, P>> };
  readonly shadow_rules?: { readonly action: 'DENY'; readonly policies: Readonly<Record<string, P>> };
  /** Per-policy counters (`rbac.policy.<technical ID>.shadow_denied`): the HTTP filter has no stat_prefix of its own. */
  readonly track_per_rule_stats?: true;
}

/** The HTTP RBAC filter has no stat_prefix: its stats live under the HCM's prefix. */
export interface HttpRbacFilter {
  readonly name: string;
  readonly typed_config: HttpRbacConfig;
}
