// Builds SeedAcl models directly from compact test definitions, through the real parsers.
import { normalizeCidrSet, parseCidr, type Cidr } from '../../src/acl/cidr.js';
import type { GatewayWorkload, SeedAcl, ShootAcl } from '../../src/acl/model.js';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import { parseProviderConfig } from '../../src/acl/provider-config.js';
import type { AclRule } from '../../src/acl/acl-rule.js';
import type { OracleShoot } from '../oracle/acl-semantics.js';

export interface TestShoot {
  readonly id: string;
  /** Omitted: the shoot has no ACL. */
  readonly rule?: { readonly action: string; readonly type: string; readonly cidrs: readonly string[]; readonly mode?: string | undefined };
  readonly always?: readonly string[];
  readonly legacyProxyAllowed?: readonly string[];
  readonly hosts?: readonly string[];
  readonly gateway?: GatewayWorkload;
}

export const DEFAULT_GATEWAY: GatewayWorkload = { namespace: 'istio-ingress', selector: { app: 'istio-ingressgateway', istio: 'ingressgateway' } };
export const ZONAL_GATEWAY: GatewayWorkload = { namespace: 'istio-ingress--z1', selector: { app: 'istio-ingressgateway', istio: 'ingressgateway--zone--z1' } };

export function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(`test CIDR ${text}: ${parsed.reason}`);
  return parsed.cidr;
}

export function rule(action: string, type: string, cidrs: readonly string[], mode?: string): AclRule {
  const parsed = parseProviderConfig({ rule: { action, type, cidrs, ...(mode === undefined ? {} : { mode }) } }, 1000, 'providerConfig');
  if (!parsed.ok) throw new Error(`test rule: ${JSON.stringify(parsed.errors)}`);
  return parsed.rule;
}

export interface BuiltTestSeed {
  readonly seed: SeedAcl;
  readonly oracle: OracleShoot[];
}

export function testSeed(
  shoots: readonly TestShoot[],
  options: { operator?: Partial<OperatorConfig>; gateways?: GatewayWorkload[]; observabilityDomain?: string } = {},
): BuiltTestSeed {
  const operator: OperatorConfig = { ...defaultOperatorConfig(), ...options.operator };
  const gateways = options.gateways ?? [DEFAULT_GATEWAY];
  const acls: ShootAcl[] = [];
  const oracle: OracleShoot[] = [];
  for (const s of shoots) {
    const always = normalizeCidrSet((s.always ?? []).map(cidr));
    const r = s.rule ? rule(s.rule.action, s.rule.type, s.rule.cidrs, s.rule.mode) : undefined;
    oracle.push({ technicalID: s.id, rule: r, alwaysAllowed: always });
    if (!r) continue;
    acls.push({
      technicalID: s.id,
      rule: r,
      alwaysAllowed: always,
      legacyProxyAllowed: normalizeCidrSet((s.legacyProxyAllowed ?? []).map(cidr)),
      sniChains: [{ gateway: s.gateway ?? DEFAULT_GATEWAY, hosts: s.hosts ?? [`api.${s.id}.example.com`] }],
    });
  }
  const observabilityWildcards = options.observabilityDomain ? [{ gateway: DEFAULT_GATEWAY, domain: options.observabilityDomain }] : [];
  return { seed: { operator, gateways, observabilityWildcards, shoots: acls }, oracle };
}
