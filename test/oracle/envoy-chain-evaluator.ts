// A model of how Envoy evaluates what our stored EnvoyFilters put in front of a gateway's CONNECT
// listener, for every form of the combined filters (rules, matcher, ecds), written from Envoy's
// documented behaviour and source, never from the generator's code: placement (placement.ts),
// ECDS resolution, header_mutation, header_to_metadata, and the HTTP RBAC filter with `rules` or
// `matcher`. test/envoy/oracle-vs-envoy.test.ts holds it against Envoy 1.37 and 1.40 case by case.
//
// Facts it relies on, and how they were established:
// - The HTTP codec lower-cases header names and trims spaces and tabs around values; a repeated
//   header stays separate entries, and every reader below that wants one value (header_to_metadata,
//   HttpRequestHeaderMatchInput) joins them with "," (HeaderUtility::getAllOfHeaderAsString).
// - header_mutation (source/common/http/header_mutation.cc): mutations in order; `remove` drops
//   every entry of the name; `append` formats the value and does nothing when it is empty (unless
//   keep_empty_value), OVERWRITE_IF_EXISTS_OR_ADD replaces every entry by one. The header formatter
//   omits empty values: %DYNAMIC_METADATA(ns:key)% of absent metadata is "" (measured: no header is
//   added, on 1.37 and 1.40), a string value is written raw. Addresses print as envoyAddressText.
// - header_to_metadata: the joined value of a present header (an empty one too), rewritten by
//   RE2 GlobalReplace, is stored as a STRING when not empty and shorter than 8 KiB (the check is
//   after the rewrite: a 9 KiB value rewritten to `=<id>` is stored, measured). Metadata of a
//   namespace merges into what earlier filters set.
// - RE2 reads bytes as UTF-8 on Envoy 1.37 and as Latin-1 on 1.40 (re2.ts): `[^.,]+` extracts
//   `shoot--p\xff--foo` on 1.40 and nothing on 1.37 (measured).
// - HTTP RBAC: with `matcher` set, `rules` are ignored; a request the matcher leaves without an
//   action is refused ("Requests do not match any matcher will be denied"); with neither, the
//   filter enforces nothing; shadow_* never refuse. `rules`: as rbac-evaluator.ts; a header
//   permission on a repeated header matches any single value on 1.40
//   (rbac_match_headers_individually) and only the joined value on 1.37 (measured: DENY on
//   `x-h: b` refuses `x-h: a` + `x-h: b` on 1.40 and admits it on 1.37).
// - xds matchers (source/common/matcher, matcher.h handleRecursionAndSkips): a list takes the first
//   predicate that matches; a map looks the input up exactly; absent input goes to on_no_match. An
//   on_match whose nested matcher yields no action counts as no match there: the list goes on with
//   the next predicate, a map and the IP matcher with their on_no_match (the IP matcher first with
//   the next candidate that is not `exclusive`). Read in Envoy's source, not measured: our objects
//   give every nested matcher an on_no_match, so it matters only for objects we never write.
// - IP matcher (xds.type.matcher.v3.IPMatcher, trie_matcher.h): the input parsed as an IP address
//   (anything else: on_no_match); the candidate ranges containing it, longest prefix first and on
//   equal length the range_matcher listed first; IPv4 ranges never match an IPv6 address (an
//   IPv4-mapped one included) and the other way round.
// - ECDS: a filter with `config_discovery` runs the resource of its name (a resource whose type is
//   not in `type_urls` is rejected: as if missing). Missing after initial_fetch_timeout, the
//   `default_config` decides, and without one every request is answered 500 (measured on both
//   versions with an xDS source that never answers). Two different resources of one name are
//   something Istio would send both of; the model refuses to guess which Envoy keeps.
import type { RbacRules } from '../../src/rbac/envoy-rbac-types.js';
import { envoyAddressText, parseInetAddress, type Address } from './addresses.js';
import { connectChainPlacement, isRecord, type JsonRecord, type PlacedHttpFilter } from './placement.js';
import { evalRbac, matchString } from './rbac-evaluator.js';
import { re2, type Re2Encoding } from './re2.js';

/** What differs between the Envoy versions we support, as far as our filters are concerned. */
export interface EnvoyBehaviour {
  readonly version: string;
  readonly regexEncoding: Re2Encoding;
  /** How an RBAC `rules` header permission sees a repeated header. */
  readonly rbacRepeatedHeaders: 'individually' | 'joined';
}

export const ENVOY_1_40: EnvoyBehaviour = { version: '1.40.0', regexEncoding: 'latin1', rbacRepeatedHeaders: 'individually' };
export const ENVOY_1_37: EnvoyBehaviour = { version: '1.37.0', regexEncoding: 'utf8', rbacRepeatedHeaders: 'joined' };
export const ENVOY_BEHAVIOURS: readonly EnvoyBehaviour[] = [ENVOY_1_40, ENVOY_1_37];

export function envoyBehaviour(version: string): EnvoyBehaviour {
  const found = ENVOY_BEHAVIOURS.find((b) => b.version === version);
  if (found === undefined) throw new Error(`no modelled behaviour for Envoy ${version}`);
  return found;
}

export type Headers = readonly (readonly [string, string])[];

export interface ConnectRequest {
  /** Header lines as the client sends them (values are byte strings). */
  readonly headers: Headers;
  /** The stream's remote address (the PROXY-protocol source when present). */
  readonly remote: Address;
  /** The connection's peer. */
  readonly direct: Address;
}

export type ChainOutcome =
  | { readonly kind: 'passed' }
  | { readonly kind: 'refused'; readonly filter: string; readonly why: string }
  | { readonly kind: 'error'; readonly filter: string; readonly why: string };

/** The request as the filters left it (for calibration of the extraction against a real Envoy). */
export interface ChainRun {
  readonly outcome: ChainOutcome;
  /**
   * true when no header was ever repeated and every value stayed ASCII: then the behaviours of the
   * supported Envoys cannot differ (they differ only in how RE2 reads bytes above 0x7f and how RBAC
   * rules see a repeated header), so one version's verdict is every version's.
   */
  readonly versionNeutral: boolean;
  readonly headers: Headers;
  /** Dynamic metadata by namespace and key. */
  readonly metadata: ReadonlyMap<string, ReadonlyMap<string, string>>;
}

const TYPE = {
  headerMutation: 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
  headerToMetadata: 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config',
  rbac: 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC',
  headerInput: 'type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput',
  metadataInput: 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.DynamicMetadataInput',
  metadataMatcher: 'type.googleapis.com/envoy.extensions.matching.input_matchers.metadata.v3.Metadata',
  ipMatcher: 'type.googleapis.com/xds.type.matcher.v3.IPMatcher',
  rbacAction: 'type.googleapis.com/envoy.config.rbac.v3.Action',
  lua: 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
  setFilterState: 'type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config',
} as const;

/** header_to_metadata's MAX_HEADER_VALUE_LEN. */
const MAX_METADATA_VALUE_BYTES = 8 * 1024;

/** Every code unit below 0x80 (a byte string that is ASCII). */
function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 0x80) return false;
  return true;
}

class RequestState {
  headers: [string, string][];
  readonly metadata = new Map<string, Map<string, string>>();
  /** See ChainRun.versionNeutral: cleared by a repeated header or a byte above 0x7f, in the request or added later. */
  versionNeutral: boolean;
  // Every bucket reads the same few headers: joined once until a header changes.
  private readonly joinedCache = new Map<string, string | undefined>();
  constructor(
    headers: Headers,
    readonly remote: Address,
    readonly direct: Address,
  ) {
    // The codec: names case-insensitive (stored lower-case), optional whitespace around values dropped.
    this.headers = headers.map(([n, v]) => [n.toLowerCase(), v.replace(/^[ \t]+|[ \t]+$/g, '')]);
    this.versionNeutral = new Set(this.headers.map(([n]) => n)).size === this.headers.length && this.headers.every(([, v]) => isAscii(v));
  }

  values(name: string): string[] {
    const key = name.toLowerCase();
    return this.headers.filter(([n]) => n === key).map(([, v]) => v);
  }

  joined(name: string): string | undefined {
    const key = name.toLowerCase();
    if (this.joinedCache.has(key)) return this.joinedCache.get(key);
    const values = this.values(key);
    const joined = values.length === 0 ? undefined : values.join(',');
    this.joinedCache.set(key, joined);
    return joined;
  }

  remove(name: string): void {
    const key = name.toLowerCase();
    this.headers = this.headers.filter(([n]) => n !== key);
    this.joinedCache.delete(key);
  }

  add(name: string, value: string): void {
    const key = name.toLowerCase();
    if (this.joined(key) !== undefined || !isAscii(value)) this.versionNeutral = false;
    this.headers.push([key, value]);
    this.joinedCache.delete(key);
  }

  metadataValue(namespace: string, key: string): string | undefined {
    return this.metadata.get(namespace)?.get(key);
  }

  flatMetadata(): Map<string, string> {
    const flat = new Map<string, string>();
    for (const [ns, entries] of this.metadata) for (const [k, v] of entries) flat.set(`${ns}/${k}`, v);
    return flat;
  }
}

const fail = (where: string, what: string): never => {
  throw new Error(`${where}: ${what} is outside the Envoy model`);
};

function str(where: string, value: unknown, what: string): string {
  return typeof value === 'string' ? value : fail(where, `${what} ${JSON.stringify(value)}`);
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? (value as unknown[]) : [];
}

// ---------------------------------------------------------------------------------------------
// Formatter (header values of header_mutation)

type Formatter = (state: RequestState) => string;

function compileFormatter(where: string, format: string): Formatter {
  const parts: Formatter[] = [];
  const token = /%([A-Z_]+)(?:\(([^)]*)\))?%|%%/g;
  let last = 0;
  for (const m of format.matchAll(token)) {
    const literal = format.slice(last, m.index);
    if (literal.includes('%')) fail(where, `the format ${JSON.stringify(format)}`);
    parts.push(() => literal);
    last = m.index + m[0].length;
    if (m[0] === '%%') {
      parts.push(() => '%');
      continue;
    }
    const [, command, argument] = m;
    if (command === 'DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT' && argument === undefined) parts.push((s) => envoyAddressText(s.remote));
    else if (command === 'DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT' && argument === undefined) parts.push((s) => envoyAddressText(s.direct));
    else if (command === 'DYNAMIC_METADATA' && argument !== undefined && /^[^:]+:[^:]+$/.test(argument)) {
      const [namespace, key] = argument.split(':') as [string, string];
      // Absent metadata formats as nothing (omit_empty_values), not "-".
      parts.push((s) => s.metadataValue(namespace, key) ?? '');
    } else fail(where, `the format command ${m[0]}`);
  }
  const rest = format.slice(last);
  if (rest.includes('%')) fail(where, `the format ${JSON.stringify(format)}`);
  parts.push(() => rest);
  return (state) => parts.map((p) => p(state)).join('');
}

// ---------------------------------------------------------------------------------------------
// xds matchers

type Verdict = { readonly action: string; readonly allow: boolean };
type Matcher = (state: RequestState) => Verdict | undefined;
type OnMatch = (state: RequestState) => Verdict | undefined;
type Input = (state: RequestState) => string | undefined;
type Predicate = (state: RequestState) => boolean;

class MatcherCompiler {
  constructor(
    private readonly where: string,
    private readonly behaviour: EnvoyBehaviour,
  ) {}

  private fail(what: string): never {
    return fail(this.where, what);
  }

  matcher(node: unknown): Matcher {
    if (!isRecord(node)) return this.fail(`a matcher ${JSON.stringify(node)}`);
    const onNoMatch = node['on_no_match'] === undefined ? undefined : this.onMatch(node['on_no_match']);
    const noMatch = (state: RequestState): Verdict | undefined => onNoMatch?.(state);
    if (isRecord(node['matcher_list'])) {
      const entries = list(node['matcher_list']['matchers']).map((entry) => {
        if (!isRecord(entry)) return this.fail(`a field matcher ${JSON.stringify(entry)}`);
        return { predicate: this.predicate(entry['predicate']), onMatch: this.onMatch(entry['on_match']) };
      });
      return (state) => {
        for (const { predicate, onMatch } of entries) {
          if (!predicate(state)) continue;
          const verdict = onMatch(state);
          if (verdict !== undefined) return verdict;
        }
        return noMatch(state);
      };
    }
    if (isRecord(node['matcher_tree'])) {
      const tree = node['matcher_tree'];
      const input = this.input(tree['input'], 'string');
      if (isRecord(tree['exact_match_map'])) {
        const map = tree['exact_match_map']['map'];
        if (!isRecord(map)) return this.fail('an exact_match_map without map');
        const children = new Map(Object.entries(map).map(([key, onMatch]) => [key, this.onMatch(onMatch)]));
        return (state) => {
          const value = input(state);
          const child = value === undefined ? undefined : children.get(value);
          return child?.(state) ?? noMatch(state);
        };
      }
      if (isRecord(tree['custom_match'])) return this.ipMatcher(tree['custom_match'], input, noMatch);
      return this.fail(`a matcher_tree ${JSON.stringify(Object.keys(tree))}`);
    }
    if (Object.keys(node).every((k) => k === 'on_no_match')) return noMatch;
    return this.fail(`a matcher ${JSON.stringify(Object.keys(node))}`);
  }

  private ipMatcher(custom: JsonRecord, input: Input, noMatch: Matcher): Matcher {
    const config = custom['typed_config'];
    if (!isRecord(config) || config['@type'] !== TYPE.ipMatcher) return this.fail(`the custom matcher ${JSON.stringify(config)}`);
    const candidates = list(config['range_matchers']).flatMap((rangeMatcher, index) => {
      if (!isRecord(rangeMatcher)) return this.fail(`a range matcher ${JSON.stringify(rangeMatcher)}`);
      const onMatch = this.onMatch(rangeMatcher['on_match']);
      const exclusive = rangeMatcher['exclusive'] === true;
      return list(rangeMatcher['ranges']).map((range) => {
        if (!isRecord(range) || typeof range['address_prefix'] !== 'string') return this.fail(`a range ${JSON.stringify(range)}`);
        const prefixLen = range['prefix_len'] ?? 0;
        const base = parseInetAddress(range['address_prefix']);
        const bits = base?.family === 6 ? 128 : 32;
        if (base === undefined || typeof prefixLen !== 'number' || !Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > bits) return this.fail(`the range ${JSON.stringify(range)}`);
        const shift = BigInt(bits - prefixLen);
        return { family: base.family, prefix: base.value >> shift, shift, prefixLen, index, exclusive, onMatch };
      });
    });
    return (state) => {
      const text = input(state);
      const address = text === undefined ? undefined : parseInetAddress(text);
      if (address === undefined) return noMatch(state);
      const containing = candidates
        // Never across families: an IPv4-mapped IPv6 address is matched by IPv6 ranges only.
        .filter((c) => c.family === address.family && address.value >> c.shift === c.prefix)
        .sort((a, b) => b.prefixLen - a.prefixLen || a.index - b.index);
      let first = true;
      for (const candidate of containing) {
        if (!first && candidate.exclusive) continue;
        const verdict = candidate.onMatch(state);
        if (verdict !== undefined) return verdict;
        first = false;
      }
      return noMatch(state);
    };
  }

  onMatch(node: unknown): OnMatch {
    if (!isRecord(node)) return this.fail(`an on_match ${JSON.stringify(node)}`);
    if (node['keep_matching'] === true) return this.fail('keep_matching');
    if (isRecord(node['matcher'])) return this.matcher(node['matcher']);
    const action = node['action'];
    if (!isRecord(action) || !isRecord(action['typed_config']) || action['typed_config']['@type'] !== TYPE.rbacAction) return this.fail(`the action ${JSON.stringify(action)}`);
    const config = action['typed_config'];
    const verdict = config['action'] ?? 'ALLOW';
    if (verdict !== 'ALLOW' && verdict !== 'DENY') return this.fail(`the RBAC action ${JSON.stringify(verdict)}`);
    const result: Verdict = { action: str(this.where, config['name'], 'action name'), allow: verdict === 'ALLOW' };
    return () => result;
  }

  private predicate(node: unknown): Predicate {
    if (!isRecord(node)) return this.fail(`a predicate ${JSON.stringify(node)}`);
    if (isRecord(node['single_predicate'])) {
      const single = node['single_predicate'];
      if (single['value_match'] !== undefined) {
        const input = this.input(single['input'], 'string');
        const matches = this.stringMatcher(single['value_match']);
        // No data never matches.
        return (state) => {
          const value = input(state);
          return value !== undefined && matches(value);
        };
      }
      const custom = single['custom_match'];
      if (!isRecord(custom) || !isRecord(custom['typed_config']) || custom['typed_config']['@type'] !== TYPE.metadataMatcher) return this.fail(`the predicate ${JSON.stringify(single)}`);
      const config = custom['typed_config'];
      const input = this.input(single['input'], 'metadata');
      const value = config['value'];
      if (!isRecord(value) || value['present_match'] !== true || Object.keys(value).length !== 1) return this.fail(`the metadata value matcher ${JSON.stringify(value)}`);
      const invert = config['invert'] === true;
      // present_match: a primitive value at the path (header_to_metadata writes strings).
      return (state) => (input(state) !== undefined) !== invert;
    }
    if (isRecord(node['and_matcher'])) {
      const items = list(node['and_matcher']['predicate']).map((p) => this.predicate(p));
      return (state) => items.every((p) => p(state));
    }
    if (isRecord(node['or_matcher'])) {
      const items = list(node['or_matcher']['predicate']).map((p) => this.predicate(p));
      return (state) => items.some((p) => p(state));
    }
    if (node['not_matcher'] !== undefined) {
      const inner = this.predicate(node['not_matcher']);
      return (state) => !inner(state);
    }
    return this.fail(`a predicate ${JSON.stringify(Object.keys(node))}`);
  }

  /** A StringMatcher, as RBAC rules match strings (rbac-evaluator.ts), with its regex compiled once. */
  private stringMatcher(node: unknown): (value: string) => boolean {
    if (!isRecord(node)) return this.fail(`a value_match ${JSON.stringify(node)}`);
    const safeRegex = node['safe_regex'];
    if (isRecord(safeRegex)) {
      const regex = re2(str(this.where, safeRegex['regex'], 'regex'), this.behaviour.regexEncoding);
      return (value) => regex.fullMatch(value);
    }
    return (value) => matchString(node as never, value, this.behaviour.regexEncoding);
  }

  private input(node: unknown, kind: 'string' | 'metadata'): Input {
    const config = isRecord(node) ? node['typed_config'] : undefined;
    if (!isRecord(config)) return this.fail(`an input ${JSON.stringify(node)}`);
    if (config['@type'] === TYPE.headerInput && kind === 'string') {
      const name = str(this.where, config['header_name'], 'header_name');
      return (state) => state.joined(name);
    }
    if (config['@type'] === TYPE.metadataInput && kind === 'metadata') {
      const filter = str(this.where, config['filter'], 'metadata filter');
      const path = list(config['path']);
      if (path.length !== 1 || !isRecord(path[0])) return this.fail(`the metadata path ${JSON.stringify(path)}`);
      const key = str(this.where, path[0]['key'], 'metadata key');
      return (state) => state.metadataValue(filter, key);
    }
    return this.fail(`the ${kind} input ${JSON.stringify(config)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP filters

/** A filter's decision; the chain adds which filter it was. */
type FilterVerdict = { readonly kind: 'passed' } | { readonly kind: 'refused' | 'error'; readonly why: string };
type FilterRun = (state: RequestState) => FilterVerdict;
const PASSED = { kind: 'passed' } as const;

function headerMutation(where: string, config: JsonRecord): FilterRun {
  const mutations = isRecord(config['mutations']) ? list(config['mutations']['request_mutations']) : [];
  const steps = mutations.map((mutation): ((state: RequestState) => void) => {
    if (!isRecord(mutation)) return fail(where, `the mutation ${JSON.stringify(mutation)}`);
    if (mutation['remove'] !== undefined) {
      const name = str(where, mutation['remove'], 'remove');
      return (state) => state.remove(name);
    }
    const append = mutation['append'];
    if (!isRecord(append) || !isRecord(append['header'])) return fail(where, `the mutation ${JSON.stringify(mutation)}`);
    const name = str(where, append['header']['key'], 'header key').toLowerCase();
    const format = compileFormatter(where, str(where, append['header']['value'] ?? '', 'header value'));
    const action = append['append_action'] ?? 'APPEND_IF_EXISTS_OR_ADD';
    const keepEmpty = append['keep_empty_value'] === true;
    if (append['append'] !== undefined) return fail(where, 'the deprecated `append` flag');
    if (!['APPEND_IF_EXISTS_OR_ADD', 'ADD_IF_ABSENT', 'OVERWRITE_IF_EXISTS', 'OVERWRITE_IF_EXISTS_OR_ADD'].includes(String(action))) return fail(where, `append_action ${String(action)}`);
    return (state) => {
      const value = format(state);
      if (value === '' && !keepEmpty) return;
      const present = state.joined(name) !== undefined;
      if (action === 'ADD_IF_ABSENT' && present) return;
      if (action === 'OVERWRITE_IF_EXISTS' && !present) return;
      if (action === 'OVERWRITE_IF_EXISTS' || action === 'OVERWRITE_IF_EXISTS_OR_ADD') state.remove(name);
      state.add(name, value);
    };
  });
  return (state) => {
    for (const step of steps) step(state);
    return PASSED;
  };
}

function headerToMetadata(where: string, config: JsonRecord, behaviour: EnvoyBehaviour): FilterRun {
  const rules = list(config['request_rules']).map((rule) => {
    if (!isRecord(rule) || typeof rule['header'] !== 'string' || rule['cookie'] !== undefined) return fail(where, `the rule ${JSON.stringify(rule)}`);
    if (rule['on_header_missing'] !== undefined) return fail(where, 'on_header_missing');
    const present = rule['on_header_present'];
    if (!isRecord(present)) return fail(where, `the rule ${JSON.stringify(rule)}`);
    if ((present['type'] ?? 'STRING') !== 'STRING' || (present['encode'] ?? 'NONE') !== 'NONE') return fail(where, `the value type ${JSON.stringify(present)}`);
    const namespace = str(where, present['metadata_namespace'], 'metadata_namespace');
    const key = str(where, present['key'], 'key');
    const fixed = typeof present['value'] === 'string' && present['value'] !== '' ? present['value'] : undefined;
    const rewrite = present['regex_value_rewrite'];
    const rewriter = isRecord(rewrite) && isRecord(rewrite['pattern'])
      ? { regex: re2(str(where, rewrite['pattern']['regex'], 'rewrite regex'), behaviour.regexEncoding), substitution: str(where, rewrite['substitution'] ?? '', 'substitution') }
      : undefined;
    return { header: rule['header'], namespace, key, fixed, rewriter, remove: rule['remove'] === true };
  });
  return (state) => {
    for (const rule of rules) {
      const value = state.joined(rule.header);
      if (value === undefined) continue;
      if (rule.remove) state.remove(rule.header);
      const stored = rule.fixed ?? (rule.rewriter ? rule.rewriter.regex.globalReplace(value, rule.rewriter.substitution) : value);
      if (stored === '' || stored.length >= MAX_METADATA_VALUE_BYTES) continue;
      const entries = state.metadata.get(rule.namespace) ?? new Map<string, string>();
      entries.set(rule.key, stored);
      state.metadata.set(rule.namespace, entries);
    }
    return PASSED;
  };
}

function rbacFilter(where: string, config: JsonRecord, behaviour: EnvoyBehaviour): FilterRun {
  if (config['matcher'] !== undefined) {
    const matcher = new MatcherCompiler(where, behaviour).matcher(config['matcher']);
    return (state) => {
      const verdict = matcher(state);
      if (verdict === undefined) return { kind: 'refused', why: 'no matcher action (RBAC refuses)' };
      return verdict.allow ? PASSED : { kind: 'refused', why: `matcher action ${verdict.action}` };
    };
  }
  const rules = config['rules'];
  if (rules === undefined) return () => PASSED;
  if (!isRecord(rules) || (rules['action'] !== 'ALLOW' && rules['action'] !== 'DENY') || !isRecord(rules['policies'] ?? {})) return fail(where, `the rules ${JSON.stringify(rules)}`);
  const typed = { action: rules['action'], policies: rules['policies'] ?? {} } as unknown as RbacRules;
  return (state) => {
    const admitted = evalRbac(typed, {
      remote: state.remote,
      direct: state.direct,
      headers: state.headers,
      repeatedHeaders: behaviour.rbacRepeatedHeaders,
      metadata: state.flatMetadata(),
      regexEncoding: behaviour.regexEncoding,
    });
    return admitted ? PASSED : { kind: 'refused', why: 'RBAC rules' };
  };
}

// A bucket is named once per protected header, on every port and gateway: compile each stored config once per Envoy.
const compiled = new WeakMap<object, Map<EnvoyBehaviour, FilterRun>>();

/** The VPN servers of a shoot as a CONNECT names them (the hop entry's reading, docs/operators/revocation.md). */
const VPN_DESTINATION = /^outbound\|1194\|\|vpn-seed-server(?:-[0-4])?\.[a-z0-9-]+\.svc\.cluster\.local$/;

/**
 * The tunnel hop's entry (the only Lua we write; anything else is not modelled): among the
 * headers it lists, the first value of each that names a VPN server; two different ones are
 * refused (403). Otherwise it sends the tunnel through the hop to the same server, which changes
 * nothing the oracle decides.
 */
function tunnelHopEntry(where: string, config: JsonRecord): FilterRun {
  const source = isRecord(config['default_source_code']) ? config['default_source_code']['inline_string'] : undefined;
  if (typeof source !== 'string' || !source.startsWith('-- gardener-acl shared tunnel hop entry')) return fail(where, 'a Lua filter other than the tunnel hop entry');
  const listed = /^local HEADERS = \{ (.*) \}$/m.exec(source)?.[1];
  if (listed === undefined) return fail(where, 'the tunnel hop entry without its HEADERS');
  const headers = listed.split(', ').map((h) => JSON.parse(h) as unknown).filter((h): h is string => typeof h === 'string');
  return (state) => {
    const destinations = new Set(headers.flatMap((h) => state.values(h).slice(0, 1)).filter((v) => VPN_DESTINATION.test(v)));
    return destinations.size > 1 ? { kind: 'refused', why: `${where}: the request names two VPN destinations` } : PASSED;
  };
}

function typedFilter(where: string, config: unknown, behaviour: EnvoyBehaviour): FilterRun {
  if (!isRecord(config)) return fail(where, `the filter config ${JSON.stringify(config)}`);
  const known = compiled.get(config)?.get(behaviour);
  if (known !== undefined) return known;
  const run = compileTypedFilter(where, config, behaviour);
  compiled.set(config, (compiled.get(config) ?? new Map<EnvoyBehaviour, FilterRun>()).set(behaviour, run));
  return run;
}

function compileTypedFilter(where: string, config: JsonRecord, behaviour: EnvoyBehaviour): FilterRun {
  switch (config['@type']) {
    case TYPE.headerMutation:
      return headerMutation(where, config);
    case TYPE.headerToMetadata:
      return headerToMetadata(where, config, behaviour);
    case TYPE.rbac:
      return rbacFilter(where, config, behaviour);
    case TYPE.lua:
      return tunnelHopEntry(where, config);
    case TYPE.setFilterState:
      // Filter state for the upstream connection (the tunnel hop's chain and destination): no verdict.
      return () => PASSED;
    default:
      return fail(where, `the filter type ${JSON.stringify(config['@type'])}`);
  }
}

export interface ChainWhere {
  readonly namespace: string;
  readonly port: number;
  readonly gatewayLabels?: Readonly<Record<string, string>>;
}

/** What our objects put in front of one gateway's CONNECT listener on one port, as one Envoy runs it. */
export class EnvoyConnectChain {
  /** Names of the filters in running order (discovered filters as `<name> (ECDS)`). */
  readonly filterNames: readonly string[];
  private readonly runs: readonly { readonly where: string; readonly run: FilterRun }[];

  constructor(objects: readonly unknown[], where: ChainWhere, readonly behaviour: EnvoyBehaviour) {
    const placement = connectChainPlacement(objects, where);
    const names: string[] = [];
    this.runs = placement.filters.map((filter: PlacedHttpFilter) => {
      const name = str(filter.origin, filter.value['name'], 'filter name');
      const where = `${filter.origin} ${name}`;
      if (filter.value['config_discovery'] === undefined) {
        names.push(name);
        return { where, run: typedFilter(where, filter.value['typed_config'], behaviour) };
      }
      names.push(`${name} (ECDS)`);
      const discovery = filter.value['config_discovery'];
      if (!isRecord(discovery)) return fail(where, 'config_discovery');
      const typeUrls = list(discovery['type_urls']);
      const definitions = (placement.extensionConfigs.get(name) ?? []).filter((d) => isRecord(d.value['typed_config']) && typeUrls.includes(d.value['typed_config']['@type']));
      const distinct = new Set(definitions.map((d) => d.value['typed_config']));
      if (distinct.size > 1 && new Set([...distinct].map((c) => JSON.stringify(c))).size > 1) return fail(where, `different ECDS resources named ${name} (${definitions.map((d) => d.origin).join(', ')})`);
      const [definition] = definitions;
      if (definition !== undefined) return { where: `${where} (ECDS ${definition.origin})`, run: typedFilter(where, definition.value['typed_config'], behaviour) };
      // Never delivered: after initial_fetch_timeout the default config decides, else Envoy answers 500.
      if (discovery['default_config'] !== undefined) return { where: `${where} (default config)`, run: typedFilter(where, discovery['default_config'], behaviour) };
      const missing: FilterVerdict = { kind: 'error', why: `ECDS resource ${name} missing and no default config (500)` };
      return { where, run: () => missing };
    });
    this.filterNames = names;
  }

  run(request: ConnectRequest): ChainRun {
    const state = new RequestState(request.headers, request.remote, request.direct);
    let outcome: ChainOutcome = PASSED;
    for (const { where, run } of this.runs) {
      const verdict = run(state);
      if (verdict.kind !== 'passed') {
        outcome = { kind: verdict.kind, filter: where, why: verdict.why };
        break;
      }
    }
    return { outcome, versionNeutral: state.versionNeutral, headers: state.headers, metadata: state.metadata };
  }

  decide(request: ConnectRequest): ChainOutcome {
    return this.run(request).outcome;
  }

  /** true: the request passes every filter of ours (the route decides the rest). */
  admits(request: ConnectRequest): boolean {
    return this.decide(request).kind === 'passed';
  }
}
