// The "matcher" form of the combined HTTP-CONNECT filters: instead of a DENY policy per shoot that
// every request scans, the shoot a request routes to is looked up once per header. A
// header_to_metadata filter copies the technical ID out of the routable forms of each protected
// header's value into dynamic metadata; an RBAC filter per protected header looks that ID up in
// an exact-match map whose leaf is the shoot's ACL as IP-range tries (always-allowed first, then
// the rule). Cost per request: one regex and one hash lookup per header and shard, however many
// shoots the shard holds.
//
// The tries read the client's address in one canonical form: the extraction writes an IPv4-mapped
// address (`::ffff:a.b.c.d`, what a dual-stack socket or a PROXY v2 header can present) as the
// IPv4 address it stands for. Envoy's own address inputs keep the mapped form, which matches only
// IPv6 ranges, so every IPv4 range would need its mapped twin in every leaf: at 5,000 shoots that
// was a third of Envoy's memory for the ACLs.
import { isRecord } from '../json/record.js';
import { canonicalFamily, compareCidrs, formatAddress, formatCidr, type Cidr } from '../acl/cidr.js';
import type { GatewayWorkload, SeedAcl, ShootPolicy } from '../acl/model.js';
import type { PrincipalType } from '../acl/acl-rule.js';
import { RESERVED_HEADER_PREFIX } from '../acl/operator-settings.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL, type GeneratedEnvoyFilter, type MatcherFormFilter, type MatcherFormPatch } from './envoy-filter-types.js';
import { HTTP_RBAC_TYPE, type Permission, type RbacRules } from './envoy-rbac-types.js';
import { commonAdmitted, withHoisted, withoutHoisted, type Range } from './hoisted-ranges.js';
import { FILTER_NAMES, type PolicyEntry } from './filter-values.js';
import { indexedShards } from './sharding.js';
import { CONNECT_FILTER_PREFIX, shardBudget, sizedForShards } from './combined-connect-filters.js';

const HCM = 'envoy.filters.network.http_connection_manager';
const HEADER_MUTATION_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation';
export const HEADER_TO_METADATA_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config';
const HEADER_INPUT_TYPE = 'type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput';
const METADATA_INPUT_TYPE = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.DynamicMetadataInput';
const METADATA_MATCHER_TYPE = 'type.googleapis.com/envoy.extensions.matching.input_matchers.metadata.v3.Metadata';
const IP_MATCHER_TYPE = 'type.googleapis.com/xds.type.matcher.v3.IPMatcher';
const RBAC_ACTION_TYPE = 'type.googleapis.com/envoy.config.rbac.v3.Action';

/** The dynamic metadata namespace the extraction writes and the lookups read. */
export const METADATA_NAMESPACE = 'gardener-acl';
/** Action name of the guard that refuses a request whose header was not looked at (extraction missing). */
export const UNEXTRACTED_ACTION = 'gardener-acl-unextracted';
/** Action name of the ranges every shoot of a lookup admits, checked before the lookup. */
export const ADMITTED_BY_EVERY_SHOOT = 'gardener-acl-always-allowed';

/**
 * The request headers the tries read the client's address from, set by the extraction only (a
 * value the client sent is removed first): the stream's remote address (what `remote_ip` and, on
 * Istio gateways, `source_ip` mean) and the connection's peer (`direct_remote_ip`). Reserved: no
 * protected header may start with `x-gardener-acl-`.
 */
export const REMOTE_ADDRESS_HEADER = 'x-gardener-acl-remote-address';
export const DIRECT_ADDRESS_HEADER = 'x-gardener-acl-direct-address';
const ADDRESS_SOURCES = [
  { header: REMOTE_ADDRESS_HEADER, format: '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%' },
  { header: DIRECT_ADDRESS_HEADER, format: '%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%' },
] as const;
/**
 * An IPv4-mapped address as Envoy prints it (inet_ntop: `::ffff:` and a dotted tail) becomes the
 * IPv4 address; every other value matches the second branch and is kept as it is.
 */
export const CANONICAL_ADDRESS = String.raw`^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$|^(\C*)$`;
const CANONICAL_REWRITE = String.raw`\1\2`;

/**
 * The forms of a destination header value that can route to a shoot, anchored at its start (Envoy
 * routes on the first value; header_to_metadata reads a repeated header joined with ","), with the
 * technical ID captured: Istio's cluster names `outbound|<port>|<subset>|<service>.<id>.svc...`
 * (the API server, the VPN servers, any other service of the namespace) and the TLS-termination
 * socket `<id>--kube-apiserver-socket`. Cluster names are case-sensitive, so no other spelling
 * reaches a shoot's control plane. `\C` (any byte) consumes the rest whatever it holds: Envoy
 * 1.37's `.` stops at a byte that is not UTF-8, and the rewrite keeps what the match leaves.
 * Every value matches (the second branch), so the rewrite always yields exactly
 * `=<captured ID or nothing>`. Kept below RE2's default program size limit (100).
 */
export const ROUTABLE_DESTINATION = String.raw`^(?:outbound\|[^|]*\|[^|]*\|[^.,]+\.([^.,]+)\.svc\.|([^.,]+)--kube-apiserver-socket)\C*|^\C*`;
const REWRITE = String.raw`=\1\2`;
/** The extracted key of a shoot: the rewrite's output for a value that routes to it. */
export function targetKey(technicalID: string): string {
  return `=${technicalID}`;
}

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };
export type OnMatch = { readonly [key: string]: Json };

function action(name: string, verdict: 'ALLOW' | 'DENY'): OnMatch {
  return { action: { name: 'action', typed_config: { '@type': RBAC_ACTION_TYPE, name, action: verdict } } };
}

function ipInput(type: PrincipalType): Json {
  // source_ip (the connection's address after PROXY protocol) equals the stream's remote address
  // on Istio gateways, which use the connection address (use_remote_address, no trusted XFF hops).
  return headerInput(type === 'direct_remote_ip' ? DIRECT_ADDRESS_HEADER : REMOTE_ADDRESS_HEADER);
}

function range(cidr: Cidr): Json {
  return { address_prefix: formatAddress(cidr.family, cidr.address), prefix_len: cidr.prefixLen };
}

/**
 * The ranges of `cidrs` as the tries see addresses: IPv4 space as IPv4 (the client address is
 * canonical, so an IPv6 range, even one spanning ::ffff:0:0/96, never covers an IPv4 client),
 * deduplicated and sorted.
 */
function addressSet(cidrs: readonly Cidr[]): Cidr[] {
  const set = new Map<string, Cidr>();
  for (const cidr of cidrs.map(canonicalFamily)) set.set(formatCidr(cidr), cidr);
  return [...set.values()].sort(compareCidrs);
}

/** A node: the client address (of `type`) in `cidrs` → `inside`, otherwise → `outside`. */
function ipNode(type: PrincipalType, cidrs: readonly Cidr[], inside: OnMatch, outside: OnMatch): OnMatch {
  const inSet = addressSet(cidrs);
  if (inSet.length === 0) return outside;
  return {
    matcher: {
      matcher_tree: {
        input: ipInput(type),
        custom_match: { name: 'ip-ranges', typed_config: { '@type': IP_MATCHER_TYPE, range_matchers: [{ ranges: inSet.map(range), on_match: inside }] } },
      },
      on_no_match: outside,
    },
  };
}

/**
 * A DENY rule's node: the client address (of `type`) in `cidrs` → refused, any other address →
 * admitted, and no address (the extraction's header missing, or not an IP) → refused. The more
 * specific range wins in Envoy's IP matcher, and on equal length the first listed.
 */
function denyNode(type: PrincipalType, cidrs: readonly Cidr[], deny: OnMatch, allow: OnMatch): OnMatch {
  const everyAddress = [{ address_prefix: '0.0.0.0', prefix_len: 0 }, { address_prefix: '::', prefix_len: 0 }];
  return {
    matcher: {
      matcher_tree: {
        input: ipInput(type),
        custom_match: {
          name: 'ip-ranges',
          typed_config: { '@type': IP_MATCHER_TYPE, range_matchers: [{ ranges: addressSet(cidrs).map(range), on_match: deny }, { ranges: everyAddress, on_match: allow }] },
        },
      },
      on_no_match: deny,
    },
  };
}

/**
 * docs/design.md section 3 for one shoot as a matcher leaf: the remote address in A(S) admits; otherwise
 * ALLOW admits a client in the rule's CIDRs and DENY refuses one. Actions are named by the
 * technical ID, so per-rule counters and the access log name the shoot (except for clients that
 * ranges every shoot of the lookup admits let in first: `gardener-acl-always-allowed`).
 */
export function shootAclLeaf(shoot: Pick<ShootPolicy, 'technicalID' | 'rule' | 'alwaysAllowed'>): OnMatch {
  const id = shoot.technicalID;
  const { rule } = shoot;
  const allow = action(id, 'ALLOW');
  const deny = action(id, 'DENY');
  if (rule.action === 'ALLOW' && rule.type === 'remote_ip') return ipNode('remote_ip', [...shoot.alwaysAllowed, ...rule.cidrs], allow, deny);
  const ruleNode = rule.action === 'ALLOW' ? ipNode(rule.type, rule.cidrs, allow, deny) : denyNode(rule.type, rule.cidrs, deny, allow);
  return ipNode('remote_ip', shoot.alwaysAllowed, allow, ruleNode);
}

/** The metadata key the extraction writes a protected header's ID under. */
export function metadataKey(header: string): string {
  return header.toLowerCase();
}

/** The request header the extracted ID of `header` is copied into, where an exact-match map can read it. */
export function targetHeader(header: string): string {
  return `x-gardener-acl-target-${header.toLowerCase()}`;
}

/** A header mutation that sets each header to its formatted value; whatever the client sent under that name is removed first. */
export function setHeadersFilter(name: string, headers: readonly { readonly key: string; readonly value: string }[]): MatcherFormFilter {
  return {
    name,
    typed_config: {
      '@type': HEADER_MUTATION_TYPE,
      mutations: {
        request_mutations: [
          ...headers.map(({ key }) => ({ remove: key })),
          ...headers.map((header) => ({ append: { header, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' } })),
        ],
      },
    },
  };
}

/** The formatter value of an extracted metadata entry. */
export function extractedValue(key: string): string {
  return `%DYNAMIC_METADATA(${METADATA_NAMESPACE}:${key})%`;
}

/** Sets the address headers to the client's addresses as Envoy prints them, for the extraction to canonicalize. */
export function clientAddressFilter(name: string): MatcherFormFilter {
  return setHeadersFilter(
    name,
    ADDRESS_SOURCES.map(({ header, format }) => ({ key: header, value: format })),
  );
}

/**
 * Copies each extracted ID from dynamic metadata into its target header (the matching API reads
 * metadata only as a structured value, not as a string a map can be keyed on), and the canonical
 * client addresses into the address headers the tries read.
 */
export function targetHeaderFilter(name: string, headers: readonly string[]): MatcherFormFilter {
  return setHeadersFilter(name, [
    ...headers.map((header) => ({ key: targetHeader(header), value: extractedValue(metadataKey(header)) })),
    ...ADDRESS_SOURCES.map(({ header }) => ({ key: header, value: extractedValue(header) })),
  ]);
}

/**
 * Copies the technical ID a routable value of each protected header names into dynamic metadata,
 * and the client's addresses in canonical form.
 */
export function extractionFilter(name: string, headers: readonly string[]): MatcherFormFilter {
  // Proto defaults (type STRING, remove false) are left out: Istio drops them when it decodes the
  // patch, and an object that differs from what Istio serves is harder to compare with it.
  const rule = (header: string, key: string, regex: string, substitution: string) => ({
    header,
    on_header_present: { metadata_namespace: METADATA_NAMESPACE, key, regex_value_rewrite: { pattern: { regex }, substitution } },
  });
  return {
    name,
    typed_config: {
      '@type': HEADER_TO_METADATA_TYPE,
      request_rules: [
        ...headers.map((header) => rule(header, metadataKey(header), ROUTABLE_DESTINATION, REWRITE)),
        ...ADDRESS_SOURCES.map(({ header }) => rule(header, header, CANONICAL_ADDRESS, CANONICAL_REWRITE)),
      ],
    },
  };
}

// Any byte: `.` does not match a byte that is not UTF-8 on Envoy 1.37, and the match is a full match.
const NON_EMPTY: Json = { safe_regex: { google_re2: {}, regex: String.raw`\C+` } };
// Set only by the extraction filter, so a client cannot fake it (unlike a header).
const EXTRACTED: Json = { name: 'extracted', typed_config: { '@type': METADATA_MATCHER_TYPE, value: { present_match: true } } };

function metadataInput(key: string): Json {
  return { name: 'extracted-id', typed_config: { '@type': METADATA_INPUT_TYPE, filter: METADATA_NAMESPACE, path: [{ key }] } };
}

const notExtracted = (key: string): Json => ({ not_matcher: { single_predicate: { input: metadataInput(key), custom_match: EXTRACTED } } });

function headerInput(header: string): Json {
  return { name: 'header', typed_config: { '@type': HEADER_INPUT_TYPE, header_name: header } };
}

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * An RBAC matcher that looks the shoot up by `lookupHeader` (a target header). A request carrying
 * one of `guardHeaders` for which the extraction left no ID is refused: a missing or misplaced
 * extraction must not turn the filter into a pass-through, nor let a client's own target header
 * decide. (A missing or unparsable client address needs no guard: every leaf refuses it, see
 * shootAclLeaf.) Then the ranges every shoot admits, when hoisted; then the extracted ID selects
 * the shoot's leaf; a value naming no shoot of this map is admitted.
 */
function lookupMatcher(guardHeaders: readonly string[], lookupHeader: string, leaves: ReadonlyMap<string, OnMatch>): Json {
  const remote = ipInput('remote_ip');
  const ids = [...leaves.keys()].sort(byCodeUnit);
  const common = leaves.size > 1 ? commonAdmitted([...leaves.values()], remote) : [];
  const lookupWith = (reduced: (leaf: OnMatch) => OnMatch): OnMatch => {
    const map: Record<string, OnMatch> = {};
    for (const id of ids) map[targetKey(id)] = reduced(leaves.get(id) as OnMatch);
    return ids.length === 0 ? action('no-acl', 'ALLOW') : { matcher: { matcher_tree: { input: headerInput(lookupHeader), exact_match_map: { map } }, on_no_match: action('no-acl', 'ALLOW') } };
  };
  const plain = lookupWith((leaf) => leaf);
  const hoisted: OnMatch = {
    matcher: {
      matcher_tree: { input: remote, custom_match: { name: 'ip-ranges', typed_config: { '@type': IP_MATCHER_TYPE, range_matchers: [{ ranges: common, on_match: action(ADMITTED_BY_EVERY_SHOOT, 'ALLOW') }] } } },
      on_no_match: lookupWith((leaf) => withoutHoisted(leaf, common, remote)),
    },
  };
  // Only where it makes the object smaller: shards and buckets are sized by their leaves.
  const admitted = common.length > 0 && JSON.stringify(hoisted).length < JSON.stringify(plain).length ? hoisted : plain;
  // A guarded header is present and its ID was not extracted.
  const unextracted = (header: string): Json => ({
    and_matcher: { predicate: [{ single_predicate: { input: headerInput(header), value_match: NON_EMPTY } }, notExtracted(metadataKey(header))] },
  });
  const guards: Json[] = guardHeaders.map((header) => ({ predicate: unextracted(header), on_match: action(UNEXTRACTED_ACTION, 'DENY') }));
  return { matcher_list: { matchers: guards }, on_no_match: admitted };
}

/** Policy of the fallback `rules` beside every lookup: it decides only if a decoder dropped `matcher`. */
export const MATCHER_DROPPED_POLICY = 'gardener-acl-matcher-dropped';

/**
 * RBAC `rules` that refuse every request a lookup would decide on: one whose `lookupHeader` names
 * a shoot (`=shoot-…`, the extraction's key), or that carries one of `guardHeaders` the extraction
 * did not read. Envoy ignores `rules` when `matcher` is set, so beside a lookup they cost nothing and
 * change no verdict; they decide where no lookup runs: an Istio that decodes the patch leniently
 * and drops `matcher` (an RBAC with nothing in it would admit everything), or an ECDS bucket that
 * is missing (its listener's default config).
 */
export function failClosedRules(policy: string, guardHeaders: readonly string[], lookupHeader: string): RbacRules {
  const unextracted = guardHeaders.map((header): Permission => ({
    and_rules: {
      rules: [
        { header: { name: header, string_match: { safe_regex: { regex: String.raw`\C+` } } } },
        { not_rule: { metadata: { filter: METADATA_NAMESPACE, path: [{ key: metadataKey(header) }], value: { present_match: true } } } },
      ],
    },
  }));
  return {
    action: 'DENY',
    policies: {
      [policy]: {
        // Every technical ID starts with `shoot-` (shoot--<project>--<name>, legacy shoot-<project>--<name>); a prefix needs no regex.
        permissions: [{ header: { name: lookupHeader, string_match: { prefix: targetKey('shoot-') } } }, ...unextracted],
        principals: [{ any: true }],
      },
    },
  };
}

/** One shoot's place in a matcher shard: its leaf, enforced (`matcher`) or only counted (`shadow_matcher`). */
export type MatcherEntry = PolicyEntry<OnMatch>;

/** An RBAC filter over `entries`: enforced shoots in `matcher`, audited ones in `shadow_matcher`. */
export function lookupRbacFilter(name: string, guardHeaders: readonly string[], lookupHeader: string, entries: ReadonlyMap<string, MatcherEntry>): MatcherFormFilter {
  const enforced = new Map<string, OnMatch>();
  const audited = new Map<string, OnMatch>();
  for (const [id, entry] of entries) (entry.mode === 'audit' ? audited : enforced).set(id, entry.policy);
  return {
    name,
    typed_config: {
      '@type': HTTP_RBAC_TYPE,
      rules: failClosedRules(MATCHER_DROPPED_POLICY, guardHeaders, lookupHeader),
      matcher: lookupMatcher(guardHeaders, lookupHeader, enforced),
      ...(audited.size > 0 ? { shadow_matcher: lookupMatcher(guardHeaders, lookupHeader, audited), track_per_rule_stats: true } : {}),
    },
  };
}

/** The RBAC filter of one header in one shard of the matcher form. */
export function headerRbacFilter(name: string, header: string, entries: ReadonlyMap<string, MatcherEntry>): MatcherFormFilter {
  return lookupRbacFilter(name, [header], targetHeader(header), entries);
}

function shardSuffix(port: number, shard: number): string {
  return `${port}-${String(shard).padStart(3, '0')}`;
}

/** An object inserting `values` first in the port's HTTP chain, in this order. */
export function matcherFormObject(gateway: GatewayWorkload, name: string, port: number, values: readonly MatcherFormPatch['patch']['value'][], priority?: number): GeneratedEnvoyFilter<MatcherFormPatch> {
  // INSERT_FIRST puts each patch before the previous one, hence the reverse order.
  const configPatches = [...values].reverse().map(
    (value): MatcherFormPatch => ({
      applyTo: 'HTTP_FILTER',
      match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { filter: { name: HCM } } } },
      patch: { operation: 'INSERT_FIRST', value },
    }),
  );
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace: gateway.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' } },
    spec: { workloadSelector: { labels: gateway.selector }, ...(priority === undefined ? {} : { priority }), configPatches },
  };
}

/** A matcher-form shard's name; distinct from the rules form's, so a switch between forms never replaces one by the other in place. */
export function matcherFilterName(port: number, shard: number): string {
  return `${CONNECT_FILTER_PREFIX}${port}-m${String(shard).padStart(3, '0')}`;
}

/** Port and shard of a matcher-form shard name; undefined for any other name. */
export function parseMatcherFilterName(name: string): { readonly port: number; readonly shard: number } | undefined {
  if (!name.startsWith(CONNECT_FILTER_PREFIX)) return undefined;
  const match = /^(\d{1,5})-m(\d{3,4})$/.exec(name.slice(CONNECT_FILTER_PREFIX.length));
  if (!match) return undefined;
  return { port: Number(match[1]), shard: Number(match[2]) };
}

/** The shoots' map of a lookup matcher (after the guards and the ranges every shoot admits), and those ranges. */
export function lookupOf(matcher: unknown): { readonly map: Record<string, unknown>; readonly hoisted: readonly Range[] } | undefined {
  if (!isRecord(matcher) || !isRecord(matcher['on_no_match'])) return undefined;
  let next: unknown = matcher['on_no_match'];
  let hoisted: readonly Range[] = [];
  const remote = ipInput('remote_ip');
  // The ranges every shoot admits, when hoisted: an IP node before the lookup.
  const first = isRecord(next) ? next['matcher'] : undefined;
  if (isRecord(first) && isRecord(first['matcher_tree']) && 'custom_match' in first['matcher_tree']) {
    hoisted = commonAdmitted([next], remote);
    next = first['on_no_match'];
  }
  const lookup = isRecord(next) ? next['matcher'] : undefined;
  if (!isRecord(lookup) || !isRecord(lookup['matcher_tree']) || !isRecord(lookup['matcher_tree']['exact_match_map'])) return undefined;
  const map = lookup['matcher_tree']['exact_match_map']['map'];
  return isRecord(map) ? { map, hoisted } : undefined;
}

function leavesOf(matcher: unknown): [string, OnMatch][] {
  const found = lookupOf(matcher);
  if (found === undefined) return [];
  const remote = ipInput('remote_ip');
  return Object.entries(found.map).flatMap(([key, leaf]): [string, OnMatch][] =>
    key.startsWith('=') && isRecord(leaf) ? [[key.slice(1), withHoisted(leaf as OnMatch, found.hoisted, remote)]] : [],
  );
}

/**
 * The entries the RBAC patches of a stored matcher shard hold, read loosely from every header's
 * filter (a shoot listed in any counts; enforced wins over audited). Whether the object is exactly
 * as written is for the caller to check by rebuilding it from these entries.
 */
export function storedMatcherEntries(spec: unknown): Map<string, MatcherEntry> {
  const entries = new Map<string, MatcherEntry>();
  const patches: unknown[] = isRecord(spec) && Array.isArray(spec['configPatches']) ? spec['configPatches'] : [];
  for (const patch of patches) {
    const value = isRecord(patch) && isRecord(patch['patch']) ? patch['patch']['value'] : undefined;
    const config = isRecord(value) ? value['typed_config'] : undefined;
    if (!isRecord(config)) continue;
    for (const [id, leaf] of leavesOf(config['shadow_matcher'])) if (!entries.has(id)) entries.set(id, { mode: 'audit', policy: leaf });
    // The first enforced leaf counts: a bucket's own resource comes before an earlier version's it still carries.
    for (const [id, leaf] of leavesOf(config['matcher'])) if (entries.get(id)?.mode !== 'enforce') entries.set(id, { mode: 'enforce', policy: leaf });
  }
  return entries;
}

/** The protected headers a stored extraction object reads (its header_to_metadata rules, without the address headers). */
export function extractedHeaders(spec: unknown): string[] {
  const patches: unknown[] = isRecord(spec) && Array.isArray(spec['configPatches']) ? spec['configPatches'] : [];
  return patches.flatMap((patch) => {
    const value = isRecord(patch) && isRecord(patch['patch']) ? patch['patch']['value'] : undefined;
    const config = isRecord(value) ? value['typed_config'] : undefined;
    if (!isRecord(config) || config['@type'] !== HEADER_TO_METADATA_TYPE || !Array.isArray(config['request_rules'])) return [];
    return config['request_rules'].flatMap((rule: unknown) => (isRecord(rule) && typeof rule['header'] === 'string' && !rule['header'].startsWith(RESERVED_HEADER_PREFIX) ? [rule['header']] : []));
  });
}

/**
 * The protected headers a stored matcher shard checks, in the order it was built with (its
 * per-header RBAC filters are named `-h<index>`): the header each filter's guard reads.
 */
export function checkedHeaders(spec: unknown): string[] {
  const patches: unknown[] = isRecord(spec) && Array.isArray(spec['configPatches']) ? spec['configPatches'] : [];
  const byIndex = patches.flatMap((patch): [number, string][] => {
    const value = isRecord(patch) && isRecord(patch['patch']) ? patch['patch']['value'] : undefined;
    const index = isRecord(value) && typeof value['name'] === 'string' ? /-h(\d+)$/.exec(value['name'])?.[1] : undefined;
    const header = index === undefined ? undefined : guardHeaderIn(value);
    return index === undefined || header === undefined ? [] : [[Number(index), header]];
  });
  return byIndex.sort((a, b) => a[0] - b[0]).map(([, header]) => header);
}

/** The first protected header an HTTP header input reads somewhere in `node` (reserved headers are ours, not protected ones). */
function guardHeaderIn(node: unknown): string | undefined {
  if (Array.isArray(node)) {
    for (const item of node) {
      const found = guardHeaderIn(item);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!isRecord(node)) return undefined;
  if (node['@type'] === HEADER_INPUT_TYPE && typeof node['header_name'] === 'string' && !node['header_name'].toLowerCase().startsWith(RESERVED_HEADER_PREFIX)) return node['header_name'];
  for (const value of Object.values(node)) {
    const found = guardHeaderIn(value);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Name of the per-port object that extracts the IDs for every shard of the matcher form. */
export function extractionObjectName(port: number): string {
  return `${CONNECT_FILTER_PREFIX}${port}-extract`;
}

/** The port of an extraction object's name; undefined for any other name. */
export function parseExtractionObjectName(name: string): number | undefined {
  const match = /^(\d{1,5})-extract$/.exec(name.startsWith(CONNECT_FILTER_PREFIX) ? name.slice(CONNECT_FILTER_PREFIX.length) : '');
  return match ? Number(match[1]) : undefined;
}

/**
 * Istio applies EnvoyFilters by ascending priority and each INSERT_FIRST goes to the front, so the
 * extraction, applied after the shards, runs before every one of them. Were it missing or placed
 * after them, every shard refuses the requests carrying a protected header (see lookupMatcher).
 */
export const EXTRACTION_PRIORITY = 10;

/** The per-port extraction: client addresses into headers, IDs and canonical addresses into metadata, then into the headers the RBAC filters read. */
export function extractionObject(gateway: GatewayWorkload, port: number, headers: readonly string[]): GeneratedEnvoyFilter<MatcherFormPatch> {
  return matcherFormObject(gateway, extractionObjectName(port), port, extractionFilters(port, headers), EXTRACTION_PRIORITY);
}

/** The extraction's filters on `port`, in chain order: addresses, extraction, target and address headers. */
export function extractionFilters(port: number, headers: readonly string[], targetHeaders: readonly string[] = headers): MatcherFormFilter[] {
  return [
    clientAddressFilter(`${FILTER_NAMES.connect}-address-${port}`),
    extractionFilter(`${FILTER_NAMES.connect}-extract-${port}`, headers),
    targetHeaderFilter(`${FILTER_NAMES.connect}-target-${port}`, targetHeaders),
  ];
}

/** One shard's object: one RBAC filter per protected header, first in the port's HTTP chain after the extraction. */
export function matcherConnectFilter(
  gateway: GatewayWorkload,
  port: number,
  shard: number,
  headers: readonly string[],
  entries: ReadonlyMap<string, MatcherEntry>,
): GeneratedEnvoyFilter<MatcherFormPatch> {
  const suffix = shardSuffix(port, shard);
  return matcherFormObject(
    gateway,
    matcherFilterName(port, shard),
    port,
    headers.map((header, i) => headerRbacFilter(`${FILTER_NAMES.connect}-${suffix}-h${i}`, header, entries)),
  );
}

/** Bytes one shoot takes in a shard of the matcher form: its leaf once per header, with its key (`"=<id>":<leaf>,`). */
export function matcherEntryBytes(technicalID: string, leaf: OnMatch, headers: number): number {
  return (JSON.stringify(leaf).length + technicalID.length + 5) * headers;
}

// The same headers always measure the same: measured once per form and header list.
const measuredScaffolding = new Map<string, number>();

/**
 * The bytes an object of a matcher form takes besides its entries: both matchers (one enforced and
 * one audited entry bring both) with their guards and lookups, for these headers. Shards are
 * filled up to maxObjectBytes minus this (and room for the gateway), so no object exceeds it.
 */
export function scaffoldingBytes(kind: string, headers: readonly string[], build: (entries: ReadonlyMap<string, MatcherEntry>) => unknown, entryBytes: (technicalID: string, leaf: OnMatch) => number): number {
  const key = `${kind}\n${headers.join('\n')}`;
  const known = measuredScaffolding.get(key);
  if (known !== undefined) return known;
  const entries = new Map(
    (['enforce', 'audit'] as const).map((mode): [string, MatcherEntry] => {
      const technicalID = `shoot--scaffold--${mode}`;
      // No ranges: a leaf that is only its actions, so nothing is hoisted.
      return [technicalID, { mode, policy: shootAclLeaf({ technicalID, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [], mode }, alwaysAllowed: [] }) }];
    }),
  );
  const entriesBytes = [...entries].reduce((sum, [id, entry]) => sum + entryBytes(id, entry.policy), 0);
  const measured = JSON.stringify(build(entries)).length - entriesBytes;
  measuredScaffolding.set(key, measured);
  return measured;
}

/** The gateway scaffolding is measured with (GATEWAY_ROOM_BYTES is the room for longer ones). */
export const SCAFFOLD_GATEWAY: GatewayWorkload = { namespace: 'istio-ingress', selector: { app: 'istio-ingressgateway', istio: 'ingressgateway' } };

/** The matcher form's scaffolding for `headers` (see scaffoldingBytes). */
export function matcherScaffoldingBytes(headers: readonly string[]): number {
  return scaffoldingBytes(
    'matcher',
    headers,
    (entries) => matcherConnectFilter(SCAFFOLD_GATEWAY, 65535, 999, headers, entries),
    (id, leaf) => matcherEntryBytes(id, leaf, headers.length),
  );
}

/** The matcher-form combined filters, sharded and ordered as the rules form's. */
export function buildMatcherConnectFilters(seed: Pick<SeedAcl, 'operator' | 'gateways'> & { readonly shoots: readonly ShootPolicy[] }): GeneratedEnvoyFilter<MatcherFormPatch>[] {
  const { operator } = seed;
  const scaffolding = matcherScaffoldingBytes(operator.protectedHeaders);
  const { items, unplaced } = sizedForShards(
    seed.shoots,
    operator.maxObjectBytes,
    (shoot): { bytes: number; item: MatcherEntry } => {
      const leaf = shootAclLeaf(shoot);
      return { bytes: matcherEntryBytes(shoot.technicalID, leaf, operator.protectedHeaders.length), item: { mode: shoot.rule.mode, policy: leaf } };
    },
    scaffolding,
  );
  const [first] = unplaced.values();
  if (first !== undefined) throw new Error(`cannot shard: ${first}`);
  const shards = indexedShards(items, shardBudget(operator.maxObjectBytes, scaffolding));
  const gateways = [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  if (shards.length === 0) return [];
  return gateways.flatMap((gateway) =>
    operator.protectedPorts.flatMap((port) => [
      extractionObject(gateway, port, operator.protectedHeaders),
      ...shards.map(({ shard, index }) => matcherConnectFilter(gateway, port, index, operator.protectedHeaders, new Map(shard.map(({ key, item }) => [key, item])))),
    ]),
  );
}
