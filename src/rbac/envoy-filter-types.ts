import type { Labels } from '../acl/model.js';
import type { HttpRbacFilter, NetworkRbacFilter, RbacRules } from './envoy-rbac-types.js';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'gardener-acl';
export const SHOOT_LABEL = 'acl.gardener.cloud/shoot';
export const ROLE_LABEL = 'acl.gardener.cloud/role';

export type ListenerMatch = {
  readonly portNumber: number;
  readonly filterChain: { readonly sni: string } | { readonly filter: { readonly name: string } };
};

/** An HTTP filter of the matcher form (extraction, target headers, RBAC with a matcher), as JSON. */
export interface MatcherFormFilter {
  readonly name: string;
  readonly typed_config: { readonly '@type': string; readonly [field: string]: unknown };
}

export interface ConfigPatch {
  readonly applyTo: 'NETWORK_FILTER' | 'HTTP_FILTER';
  readonly match: { readonly context: 'GATEWAY'; readonly listener: ListenerMatch };
  readonly patch: { readonly operation: 'INSERT_FIRST'; readonly value: NetworkRbacFilter | HttpRbacFilter };
}

/** An HTTP filter whose config Envoy fetches through ECDS under the filter's name. */
export interface DiscoveredFilter {
  readonly name: string;
  readonly config_discovery: {
    readonly config_source: { readonly ads: Record<string, never>; readonly initial_fetch_timeout: string };
    readonly default_config: { readonly '@type': string; readonly rules: RbacRules };
    readonly type_urls: readonly string[];
  };
}

/** A patch of the matcher form: inserts one of its HTTP filters. */
export interface MatcherFormPatch {
  readonly applyTo: 'HTTP_FILTER';
  readonly match: { readonly context: 'GATEWAY'; readonly listener: ListenerMatch };
  readonly patch: { readonly operation: 'INSERT_FIRST'; readonly value: MatcherFormFilter | DiscoveredFilter };
}

/** An ECDS resource: the config of a DiscoveredFilter of the same name (Istio: an EXTENSION_CONFIG patch). */
export interface ExtensionConfigPatch {
  readonly applyTo: 'EXTENSION_CONFIG';
  readonly patch: { readonly operation: 'ADD'; readonly value: MatcherFormFilter };
}

/** An Istio EnvoyFilter as the generator writes it (P: its patches). */
export interface GeneratedEnvoyFilter<P = ConfigPatch> {
  readonly apiVersion: 'networking.istio.io/v1alpha3';
  readonly kind: 'EnvoyFilter';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Labels;
    readonly annotations?: Labels;
  };
  readonly spec: {
    readonly workloadSelector: { readonly labels: Labels };
    /** Istio applies EnvoyFilters by ascending priority (default 0). */
    readonly priority?: number;
    readonly configPatches: readonly P[];
  };
}
