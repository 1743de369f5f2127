// Whether a changed ACL admits fewer clients on the HTTP-CONNECT paths than an earlier one: the
// question that decides whether a shoot's established tunnels must be closed
// (docs/operators/revocation.md). A "yes" costs the shoot one reconnect of its tunnels, a wrong "no" leaves a tunnel
// open that the owner revoked, so every case this check cannot decide exactly answers yes.
import { IPV4_MAPPED_BLOCK, canonicalFamily, cidrContains, type Cidr, type IpFamily } from './cidr.js';
import type { AclRule } from './acl-rule.js';

/** What decides admission on a CONNECT path: the owner's rule and the ranges always admitted (docs/design.md section 5). */
export interface ConnectAdmission {
  readonly rule: Pick<AclRule, 'action' | 'type' | 'cidrs' | 'mode'>;
  readonly alwaysAllowed: readonly Cidr[];
}

interface Interval {
  readonly lo: bigint;
  readonly hi: bigint;
}

const BITS: Record<IpFamily, bigint> = { 4: 32n, 6: 128n };

function interval(cidr: Cidr): Interval {
  const size = 1n << (BITS[cidr.family] - BigInt(cidr.prefixLen));
  return { lo: cidr.address, hi: cidr.address + size - 1n };
}

/** The ranges of one family as sorted, merged intervals (IPv4-mapped ranges counted as IPv4). */
function intervalsOf(cidrs: readonly Cidr[], family: IpFamily): Interval[] {
  const sorted = cidrs
    .map(canonicalFamily)
    .filter((c) => c.family === family)
    .map(interval)
    .sort((a, b) => (a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0));
  const merged: Interval[] = [];
  for (const next of sorted) {
    const last = merged[merged.length - 1];
    if (last !== undefined && next.lo <= last.hi + 1n) merged[merged.length - 1] = { lo: last.lo, hi: next.hi > last.hi ? next.hi : last.hi };
    else merged.push(next);
  }
  return merged;
}

function covers(outer: readonly Interval[], inner: readonly Interval[]): boolean {
  return inner.every((i) => outer.some((o) => o.lo <= i.lo && i.hi <= o.hi));
}

function overlap(a: readonly Interval[], b: readonly Interval[]): boolean {
  return a.some((x) => b.some((y) => x.lo <= y.hi && y.lo <= x.hi));
}

/** An IPv6 range that reaches into ::ffff:0:0/96 but is not inside it speaks for IPv4 clients too, in a way per-family sets do not show. */
function straddlesMappedBlock(cidrs: readonly Cidr[]): boolean {
  return cidrs.some((c) => c.family === 6 && canonicalFamily(c).family === 6 && cidrContains(c, IPV4_MAPPED_BLOCK));
}

/** Every client `inner` holds, `outer` holds (per family; undecidable mixes answer no). */
function holdsAll(outer: readonly Cidr[], inner: readonly Cidr[]): boolean {
  if (straddlesMappedBlock(inner) && !straddlesMappedBlock(outer)) return false;
  return ([4, 6] as const).every((family) => covers(intervalsOf(outer, family), intervalsOf(inner, family)));
}

/** Some client is in both (per family; undecidable mixes answer yes). */
function shareAny(a: readonly Cidr[], b: readonly Cidr[]): boolean {
  if ((straddlesMappedBlock(a) && b.length > 0) || (straddlesMappedBlock(b) && a.length > 0)) return true;
  return ([4, 6] as const).some((family) => overlap(intervalsOf(a, family), intervalsOf(b, family)));
}

/**
 * Whether some client `before` admits on a CONNECT path is refused by `after`. A client is
 * admitted when its remote address is always allowed or the rule admits it (ALLOW: in the
 * ranges, DENY: outside them; audit admits everyone). Compared part by part, which is exact for
 * the usual edits (a range added or removed, an action flipped from DENY to ALLOW with disjoint
 * ranges) and answers yes for the rest (another address type, DENY to ALLOW).
 */
export function admitsFewer(before: ConnectAdmission, after: ConnectAdmission): boolean {
  if (after.rule.mode === 'audit') return false;
  if (before.rule.mode === 'audit') return true;
  if (!holdsAll(after.alwaysAllowed, before.alwaysAllowed)) return true;
  if (before.rule.type !== after.rule.type) return true;
  const was = before.rule;
  const now = after.rule;
  if (was.action === 'ALLOW' && now.action === 'ALLOW') return !holdsAll(now.cidrs, was.cidrs);
  if (was.action === 'DENY' && now.action === 'DENY') return !holdsAll(was.cidrs, now.cidrs);
  if (was.action === 'ALLOW' && now.action === 'DENY') return shareAny(was.cidrs, now.cidrs);
  // DENY to ALLOW admits fewer unless the new ranges hold everything outside the old ones: never claimed.
  return true;
}
