// DESIGN section 3, stated directly and independently of the generator: which connections a
// seed's ACLs must admit. Property tests compare the generated RBAC against this.
import { cidrContainsAddress, type Cidr } from '../../src/acl/cidr.js';
import type { AclRule } from '../../src/acl/provider-config.js';
import { canonicalAddress, type Address } from './addresses.js';

export interface OracleShoot {
  readonly technicalID: string;
  /** undefined: the shoot has no ACL. */
  readonly rule?: AclRule | undefined;
  readonly alwaysAllowed: readonly Cidr[];
}

export interface OracleClient {
  /** Envoy's downstream remote address (PROXY-protocol source when present). */
  readonly remote: Address;
  /** The physical peer. */
  readonly direct: Address;
}

function inAny(cidrs: readonly Cidr[], a: Address): boolean {
  // One client, one verdict: an IPv4-mapped IPv6 address is that IPv4 client.
  const c = canonicalAddress(a);
  return cidrs.some((cidr) => cidrContainsAddress(cidr, c.family, c.value));
}

export function admits(shoot: OracleShoot, client: OracleClient): boolean {
  const { rule } = shoot;
  // Audit mode refuses nothing: it only counts what enforce would refuse (wouldRefuse).
  if (!rule || rule.mode === 'audit') return true;
  return !wouldRefuse(shoot, client);
}

/** What the rule refuses when enforced, whatever its mode: what audit mode counts. */
export function wouldRefuse(shoot: OracleShoot, client: OracleClient): boolean {
  const { rule } = shoot;
  if (!rule) return false;
  const selected = rule.type === 'direct_remote_ip' ? client.direct : client.remote;
  const inRule = inAny(rule.cidrs, selected);
  const always = inAny(shoot.alwaysAllowed, client.remote);
  return !(rule.action === 'ALLOW' ? inRule || always : !inRule || always);
}

/**
 * Shoots a CONNECT request mentions: every value of every protected header (names compared
 * case-insensitively), split at ",", where an element mentions S if it contains `.<id>.` or
 * starts with `<id>--kube-apiserver-socket`, ignoring case. Envoy routes on the first value, so
 * every routable destination is such an element.
 */
export function mentionedShoots(
  headers: readonly (readonly [string, string])[],
  protectedHeaders: readonly string[],
  shoots: readonly OracleShoot[],
): OracleShoot[] {
  const wanted = new Set(protectedHeaders.map((h) => h.toLowerCase()));
  const elements: string[] = [];
  for (const name of wanted) {
    const values = headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v.trim());
    if (values.length > 0) elements.push(...values.join(',').toLowerCase().split(','));
  }
  return shoots.filter((s) => {
    const id = s.technicalID.toLowerCase();
    return elements.some((e) => e.includes(`.${id}.`) || e.startsWith(`${id}--kube-apiserver-socket`));
  });
}

/** A CONNECT on a protected port passes iff every mentioned shoot with an ACL admits the client. */
export function connectAdmitted(
  headers: readonly (readonly [string, string])[],
  client: OracleClient,
  protectedHeaders: readonly string[],
  shoots: readonly OracleShoot[],
): boolean {
  return mentionedShoots(headers, protectedHeaders, shoots).every((s) => admits(s, client));
}
