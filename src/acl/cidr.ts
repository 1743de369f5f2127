// IPv4/IPv6 CIDR ranges as exact integers, so that comparison, containment and the
// IPv4-mapped IPv6 twins can be computed without string tricks.

import { quoteInput } from './quote-input.js';

export type IpFamily = 4 | 6;

export interface Cidr {
  readonly family: IpFamily;
  /** Network address with host bits cleared. */
  readonly address: bigint;
  readonly prefixLen: number;
}

export type CidrParseResult =
  | { readonly ok: true; readonly cidr: Cidr; readonly hostBitsCleared: boolean }
  | { readonly ok: false; readonly reason: string };

const BITS: Record<IpFamily, number> = { 4: 32, 6: 128 };

/** `::ffff:0:0/96`: IPv6 addresses that stand for an IPv4 address (RFC 4291 2.5.5.2). */
export const IPV4_MAPPED_BLOCK: Cidr = { family: 6, address: 0xffffn << 32n, prefixLen: 96 };

function mask(family: IpFamily, prefixLen: number): bigint {
  const bits = BITS[family];
  const all = (1n << BigInt(bits)) - 1n;
  return (all >> BigInt(bits - prefixLen)) << BigInt(bits - prefixLen);
}

export function parseIpv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    // Leading zeros are rejected: some parsers read them as octal, so the meaning is ambiguous.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

export function parseIpv6(text: string): bigint | undefined {
  if (text.includes('%')) return undefined; // zone IDs have no meaning in a CIDR
  let head = text;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    // An embedded IPv4 tail (`::ffff:1.2.3.4`) is rewritten as its two hex groups.
    const v4 = parseIpv4(tail);
    if (v4 === undefined) return undefined;
    head = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const doubleColon = head.indexOf('::');
  if (doubleColon !== head.lastIndexOf('::')) return undefined;
  const splitGroups = (s: string): string[] | undefined => {
    if (s === '') return [];
    const groups = s.split(':');
    return groups.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g)) ? groups : undefined;
  };
  let groups: string[];
  if (doubleColon >= 0) {
    const left = splitGroups(head.slice(0, doubleColon));
    const right = splitGroups(head.slice(doubleColon + 2));
    if (!left || !right || left.length + right.length > 7) return undefined;
    groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  } else {
    const all = splitGroups(head);
    if (!all || all.length !== 8) return undefined;
    groups = all;
  }
  let value = 0n;
  for (const group of groups) value = (value << 16n) | BigInt(parseInt(group, 16));
  return value;
}

/**
 * Parses `a.b.c.d/n` or an IPv6 `x::y/n`; a bare address means a single host (/32, /128).
 * Host bits are cleared, so `10.1.2.3/8` becomes `10.0.0.0/8` (reported via hostBitsCleared).
 */
export function parseCidr(input: string): CidrParseResult {
  const text = input.trim();
  if (text === '') return { ok: false, reason: 'it is empty' };
  const slash = text.indexOf('/');
  const addressText = slash >= 0 ? text.slice(0, slash) : text;
  const family: IpFamily = addressText.includes(':') ? 6 : 4;
  const address = family === 4 ? parseIpv4(addressText) : parseIpv6(addressText);
  if (address === undefined) {
    return { ok: false, reason: `${quoteInput(addressText)} is not an IPv${family} address` };
  }
  let prefixLen = BITS[family];
  if (slash >= 0) {
    const lenText = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(lenText) || Number(lenText) > BITS[family]) {
      return { ok: false, reason: `prefix length ${quoteInput(lenText)} must be a number from 0 to ${BITS[family]}` };
    }
    prefixLen = Number(lenText);
  }
  const network = address & mask(family, prefixLen);
  return { ok: true, cidr: { family, address: network, prefixLen }, hostBitsCleared: network !== address };
}

export function formatAddress(family: IpFamily, address: bigint): string {
  if (family === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((address >> shift) & 0xffn)).join('.');
  }
  if (address >> 32n === 0xffffn) {
    // IPv4-mapped addresses are written with a dotted tail, as every tool prints them.
    return `::ffff:${formatAddress(4, address & 0xffffffffn)}`;
  }
  const groups: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(Number((address >> shift) & 0xffffn));
  // RFC 5952: compress the longest run (>= 2) of zero groups, the first one on ties.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

export function formatCidr(cidr: Cidr): string {
  return `${formatAddress(cidr.family, cidr.address)}/${cidr.prefixLen}`;
}

export function compareCidrs(a: Cidr, b: Cidr): number {
  if (a.family !== b.family) return a.family - b.family;
  if (a.address !== b.address) return a.address < b.address ? -1 : 1;
  return a.prefixLen - b.prefixLen;
}

export function cidrContains(outer: Cidr, inner: Cidr): boolean {
  return (
    outer.family === inner.family &&
    outer.prefixLen <= inner.prefixLen &&
    (inner.address & mask(outer.family, outer.prefixLen)) === outer.address
  );
}

export function cidrContainsAddress(cidr: Cidr, family: IpFamily, address: bigint): boolean {
  return cidrContains(cidr, { family, address, prefixLen: BITS[family] });
}

/** The IPv4 range an IPv6 range inside ::ffff:0:0/96 stands for. */
export function ipv4FromMapped(cidr: Cidr): Cidr | undefined {
  if (!cidrContains(IPV4_MAPPED_BLOCK, cidr)) return undefined;
  return { family: 4, address: cidr.address & 0xffffffffn, prefixLen: cidr.prefixLen - 96 };
}

export function ipv4ToMapped(cidr: Cidr): Cidr {
  return { family: 6, address: IPV4_MAPPED_BLOCK.address | cidr.address, prefixLen: cidr.prefixLen + 96 };
}

/** Ranges that denote IPv4 space are expressed as IPv4, so each client has one canonical form. */
export function canonicalFamily(cidr: Cidr): Cidr {
  return ipv4FromMapped(cidr) ?? cidr;
}

/** Sorted, deduplicated, without ranges that a broader range in the set already covers. */
export function normalizeCidrSet(cidrs: readonly Cidr[]): Cidr[] {
  const sorted = cidrs.map(canonicalFamily).sort(compareCidrs);
  const result: Cidr[] = [];
  for (const cidr of sorted) {
    // Sorted by address then prefix length, so a covering range always precedes what it covers.
    const last = result[result.length - 1];
    if (last && cidrContains(last, cidr)) continue;
    result.push(cidr);
  }
  return result;
}
