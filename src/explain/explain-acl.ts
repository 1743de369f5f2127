// `gardener-acl explain`: which verdict each path into a shoot's control plane gives one client,
// and why, stated from the ACL model by docs/design.md section 3 (not read back from the generated RBAC),
// so that a test can hold it against what the real Envoy decides.
import { tunnelHopServed } from '../rbac/seed-envoy-filters.js';
import { vpnDestinationsNamed } from '../rbac/shared-tunnel-hop.js';
import { cidrContainsAddress, formatAddress, formatCidr, type Cidr, type IpFamily } from '../acl/cidr.js';
import type { GardenAcl, SeedAcl, ShootAcl } from '../acl/model.js';
import { isMatcherForm, type CombinedFormName } from '../acl/operator-settings.js';
import type { AclRule } from '../acl/acl-rule.js';
import { destinationForms, parseTechnicalID } from '../acl/shoot-identity.js';
import { EXPLAIN_PATHS, type ClientAddress, type ExplainPath } from './client-address.js';

export type { ClientAddress, ExplainPath } from './client-address.js';

/** One client has one verdict: an IPv4-mapped IPv6 address is that IPv4 client. */
function canonical(a: ClientAddress): { readonly family: IpFamily; readonly value: bigint; readonly label: string } {
  if (a.family === 6 && a.value >> 32n === 0xffffn) {
    const v4 = a.value & 0xffffffffn;
    return { family: 4, value: v4, label: `${a.text} (IPv4-mapped, matched as ${formatAddress(4, v4)})` };
  }
  return { ...a, label: a.text };
}

function firstContaining(cidrs: readonly Cidr[], a: { family: IpFamily; value: bigint }): Cidr | undefined {
  return cidrs.find((c) => cidrContainsAddress(c, a.family, a.value));
}

export interface Decision {
  /** What the rule decides when enforced. */
  readonly admittedByRule: boolean;
  /** What Envoy does: audit mode admits every client. */
  readonly admitted: boolean;
  readonly reason: string;
}

/** docs/design.md section 3 for one shoot and one client, naming the range (or the absence of one) that decided. */
export function decideAcl(acl: { readonly rule: AclRule; readonly alwaysAllowed: readonly Cidr[] }, remote: ClientAddress, direct: ClientAddress): Decision {
  const { rule } = acl;
  const remoteC = canonical(remote);
  const selected = canonical(rule.type === 'direct_remote_ip' ? direct : remote);
  const selectedLabel = `${rule.type} ${selected.label}`;
  const ruleHit = firstContaining(rule.cidrs, selected);
  const alwaysHit = firstContaining(acl.alwaysAllowed, remoteC);
  const always = alwaysHit ? `remote_ip ${remoteC.label} is in the always-allowed range ${formatCidr(alwaysHit)}` : undefined;
  let admittedByRule: boolean;
  let reason: string;
  if (rule.action === 'ALLOW') {
    admittedByRule = ruleHit !== undefined || always !== undefined;
    reason = ruleHit
      ? `${selectedLabel} is in the ALLOW range ${formatCidr(ruleHit)}`
      : always
        ? `${selectedLabel} is in no ALLOW range, but ${always}`
        : `${selectedLabel} is in no ALLOW range (${rule.cidrs.map(formatCidr).join(', ')}) and remote_ip ${remoteC.label} in no always-allowed range`;
  } else {
    admittedByRule = ruleHit === undefined || always !== undefined;
    reason = !ruleHit
      ? `${selectedLabel} is in no DENY range (${rule.cidrs.map(formatCidr).join(', ')})`
      : always
        ? `${selectedLabel} is in the DENY range ${formatCidr(ruleHit)}, but ${always}, which always wins`
        : `${selectedLabel} is in the DENY range ${formatCidr(ruleHit)} and remote_ip ${remoteC.label} in no always-allowed range`;
  }
  if (rule.mode === 'audit') {
    return { admittedByRule, admitted: true, reason: `audit mode, nothing is refused; enforce would ${admittedByRule ? 'admit' : 'refuse'}: ${reason}` };
  }
  return { admittedByRule, admitted: admittedByRule, reason };
}

/** How a CONNECT request's protected header mentions a shoot (docs/design.md section 3). */
export interface Mention {
  readonly header: string;
  readonly value: string;
  readonly form: 'fqdn' | 'socket';
}

/**
 * Every mention of `technicalID` in the request's protected headers: names compared without case,
 * repeated headers as Envoy joins them (with ","), values compared without case (a case variant
 * can at most reach a cluster that does not exist, so it is treated as a mention).
 */
export function mentionsOf(
  headers: readonly (readonly [string, string])[],
  protectedHeaders: readonly string[],
  technicalID: string,
  form: CombinedFormName = 'rules',
): Mention[] {
  if (isMatcherForm(form)) return routableMentionsOf(headers, protectedHeaders, technicalID);
  const { fqdnInfix, socketValue } = destinationForms(technicalID);
  const fqdn = fqdnInfix.toLowerCase();
  const socket = socketValue.toLowerCase();
  const mentions: Mention[] = [];
  for (const name of protectedHeaders) {
    const values = headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v.trim());
    if (values.length === 0) continue;
    const joined = values.join(',');
    const lower = joined.toLowerCase();
    if (lower.includes(fqdn)) mentions.push({ header: name, value: joined, form: 'fqdn' });
    else if (lower.startsWith(socket) || lower.includes(`,${socket}`)) mentions.push({ header: name, value: joined, form: 'socket' });
  }
  return mentions;
}

/**
 * The shoot a header's value names for the matcher form (docs/operators/combined-forms.md), read
 * from the start of the value (a repeated header's values joined with ","), where Envoy's route
 * finds the cluster name: an Istio cluster name of a service in the shoot's namespace, or the
 * shoot's socket, spelled exactly (cluster names are case-sensitive).
 */
function routableTarget(value: string): { readonly technicalID: string; readonly form: Mention['form'] } | undefined {
  const [direction, , , ...rest] = value.split('|');
  if (direction === 'outbound' && rest.length > 0) {
    const host = rest.join('|');
    const [service = '', namespace = ''] = host.split('.');
    if (service !== '' && namespace !== '' && !`${service}${namespace}`.includes(',') && host.startsWith(`${service}.${namespace}.svc.`)) return { technicalID: namespace, form: 'fqdn' };
  }
  const run = /^[^.,]*/.exec(value)?.[0] ?? '';
  const end = run.lastIndexOf('--kube-apiserver-socket');
  return end > 0 ? { technicalID: run.slice(0, end), form: 'socket' } : undefined;
}

function routableMentionsOf(headers: readonly (readonly [string, string])[], protectedHeaders: readonly string[], technicalID: string): Mention[] {
  return protectedHeaders.flatMap((name): Mention[] => {
    const values = headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v.trim());
    if (values.length === 0) return [];
    const joined = values.join(',');
    const target = routableTarget(joined);
    return target?.technicalID === technicalID ? [{ header: name, value: joined, form: target.form }] : [];
  });
}

/** Gardener's per-shoot chain on the legacy PROXY-protocol apiserver-proxy port. */
export interface LegacyChain {
  readonly namespace: string;
  readonly envoyFilter: string;
  readonly technicalID: string;
}

export interface PathVerdict {
  readonly path: ExplainPath;
  readonly gateway: string;
  /** Where on the gateway: the SNI chain, the CONNECT port, the legacy chain. */
  readonly at: string;
  readonly verdict: 'admitted' | 'refused';
  readonly reason: string;
  /** Admitted only because the rule is in audit mode: enforce would refuse this client here. */
  readonly enforceWouldRefuse?: true;
}

export interface Explanation {
  readonly technicalID: string;
  readonly summary: string;
  readonly verdicts: readonly PathVerdict[];
}

export interface ExplainRequest {
  readonly seed: SeedAcl;
  readonly legacyChains: readonly LegacyChain[];
  readonly technicalID: string;
  /** The client as Envoy's remote address (the PROXY-protocol source when the load balancer sends one). */
  readonly client: ClientAddress;
  /** The physical peer (direct_remote_ip); the client when not given. */
  readonly peer?: ClientAddress | undefined;
  readonly paths?: readonly ExplainPath[] | undefined;
  /** A concrete CONNECT request's headers; without them the CONNECT verdict is for a request that targets only this shoot. */
  readonly headers?: readonly (readonly [string, string])[] | undefined;
}

function ruleText(rule: AclRule): string {
  return `${rule.action} ${rule.type} [${rule.cidrs.map(formatCidr).join(', ')}]${rule.mode === 'audit' ? ', mode audit (counts, refuses nothing)' : ''}`;
}

const verdictOf = (admitted: boolean): PathVerdict['verdict'] => (admitted ? 'admitted' : 'refused');

/** The verdict of one decision, marked where only audit mode admits. */
const decided = (d: Pick<Decision, 'admitted' | 'admittedByRule'>): Pick<PathVerdict, 'verdict' | 'enforceWouldRefuse'> => ({
  verdict: verdictOf(d.admitted),
  ...(d.admitted && !d.admittedByRule ? { enforceWouldRefuse: true as const } : {}),
});

function connectVerdicts(req: ExplainRequest, shoot: ShootAcl | undefined, direct: ClientAddress): PathVerdict[] {
  const { seed } = req;
  const { protectedHeaders, protectedPorts } = seed.operator;
  let verdict: Pick<PathVerdict, 'verdict' | 'enforceWouldRefuse'>;
  let reason: string;
  if (req.headers) {
    const targeted = seed.shoots
      .map((s) => ({ s, mentions: mentionsOf(req.headers ?? [], protectedHeaders, s.technicalID, seed.operator.combinedForm) }))
      .filter(({ mentions }) => mentions.length > 0);
    const parts = targeted.map(({ s, mentions }) => {
      const d = decideAcl(s, req.client, direct);
      const via = mentions.map((m) => `${m.header} (${m.form === 'fqdn' ? `FQDN form .${s.technicalID}.` : `socket form ${s.technicalID}--kube-apiserver-socket`})`).join(' and ');
      return { d, text: `targets ${s.technicalID} via ${via}: ${d.admitted ? 'admits' : 'refuses'}, ${d.reason}` };
    });
    const self = mentionsOf(req.headers, protectedHeaders, req.technicalID, seed.operator.combinedForm).length > 0;
    const prefix = self ? '' : `no protected header mentions ${req.technicalID}; `;
    verdict = decided({ admitted: parts.every((p) => p.d.admitted), admittedByRule: parts.every((p) => p.d.admittedByRule) });
    reason = parts.length === 0 ? `${prefix}no protected header mentions a shoot with an ACL` : `${prefix}${parts.map((p) => p.text).join('; ')}${parts.length > 1 ? ' (every targeted shoot must admit)' : ''}`;
    // After the ACL filters, the tunnel hop's entry refuses a request naming two VPN servers (docs/operators/revocation.md).
    const vpn = tunnelHopServed(seed) ? vpnDestinationsNamed(req.headers, protectedHeaders) : [];
    if (verdict.verdict === 'admitted' && vpn.length > 1) {
      verdict = { verdict: 'refused' };
      reason = `${reason}; the tunnel hop refuses it: the protected headers name two VPN servers (${vpn.join(', ')})`;
    }
  } else if (shoot) {
    const d = decideAcl(shoot, req.client, direct);
    const { fqdnInfix, socketValue } = destinationForms(shoot.technicalID);
    verdict = decided(d);
    reason =
      isMatcherForm(seed.operator.combinedForm)
        ? `${d.reason} (a request targets ${shoot.technicalID} when the first value of ${protectedHeaders.join(' or ')} begins with "outbound|<port>|<subset>|<service>${fqdnInfix}svc." or "${socketValue}")`
        : `${d.reason} (a request targets ${shoot.technicalID} when ${protectedHeaders.join(' or ')} contains "${fqdnInfix}" or starts with "${socketValue}")`;
  } else {
    verdict = { verdict: 'admitted' };
    reason = `${req.technicalID} has no ACL on this seed`;
  }
  return [...seed.gateways]
    .sort((a, b) => a.namespace.localeCompare(b.namespace))
    .flatMap((g) => protectedPorts.map((port): PathVerdict => ({ path: 'connect', gateway: g.namespace, at: `CONNECT port ${port}`, ...verdict, reason })));
}

/** The verdict of every path into the shoot's control plane for one client. */
export function explainShoot(req: ExplainRequest): Explanation {
  const { seed, technicalID } = req;
  const paths = new Set(req.paths ?? EXPLAIN_PATHS);
  const direct = req.peer ?? req.client;
  const shoot = seed.shoots.find((s) => s.technicalID === technicalID);
  const verdicts: PathVerdict[] = [];
  if (shoot) {
    const d = decideAcl(shoot, req.client, direct);
    if (paths.has('api')) {
      for (const chain of shoot.sniChains) {
        verdicts.push({ path: 'api', gateway: chain.gateway.namespace, at: `SNI ${[...chain.hosts].sort().join(', ')} (port ${seed.operator.sniPort})`, ...decided(d), reason: d.reason });
      }
    }
    if (paths.has('observability')) {
      const identity = parseTechnicalID(technicalID);
      for (const w of seed.observabilityWildcards) {
        const host = `<prefix>-${identity?.shortID ?? technicalID}.${w.domain}`;
        verdicts.push({ path: 'observability', gateway: w.gateway.namespace, at: `SNI ${host} on the shared *.${w.domain} chain (port ${seed.operator.sniPort})`, ...decided(d), reason: d.reason });
      }
    }
    if (paths.has('legacy')) {
      const legacy = decideAcl({ rule: shoot.rule, alwaysAllowed: [...shoot.alwaysAllowed, ...shoot.legacyProxyAllowed] }, req.client, direct);
      for (const chain of req.legacyChains.filter((c) => c.technicalID === technicalID)) {
        verdicts.push({ path: 'legacy', gateway: chain.namespace, at: `PROXY-protocol port ${seed.operator.legacyProxyPort}, chain of EnvoyFilter ${chain.envoyFilter}`, ...decided(legacy), reason: shoot.legacyProxyAllowed.length > 0 ? `${legacy.reason} (on this port the shoot's pod range ${shoot.legacyProxyAllowed.map(formatCidr).join(', ')} is always allowed too)` : legacy.reason });
      }
    }
  }
  if (paths.has('connect')) verdicts.push(...connectVerdicts(req, shoot, direct));
  const summary = shoot ? `${technicalID}: ${ruleText(shoot.rule)}` : `${technicalID}: no ACL on this seed; no path restricts it`;
  return { technicalID, summary, verdicts };
}

/** The name explain gives the virtual garden where it names a shoot's technical ID. */
const VIRTUAL_GARDEN = 'virtual-garden';

/** The verdict of every chain of the virtual garden's API server for one client (the garden has no other path). */
export function explainGarden(acl: GardenAcl, sniPort: number, client: ClientAddress, peer?: ClientAddress): Explanation {
  const d = decideAcl(acl, client, peer ?? client);
  const verdicts = acl.sniChains.map((chain): PathVerdict => ({ path: 'api', gateway: chain.gateway.namespace, at: `SNI ${[...chain.hosts].sort().join(', ')} (port ${sniPort})`, ...decided(d), reason: d.reason }));
  return { technicalID: VIRTUAL_GARDEN, summary: `the virtual garden's API server: ${ruleText(acl.rule)}`, verdicts };
}
