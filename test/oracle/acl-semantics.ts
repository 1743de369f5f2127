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

/**
 * Shoots a CONNECT names in a form routing honours: per protected header, the first value (the one
 * `cluster_header` routes on) begins with an Istio cluster name of a service in S's namespace
 * (`outbound|<port>|<subset>|<service>.<S>.svc.`) or with S's socket `<S>--kube-apiserver-socket`,
 * spelled exactly (cluster names are case-sensitive). Any request Envoy delivers to S names S
 * so; this is the matcher form's reading of "targets S".
 */
export function routablyNamedShoots(
  headers: readonly (readonly [string, string])[],
  protectedHeaders: readonly string[],
  shoots: readonly OracleShoot[],
): OracleShoot[] {
  const wanted = new Set(protectedHeaders.map((h) => h.toLowerCase()));
  const firstValues: string[] = [];
  for (const name of wanted) {
    const first = headers.find(([n]) => n.toLowerCase() === name);
    if (first) firstValues.push(first[1].trim());
  }
  const namesShoot = (value: string, id: string): boolean => {
    if (value.startsWith(`${id}--kube-apiserver-socket`)) return true;
    const fields = value.split('|');
    if (fields.length < 4 || fields[0] !== 'outbound') return false;
    const host = fields.slice(3).join('|');
    const service = host.split('.')[0] ?? '';
    return service !== '' && !service.includes(',') && host.startsWith(`${service}.${id}.svc.`);
  };
  return shoots.filter((s) => firstValues.some((v) => namesShoot(v, s.technicalID)));
}

/** How a form of the combined filters reads "the request targets S": any mention, or a routable first value. */
export type TargetReading = 'mentions' | 'routable';

/** A CONNECT on a protected port passes iff every mentioned shoot with an ACL admits the client. */
export function connectAdmitted(
  headers: readonly (readonly [string, string])[],
  client: OracleClient,
  protectedHeaders: readonly string[],
  shoots: readonly OracleShoot[],
  reading: TargetReading = 'mentions',
): boolean {
  const targeted = reading === 'mentions' ? mentionedShoots(headers, protectedHeaders, shoots) : routablyNamedShoots(headers, protectedHeaders, shoots);
  return targeted.every((s) => admits(s, client));
}
