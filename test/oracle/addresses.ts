import { parseIpv4, parseIpv6, type IpFamily } from '../../src/acl/cidr.js';

/** A client address as Envoy sees it on the connection (may be IPv4-mapped IPv6). */
export interface Address {
  readonly family: IpFamily;
  readonly value: bigint;
}

export function addr(text: string): Address {
  if (text.includes(':')) {
    const value = parseIpv6(text);
    if (value === undefined) throw new Error(`bad IPv6 ${text}`);
    return { family: 6, value };
  }
  const value = parseIpv4(text);
  if (value === undefined) throw new Error(`bad IPv4 ${text}`);
  return { family: 4, value };
}

/** The IPv4 address an IPv4-mapped IPv6 address stands for; every other address unchanged. */
export function canonicalAddress(a: Address): Address {
  if (a.family === 6 && a.value >> 32n === 0xffffn) return { family: 4, value: a.value & 0xffffffffn };
  return a;
}
