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

/**
 * The address as Envoy prints it (%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%): dotted quad for IPv4;
 * for IPv6 inet_ntop's form, lower-case hex, the first longest run of two or more zero groups as
 * `::`, and a dotted IPv4 tail for IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible
 * (`::a.b.c.d`, first six groups zero) addresses. Measured on Envoy 1.37 and 1.40 through PROXY v2
 * headers: `::ffff:203.0.113.9`, `::1.2.3.4`, `::0.1.255.255` (for ::1:ffff), `2001:db8::1:0:0:1`.
 */
export function envoyAddressText(a: Address): string {
  const dotted = (v: bigint): string => [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 0xffn)).join('.');
  if (a.family === 4) return dotted(a.value);
  const words = Array.from({ length: 8 }, (_, i) => Number((a.value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = { base: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > best.len) best = { base: i, len: j - i };
    i = j;
  }
  if (best.len < 2) best = { base: -1, len: 0 };
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (best.base !== -1 && i >= best.base && i < best.base + best.len) {
      if (i === best.base) out += ':';
      continue;
    }
    if (i !== 0) out += ':';
    if (i === 6 && best.base === 0 && (best.len === 6 || (best.len === 5 && words[5] === 0xffff))) return out + dotted(a.value & 0xffffffffn);
    out += (words[i] as number).toString(16);
  }
  if (best.base !== -1 && best.base + best.len === 8) out += ':';
  return out;
}

function parseDottedQuad(text: string): bigint | undefined {
  // inet_pton: four decimal parts, no leading zeros, each at most 255.
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((v, p) => (v << 8n) | BigInt(p), 0n);
}

/**
 * An address in the text form Envoy's IP matcher input accepts (Network::Utility::
 * parseInternetAddressNoThrow, inet_pton): IPv4 dotted quad, or IPv6 with at most one `::` and an
 * optional dotted IPv4 tail. Anything else (a port, a zone, spaces, a list) is no address.
 */
export function parseInetAddress(text: string): Address | undefined {
  if (!text.includes(':')) {
    const v4 = parseDottedQuad(text);
    return v4 === undefined ? undefined : { family: 4, value: v4 };
  }
  if (!/^[0-9A-Fa-f:.]+$/.test(text)) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (part: string): bigint[] | undefined => {
    if (part === '') return [];
    const fields = part.split(':');
    const out: bigint[] = [];
    for (const [i, field] of fields.entries()) {
      if (i === fields.length - 1 && field.includes('.')) {
        const v4 = parseDottedQuad(field);
        if (v4 === undefined) return undefined;
        out.push(v4 >> 16n, v4 & 0xffffn);
      } else if (/^[0-9A-Fa-f]{1,4}$/.test(field)) out.push(BigInt(`0x${field}`));
      else return undefined;
    }
    return out;
  };
  const head = groups(halves[0] ?? '');
  const tail = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (head === undefined || tail === undefined) return undefined;
  if (halves.length === 2 && (halves[0] ?? '').includes('.')) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const words = [...head, ...Array.from({ length: halves.length === 2 ? missing : 0 }, () => 0n), ...tail];
  return { family: 6, value: words.reduce((v, w) => (v << 16n) | w, 0n) };
}
