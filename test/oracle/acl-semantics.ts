// docs/design.md section 3, stated directly and independently of the generator: which connections a
// seed's ACLs must admit. Property tests compare the generated RBAC against this.
import { cidrContainsAddress, type Cidr } from '../../src/acl/cidr.js';
import type { AclRule } from '../../src/acl/acl-rule.js';
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

/** A header value as Envoy's HTTP codec keeps it: spaces and tabs around it dropped, nothing else. */
export function codecTrimmed(value: string): string {
  return value.replace(/^[ \t]+|[ \t]+$/g, '');
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
    const values = headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => codecTrimmed(v));
    if (values.length > 0) elements.push(...values.join(',').toLowerCase().split(','));
  }
  return shoots.filter((s) => {
    const id = s.technicalID.toLowerCase();
    return elements.some((e) => e.includes(`.${id}.`) || e.startsWith(`${id}--kube-apiserver-socket`));
  });
}

/**
 * The shoot a header value names in a form routing honours, read from its start: an Istio
 * cluster name of a service in the shoot's namespace (`outbound|<port>|<subset>|<service>.<S>.svc.`)
 * or its socket (`<S>--kube-apiserver-socket`), spelled exactly (cluster names are
 * case-sensitive). Envoy routes on the first value, which a repeated header's joined value
 * starts with.
 */
export function routedTarget(value: string): string | undefined {
  const fields = value.split('|');
  if (fields[0] === 'outbound' && fields.length >= 4) {
    const host = fields.slice(3).join('|');
    const service = host.split('.')[0] ?? '';
    const id = host.slice(service.length + 1).split('.')[0] ?? '';
    if (service !== '' && !service.includes(',') && id !== '' && !id.includes(',') && host.startsWith(`${service}.${id}.svc.`)) return id;
  }
  const run = /^[^.,]*/.exec(value)?.[0] ?? '';
  const end = run.lastIndexOf('--kube-apiserver-socket');
  return end > 0 ? run.slice(0, end) : undefined;
}

/**
 * Shoots a CONNECT names in a routable form (routedTarget) in a protected header, whose values
 * Envoy joins with ",": the matcher form's reading of "targets S". Any request Envoy delivers to S
 * names S so.
 */
export function routablyNamedShoots(
  headers: readonly (readonly [string, string])[],
  protectedHeaders: readonly string[],
  shoots: readonly OracleShoot[],
): OracleShoot[] {
  const wanted = new Set(protectedHeaders.map((h) => h.toLowerCase()));
  const targets = new Set<string>();
  for (const name of wanted) {
    const values = headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => codecTrimmed(v));
    const target = values.length > 0 ? routedTarget(values.join(',')) : undefined;
    if (target !== undefined) targets.add(target);
  }
  return shoots.filter((s) => targets.has(s.technicalID));
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
  tunnelHop = false,
): boolean {
  const targeted = reading === 'mentions' ? mentionedShoots(headers, protectedHeaders, shoots) : routablyNamedShoots(headers, protectedHeaders, shoots);
  return targeted.every((s) => admits(s, client)) && !(tunnelHop && namesTwoVpnServers(headers, protectedHeaders));
}

/**
 * With the tunnel hop (docs/operators/revocation.md, `tunnelRevocation: hop`), what the ACL admits is also
 * refused when the first values of the protected headers (names without case) name two different
 * VPN servers (`outbound|1194||vpn-seed-server[-0..4].<namespace>.svc.cluster.local`): the hop
 * forwards to one destination, and the route may take either header.
 */
export function namesTwoVpnServers(headers: readonly (readonly [string, string])[], protectedHeaders: readonly string[]): boolean {
  const vpn = /^outbound\|1194\|\|vpn-seed-server(?:-[0-4])?\.[a-z0-9-]+\.svc\.cluster\.local$/;
  const firsts = protectedHeaders.flatMap((name) => {
    const found = headers.find(([n]) => n.toLowerCase() === name.toLowerCase());
    return found === undefined ? [] : [codecTrimmed(found[1])];
  });
  return new Set(firsts.filter((value) => vpn.test(value))).size > 1;
}
