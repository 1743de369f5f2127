import { destinationForms } from '../acl/shoot-identity.js';
import type { Permission } from './envoy-rbac-types.js';

/**
 * Requests whose protected headers mention the shoot (docs/design.md section 3). Envoy routes on
 * the first value of a repeated header, and its RBAC may see the values joined with "," (by a
 * runtime switch), so the socket form is
 * matched at the start of the value or right after a separator: a legacy ID such as
 * `shoot-p--a` must not match `shoot--xshoot-p--a--kube-apiserver-socket`. Matching ignores
 * case: a case variant can at most reach a cluster that does not exist.
 */
export function mentionsShoot(technicalID: string, headerNames: readonly string[]): Permission[] {
  const { fqdnInfix, socketValue } = destinationForms(technicalID);
  return headerNames.flatMap((name): Permission[] => [
    { header: { name, string_match: { contains: fqdnInfix, ignore_case: true } } },
    { header: { name, string_match: { prefix: socketValue, ignore_case: true } } },
    { header: { name, string_match: { contains: `,${socketValue}`, ignore_case: true } } },
  ]);
}

function escapeRegex(text: string): string {
  return text.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&');
}

/**
 * The shoot's hosts on the seed's shared `*.<domain>` chain: `<prefix>-<shortID>.<domain>`
 * where the prefix (gu, au, p, v, otc, api, ...) has no hyphen. Pinning the first label keeps
 * project `bar` from matching the hosts of project `x-bar` (a bare suffix match would). The
 * domain is matched by suffix so the regex stays far below Envoy's default RE2 program size
 * limit (100) whatever the domain's length.
 */
export function observabilityHostsOf(shortID: string, domain: string): Permission {
  return {
    and_rules: {
      rules: [
        { requested_server_name: { suffix: `-${shortID}.${domain}`, ignore_case: true } },
        { requested_server_name: { safe_regex: { regex: `(?i)[^.-]+-${escapeRegex(shortID)}\\..+` } } },
      ],
    },
  };
}
