// A model of how Envoy evaluates RBAC `rules` (rbac.proto), written from Envoy's documented
// semantics: the SNI filters and the rules form directly, and the matcher forms' fallback rules
// inside envoy-chain-evaluator.ts. The real Envoy suites check the same configs with a live Envoy.
import { parseIpv4, parseIpv6 } from '../../src/acl/cidr.js';
import type { CidrRange, Permission, Principal, RbacRules, StringMatcher } from '../../src/rbac/envoy-rbac-types.js';
import type { Address } from './addresses.js';
import { re2, type Re2Encoding } from './re2.js';

export interface EvalContext {
  readonly remote: Address;
  readonly direct: Address;
  readonly headers?: readonly (readonly [string, string])[];
  readonly sni?: string;
  /**
   * How a header matcher sees a repeated header. Envoy 1.40's default
   * (`envoy.reloadable_features.rbac_match_headers_individually`) matches if any single value
   * matches; with that runtime switch off, and on Envoy 1.37 (measured, see
   * envoy-chain-evaluator.ts), the values are joined with "," first.
   */
  readonly repeatedHeaders?: 'individually' | 'joined';
  /** Dynamic metadata set by earlier filters, keyed `<filter namespace>/<key>`. */
  readonly metadata?: ReadonlyMap<string, string>;
  /** How the Envoy's RE2 reads bytes (see re2.ts): UTF-8 on Envoy 1.37, Latin-1 on 1.40 (default). */
  readonly regexEncoding?: Re2Encoding;
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

export function matchString(m: StringMatcher, value: string, regexEncoding: Re2Encoding = 'latin1'): boolean {
  // RE2 matches the whole value (FullMatch), on bytes (`\C`, bytes that are not UTF-8).
  if ('safe_regex' in m) return re2(m.safe_regex.regex, regexEncoding).fullMatch(value);
  // ignore_case folds ASCII only (absl::AsciiStrToLower), never a byte above 0x7f.
  const fold = (s: string): string => (m.ignore_case ? s.replace(/[A-Z]/g, (c) => c.toLowerCase()) : s);
  const v = fold(value);
  if ('exact' in m) return v === fold(m.exact);
  if ('prefix' in m) return v.startsWith(fold(m.prefix));
  if ('suffix' in m) return v.endsWith(fold(m.suffix));
  if ('contains' in m) return v.includes(fold(m.contains));
  throw new Error(`string matcher outside the model: ${JSON.stringify(m)}`);
}

function headerValues(ctx: EvalContext, name: string): string[] {
  // Envoy's codec drops spaces and tabs around a value, nothing else (a byte above 0x7f stays).
  const values = (ctx.headers ?? []).filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v.replace(/^[ \t]+|[ \t]+$/g, ''));
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
  if ('not_id' in p) return !evalPrincipal(p.not_id, ctx);
  throw new Error(`RBAC principal outside the model: ${JSON.stringify(p)}`);
}

export function evalPermission(p: Permission, ctx: EvalContext): boolean {
  if ('any' in p) return true;
  if ('header' in p) return headerValues(ctx, p.header.name).some((v) => matchString(p.header.string_match, v, ctx.regexEncoding));
  if ('requested_server_name' in p) return matchString(p.requested_server_name, ctx.sni ?? '', ctx.regexEncoding);
  if ('and_rules' in p) return p.and_rules.rules.every((r) => evalPermission(r, ctx));
  if ('or_rules' in p) return p.or_rules.rules.some((r) => evalPermission(r, ctx));
  if ('metadata' in p) {
    // present_match on one key is all the generator writes; anything else must not be guessed.
    if (p.metadata.path.length !== 1 || p.metadata.value.present_match !== true) throw new Error(`RBAC metadata permission outside the model: ${JSON.stringify(p)}`);
    return ctx.metadata?.has(`${p.metadata.filter}/${p.metadata.path[0]?.key}`) === true;
  }
  if ('not_rule' in p) return !evalPermission(p.not_rule, ctx);
  throw new Error(`RBAC permission outside the model: ${JSON.stringify(p)}`);
}

/** true when the filter lets the request/connection through. */
export function evalRbac(rules: RbacRules, ctx: EvalContext): boolean {
  const matched = Object.values(rules.policies).some(
    (policy) => policy.permissions.some((p) => evalPermission(p, ctx)) && policy.principals.some((p) => evalPrincipal(p, ctx)),
  );
  return rules.action === 'ALLOW' ? matched : !matched;
}
