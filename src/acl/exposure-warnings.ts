// Warnings (the rule is admitted) for rules that expose more, or less, than an owner may think:
// audit mode, which refuses nothing; an ALLOW range that admits a whole address family; and an
// ALLOW rule that names only one family, so that every client of the other family is refused on
// every path. The same text reaches the client of the Shoot webhook (warning headers) and the
// Extension's Event.
import { formatCidr, type IpFamily } from './cidr.js';
import type { FieldError } from './field-errors.js';
import type { AclRule } from './provider-config.js';

const FAMILY_NAME: Record<IpFamily, string> = { 4: 'IPv4', 6: 'IPv6' };

export function exposureWarnings(rule: AclRule, pathPrefix: string): FieldError[] {
  const audit: FieldError[] =
    rule.mode === 'audit'
      ? [{
          path: `${pathPrefix}.rule.mode`,
          message: 'is audit: this ACL refuses no connection, Envoy only counts the ones it would refuse (README "Trying an ACL safely"); set mode enforce, or remove it, to enforce the rule',
        }]
      : [];
  return [...audit, ...familyWarnings(rule, pathPrefix)];
}

function familyWarnings(rule: AclRule, pathPrefix: string): FieldError[] {
  if (rule.action !== 'ALLOW') return [];
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
    warnings.push({
      path,
      message: `${listed} ${ranges.length === 1 ? 'admits' : 'together admit'} every ${family} client: the control plane is open to the whole ${family} internet on every path; list only the ranges that need access`,
    });
  }
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
