// A model of how Envoy evaluates the RBAC configs we emit, written from Envoy's documented
// semantics (rbac.proto): used for fast property tests. The real Envoy suite checks the same
// configs with a live Envoy.
import { parseIpv4, parseIpv6 } from '../../src/acl/cidr.js';
import type { CidrRange, Permission, Principal, RbacRules, StringMatcher } from '../../src/rbac/envoy-rbac-types.js';
import type { Address } from './addresses.js';

export interface EvalContext {
  readonly remote: Address;
  readonly direct: Address;
  readonly headers?: readonly (readonly [string, string])[];
  readonly sni?: string;
  /**
   * How a header matcher sees a repeated header. Envoy 1.40's default
   * (`envoy.reloadable_features.rbac_match_headers_individually`) matches if any single value
   * matches; with that runtime switch off, the values are joined with "," first.
   */
  readonly repeatedHeaders?: 'individually' | 'joined';
  /** Dynamic metadata set by earlier filters, keyed `<filter namespace>/<key>`. */
  readonly metadata?: ReadonlyMap<string, string>;
}

function inRange(range: CidrRange, a: Address): boolean {
  const isV6 = range.address_prefix.includes(':');
  // Envoy never matches across IP versions (CidrRange::isInRange compares versions first).
  if ((a.family === 6) !== isV6) return false;
  const bits = isV6 ? 128 : 32;
  const base = isV6 ? parseIpv6(range.address_prefix) : parseIpv4(range.address_prefix);
  if (base === undefined) throw new Error(`unparsable prefix ${range.address_prefix}`);
  const shift = BigInt(bits - range.prefix_len);
  return a.value >> shift === base >> shift;
}

export function matchString(m: StringMatcher, value: string): boolean {
  if ('safe_regex' in m) {
    const { regex } = m.safe_regex;
    const ci = regex.startsWith('(?i)');
    // RE2 matches the whole value; the patterns we emit are JS-compatible.
    return new RegExp(`^(?:${ci ? regex.slice(4) : regex})$`, ci ? 'i' : '').test(value);
  }
  const fold = (s: string): string => (m.ignore_case ? s.toLowerCase() : s);
  const v = fold(value);
  if ('exact' in m) return v === fold(m.exact);
  if ('prefix' in m) return v.startsWith(fold(m.prefix));
  if ('suffix' in m) return v.endsWith(fold(m.suffix));
  return v.includes(fold(m.contains));
}

function headerValues(ctx: EvalContext, name: string): string[] {
  const values = (ctx.headers ?? []).filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v.trim());
  if (values.length === 0) return [];
  return ctx.repeatedHeaders === 'joined' ? [values.join(',')] : values;
}

export function evalPrincipal(p: Principal, ctx: EvalContext): boolean {
  if ('any' in p) return true;
  if ('remote_ip' in p) return inRange(p.remote_ip, ctx.remote);
  if ('source_ip' in p) return inRange(p.source_ip, ctx.remote);
  if ('direct_remote_ip' in p) return inRange(p.direct_remote_ip, ctx.direct);
  if ('and_ids' in p) return p.and_ids.ids.every((id) => evalPrincipal(id, ctx));
  if ('or_ids' in p) return p.or_ids.ids.some((id) => evalPrincipal(id, ctx));
  return !evalPrincipal(p.not_id, ctx);
}

export function evalPermission(p: Permission, ctx: EvalContext): boolean {
  if ('any' in p) return true;
  if ('header' in p) return headerValues(ctx, p.header.name).some((v) => matchString(p.header.string_match, v));
  if ('requested_server_name' in p) return matchString(p.requested_server_name, ctx.sni ?? '');
  if ('and_rules' in p) return p.and_rules.rules.every((r) => evalPermission(r, ctx));
  if ('or_rules' in p) return p.or_rules.rules.some((r) => evalPermission(r, ctx));
  if ('metadata' in p) return p.metadata.path.length === 1 && ctx.metadata?.has(`${p.metadata.filter}/${p.metadata.path[0]?.key}`) === true;
  return !evalPermission(p.not_rule, ctx);
}

/** true when the filter lets the request/connection through. */
export function evalRbac(rules: RbacRules, ctx: EvalContext): boolean {
  const matched = Object.values(rules.policies).some(
    (policy) => policy.permissions.some((p) => evalPermission(p, ctx)) && policy.principals.some((p) => evalPrincipal(p, ctx)),
  );
  return rules.action === 'ALLOW' ? matched : !matched;
}
