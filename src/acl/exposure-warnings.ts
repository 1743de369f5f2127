// Warnings (the rule is admitted) for rules that expose more, or less, than an owner may think:
// audit mode, which refuses nothing; an ALLOW range that admits a whole address family; and an
// ALLOW rule that names only one family, so that every client of the other family is refused on
// every path. The same text reaches the client of the Shoot webhook (warning headers) and the
// Extension's Event.
import { formatCidr, parseCidr, type IpFamily } from './cidr.js';
import type { FieldError } from './field-errors.js';
import type { AclRule } from './acl-rule.js';

const FAMILY_NAME: Record<IpFamily, string> = { 4: 'IPv4', 6: 'IPv6' };

export function exposureWarnings(rule: AclRule, pathPrefix: string): FieldError[] {
  const audit: FieldError[] =
    rule.mode === 'audit'
      ? [{
          path: `${pathPrefix}.rule.mode`,
          message: 'is audit: this ACL refuses no connection, Envoy only counts the ones it would refuse (docs/owners/trying-an-acl-safely.md); set mode enforce, or remove it, to enforce the rule',
        }]
      : [];
  return [...audit, ...familyWarnings(rule, pathPrefix)];
}

/**
 * An entry with host bits set under a short prefix (`10.1.2.3/8`) is admitted as its whole network
 * (`10.0.0.0/8`): an owner who writes host bits almost always meant the host, so each is named
 * with what it admits and both ways to say what was meant. `rawCidrs` as written.
 */
export function hostBitWarnings(rawCidrs: readonly unknown[], action: AclRule['action'], pathPrefix: string): FieldError[] {
  const verb = action === 'ALLOW' ? 'admits' : 'refuses';
  return rawCidrs.flatMap((raw, i) => {
    if (typeof raw !== 'string') return [];
    const parsed = parseCidr(raw);
    if (!parsed.ok || !parsed.hostBitsCleared) return [];
    const bits = parsed.cidr.family === 4 ? 32 : 128;
    const addresses = (1n << BigInt(bits - parsed.cidr.prefixLen)).toLocaleString('en-US');
    const host = `${raw.trim().split('/')[0] ?? ''}/${bits}`;
    return [{
      path: `${pathPrefix}.rule.cidrs[${i}]`,
      message: `${JSON.stringify(raw)} has host bits set: it ${verb} the whole network ${formatCidr(parsed.cidr)} (${addresses} addresses); write ${host} for the one host, or ${formatCidr(parsed.cidr)} if the network is meant`,
    }];
  });
}

function familyWarnings(rule: AclRule, pathPrefix: string): FieldError[] {
  const path = `${pathPrefix}.rule.cidrs`;
  const warnings: FieldError[] = [];
  for (const familyBits of [[4, 32], [6, 128]] as const) {
    const [fam, bits] = familyBits;
    const ranges = rule.cidrs.filter((c) => c.family === fam);
    // The canonical set holds no range inside another, so the ranges are disjoint and their sizes add up.
    const covered = ranges.reduce((sum, c) => sum + (1n << BigInt(bits - c.prefixLen)), 0n);
    if (ranges.length === 0 || covered < 1n << BigInt(bits)) continue;
    const family = FAMILY_NAME[fam];
    const listed = ranges.map(formatCidr).join(', ');
    const one = ranges.length === 1;
    warnings.push(
      rule.action === 'ALLOW'
        ? {
            path,
            message: `${listed} ${one ? 'admits' : 'together admit'} every ${family} client: the control plane is open to the whole ${family} internet on every path; list only the ranges that need access`,
          }
        : {
            path,
            message: `${listed} ${one ? 'refuses' : 'together refuse'} every ${family} client on every path (only the seed's always-allowed ranges pass), the shoot's own users too; list only the ranges to refuse, or use ALLOW with the ranges that need access`,
          },
    );
  }
  if (rule.action !== 'ALLOW') return warnings;
  const families = new Set(rule.cidrs.map((c) => c.family));
  if (families.size === 1) {
    const [listed] = [...families] as IpFamily[];
    const other = FAMILY_NAME[listed === 4 ? 6 : 4];
    warnings.push({
      path,
      message: `lists only ${FAMILY_NAME[listed!]} ranges: every ${other} client is refused on every path (only the seed's always-allowed ranges pass); add ${other} ranges if ${other} clients must reach the control plane`,
    });
  }
  return warnings;
}
