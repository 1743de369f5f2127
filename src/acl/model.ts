import type { Cidr } from './cidr.js';
import type { OperatorConfig } from './operator-settings.js';
import type { AclRule } from './acl-rule.js';

export type Labels = Readonly<Record<string, string>>;

/** One `istio-ingressgateway` Deployment of the seed: where EnvoyFilters go and whom they select. */
export interface GatewayWorkload {
  readonly namespace: string;
  readonly selector: Labels;
}

/**
 * One TLS filter chain on the SNI listener that leads into a shoot's control plane
 * (one Istio Gateway server: kube-apiserver, its wildcard variant, an observability host).
 */
export interface SniChain {
  readonly gateway: GatewayWorkload;
  /** Every SNI name of the chain; any one of them selects the chain in an EnvoyFilter match. */
  readonly hosts: readonly string[];
}

/** The seed's shared nginx chain `*.<ingress-domain>` (Gardener 1.89–1.148). */
export interface ObservabilityWildcard {
  readonly gateway: GatewayWorkload;
  readonly domain: string;
}

/** Everything the generator needs to know about one shoot that has an ACL. */
export interface ShootAcl {
  readonly technicalID: string;
  readonly rule: AclRule;
  /** A(S): always admitted, matched as remote_ip (docs/design.md section 5). */
  readonly alwaysAllowed: readonly Cidr[];
  /**
   * Also admitted on the legacy PROXY-protocol apiserver-proxy path only: there the PROXY
   * header carries the address of the shoot pod that called the in-cluster API endpoint.
   */
  readonly legacyProxyAllowed: readonly Cidr[];
  readonly sniChains: readonly SniChain[];
  /** With tunnelRevocation hop: raised on every tightening, which closes the shoot's tunnels (default 1). */
  readonly tunnelGeneration?: number;
}

/** The part of a shoot's ACL that decides HTTP-CONNECT requests (no SNI chains needed). */
export type ShootPolicy = Pick<ShootAcl, 'technicalID' | 'rule' | 'alwaysAllowed'>;

export interface SeedAcl {
  readonly operator: OperatorConfig;
  /** All ingress gateways of the seed; each gets the combined HTTP-CONNECT filters. */
  readonly gateways: readonly GatewayWorkload[];
  /** Shared observability chains; each ACL shoot gets a filter for its own hosts in each. */
  readonly observabilityWildcards: readonly ObservabilityWildcard[];
  readonly shoots: readonly ShootAcl[];
}

/**
 * The virtual garden's ACL (a `garden`-class Extension in the runtime cluster): the owner's rule,
 * the ranges always admitted (the runtime cluster's nodes and pods, every ManagedSeed's egress,
 * the operator's additional ranges) and the TLS chains of the virtual garden's API server on its
 * ingress gateway.
 */
export interface GardenAcl {
  readonly rule: AclRule;
  readonly alwaysAllowed: readonly Cidr[];
  readonly sniChains: readonly SniChain[];
}
