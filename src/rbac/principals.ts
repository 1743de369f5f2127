import { formatAddress, IPV4_MAPPED_BLOCK, cidrContains, ipv4ToMapped, type Cidr } from '../acl/cidr.js';
import type { PrincipalType, AclRule } from '../acl/acl-rule.js';
import type { CidrRange, Principal } from './envoy-rbac-types.js';

function cidrRange(cidr: Cidr): CidrRange {
  return { address_prefix: formatAddress(cidr.family, cidr.address), prefix_len: cidr.prefixLen };
}

function ipPrincipal(type: PrincipalType, cidr: Cidr): Principal {
  const range = cidrRange(cidr);
  switch (type) {
    case 'remote_ip':
      return { remote_ip: range };
    case 'direct_remote_ip':
      return { direct_remote_ip: range };
    case 'source_ip':
      return { source_ip: range };
  }
}

/**
 * Principals matching exactly the clients in `cidrs`, whichever form the address takes.
 * Envoy never matches an IPv4 range against an IPv6 peer, and a dual-stack socket or a
 * PROXY v2 header can present an IPv4 client as `::ffff:a.b.c.d`. So an IPv4 range also
 * gets its IPv4-mapped twin, and an IPv6 range that spans the mapped block excludes it:
 * IPv4 clients are matched by IPv4 ranges only, in either form.
 */
export function cidrPrincipals(type: PrincipalType, cidrs: readonly Cidr[]): Principal[] {
  const principals: Principal[] = [];
  for (const cidr of cidrs) {
    if (cidr.family === 4) {
      principals.push(ipPrincipal(type, cidr), ipPrincipal(type, ipv4ToMapped(cidr)));
    } else if (cidrContains(cidr, IPV4_MAPPED_BLOCK)) {
      principals.push({ and_ids: { ids: [ipPrincipal(type, cidr), { not_id: ipPrincipal(type, IPV4_MAPPED_BLOCK) }] } });
    } else {
      principals.push(ipPrincipal(type, cidr));
    }
  }
  return principals;
}

function anyOf(ids: Principal[]): Principal {
  return ids.length === 1 && ids[0] ? ids[0] : { or_ids: { ids } };
}

/**
 * The clients a shoot's ACL does NOT admit (docs/design.md section 3), as one principal:
 * ALLOW: not (client in cidrs or remote in A);  DENY: client in cidrs and remote not in A.
 * Every filter is a DENY filter with this principal, so filters and shards compose by AND.
 */
export function notAdmittedPrincipal(rule: AclRule, alwaysAllowed: readonly Cidr[]): Principal {
  const ruleIds = cidrPrincipals(rule.type, rule.cidrs);
  const alwaysIds = cidrPrincipals('remote_ip', alwaysAllowed);
  if (rule.action === 'ALLOW') return { not_id: anyOf([...ruleIds, ...alwaysIds]) };
  if (alwaysIds.length === 0) return anyOf(ruleIds);
  return { and_ids: { ids: [anyOf(ruleIds), { not_id: anyOf(alwaysIds) }] } };
}
