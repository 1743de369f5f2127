// The adversarial connection matrix shared by the real-Envoy conformance suites (the hand-built
// gateway in test/envoy and the Istio-rendered one in test/istio): the shoots whose names collide
// on purpose, the clients (PROXY-protocol claims, loopback peers, both IP families) and the
// HTTP-CONNECT header sets. Every expected verdict comes from the oracle (docs/design.md section 3), so a
// suite that uses other shoots or always-allowed ranges only needs other OracleShoots.

import { encodeProxyV2Header, httpConnect, type ConnectResult } from '../envoy/clients.js';
import type { BoundAddress } from '../envoy/envoy-process.js';
import { admits, connectAdmitted, routedTarget, type OracleClient, type OracleShoot, type TargetReading } from '../oracle/acl-semantics.js';
import { addr } from '../oracle/addresses.js';
import { kapi, socket, vpn, type Headers } from './decide.js';

export interface MatrixRule {
  readonly action: string;
  readonly type: string;
  readonly cidrs: readonly string[];
}

export interface MatrixShoot {
  readonly id: string;
  /** Omitted: the shoot has no ACL. */
  readonly rule?: MatrixRule;
}

/**
 * Prefix-colliding names, a project-suffix pair, a legacy ID whose socket value is a substring of
 * another shoot's, ALLOW and DENY, IPv4 and IPv6, a direct-peer rule, shoots without ACL. The
 * client labels below refer to these rules.
 */
export const MATRIX_SHOOTS: readonly MatrixShoot[] = [
  { id: 'shoot--p--foo', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } },
  { id: 'shoot--p--foo-bar' },
  { id: 'shoot--bar--a', rule: { action: 'deny', type: 'remote_ip', cidrs: ['198.51.100.0/24', '2001:db8:b::/48'] } },
  { id: 'shoot--x-bar--a' },
  { id: 'shoot-q--foo', rule: { action: 'ALLOW', type: 'direct_remote_ip', cidrs: ['127.0.0.8/29', '::1/128'] } },
  { id: 'shoot--xshoot-q--foo', rule: { action: 'ALLOW', type: 'source_ip', cidrs: ['192.0.2.0/24'] } },
];

/** The shoot whose VPN header values carry an HA server index. */
export const HA_SHOOT = 'shoot--p--foo';

export interface Client {
  readonly label: string;
  /** The client address the PROXY v2 header claims; undefined: no header, the loopback peer is the client. */
  readonly proxySource?: string;
  readonly proxyFamily?: 'TCP4' | 'TCP6';
  readonly localAddress?: string;
  readonly listenerFamily: 4 | 6;
}

export const CLIENTS: readonly Client[] = [
  { label: 'shoot foo range, IPv4', proxySource: '203.0.113.9', listenerFamily: 4 },
  { label: 'shoot foo range, IPv4-mapped', proxySource: '203.0.113.9', proxyFamily: 'TCP6', listenerFamily: 4 },
  { label: 'shoot foo range, IPv6', proxySource: '2001:db8:a::5', listenerFamily: 4 },
  { label: 'outsider IPv4', proxySource: '100.64.1.1', listenerFamily: 4 },
  { label: 'outsider IPv4-mapped', proxySource: '100.64.1.1', proxyFamily: 'TCP6', listenerFamily: 4 },
  { label: 'outsider IPv6', proxySource: '2001:db8:ffff::1', listenerFamily: 4 },
  { label: 'seed node (always allowed)', proxySource: '10.250.1.1', listenerFamily: 4 },
  { label: 'seed node, IPv4-mapped', proxySource: '10.250.1.1', proxyFamily: 'TCP6', listenerFamily: 4 },
  { label: 'denied by bar--a, IPv4', proxySource: '198.51.100.7', listenerFamily: 4 },
  { label: 'denied by bar--a, IPv4-mapped', proxySource: '198.51.100.7', proxyFamily: 'TCP6', listenerFamily: 4 },
  { label: 'xshoot range via source_ip', proxySource: '192.0.2.77', listenerFamily: 4 },
  { label: 'loopback peer 127.0.0.9, no PROXY', localAddress: '127.0.0.9', listenerFamily: 4 },
  { label: 'outsider via PROXY from peer 127.0.0.9', proxySource: '100.64.1.1', localAddress: '127.0.0.9', listenerFamily: 4 },
  { label: 'loopback peer 127.0.0.20, no PROXY', localAddress: '127.0.0.20', listenerFamily: 4 },
  { label: 'IPv6 loopback peer ::1, no PROXY', listenerFamily: 6 },
];

/** An outsider of every ALLOW rule, for spot checks. */
export const OUTSIDER: Client = { label: 'outsider', proxySource: '100.64.1.1', listenerFamily: 4 };

/**
 * Headers a client may send to stand in for what the matcher forms' extraction sets: a target ID
 * of a shoot without ACL, or the address of a seed node (admitted by every shoot). Sent by an
 * outsider, none of them may change a decision.
 */
export const SPOOFED_EXTRACTION_HEADERS: readonly (readonly [string, string])[] = [
  ['x-gardener-acl-target-x-gardener-destination', '=shoot--p--foo-bar'],
  ['x-gardener-acl-target', '=shoot--p--foo-bar'],
  ['x-gardener-acl-remote-address', '10.250.1.1'],
  ['x-gardener-acl-direct-address', '10.250.1.1'],
];

/** What the oracle sees of a client: Envoy's remote address (PROXY source if any) and the physical peer. */
export function oracleClient(c: Client): OracleClient {
  const peer = c.localAddress ?? (c.listenerFamily === 6 ? '::1' : '127.0.0.1');
  const claimed = c.proxySource === undefined ? peer : c.proxyFamily === 'TCP6' && !c.proxySource.includes(':') ? `::ffff:${c.proxySource}` : c.proxySource;
  return { remote: addr(claimed), direct: addr(peer) };
}

/** The client's PROXY v2 header (undefined for clients that send none). */
export function proxyHeader(c: Client, destination = { address: c.proxySource?.includes(':') ? '2001:db8::1' : '192.0.2.1', port: 443 }): Buffer | undefined {
  if (c.proxySource === undefined) return undefined;
  return encodeProxyV2Header({ source: { address: c.proxySource, port: 40_000 }, destination, family: c.proxyFamily });
}

/**
 * Header sets: each form alone on each header, case variants, pairs, repeats, comma-joined values.
 * `haVpnIndex` is the server index used in the HA shoot's VPN value (the seed may run fewer servers).
 */
export function headerSets(haVpnIndex = 3): Headers[] {
  const sets: Headers[] = [];
  for (const { id } of MATRIX_SHOOTS) {
    const forms = [kapi(id), socket(id), id === HA_SHOOT ? vpn(id, haVpnIndex) : vpn(id)];
    for (const form of forms) for (const name of ['X-Gardener-Destination', 'Reversed-VPN']) sets.push([[name, form]]);
    sets.push([['x-GARDENER-destination', kapi(id)]], [['REVERSED-VPN', socket(id)]], [['X-Gardener-Destination', socket(id).toUpperCase()]]);
  }
  const pairs: [string, string][] = [
    ['shoot--p--foo', 'shoot--bar--a'],
    ['shoot--bar--a', 'shoot--p--foo'],
    ['shoot--p--foo-bar', 'shoot--p--foo'],
    ['shoot--p--foo', 'shoot--p--foo-bar'],
    ['shoot--xshoot-q--foo', 'shoot-q--foo'],
    ['shoot-q--foo', 'shoot--x-bar--a'],
  ];
  for (const [a, b] of pairs) {
    sets.push(
      [['Reversed-VPN', kapi(a)], ['X-Gardener-Destination', kapi(b)]],
      [['X-Gardener-Destination', socket(a)], ['Reversed-VPN', socket(b)]],
      [['X-Gardener-Destination', kapi(a)], ['X-Gardener-Destination', socket(b)]],
      [['Reversed-VPN', `${kapi(a)},${socket(b)}`]],
    );
  }
  sets.push([['X-Other', kapi('shoot--p--foo')]], [['X-Gardener-Destination', 'outbound|443||kube-apiserver.garden.svc.cluster.local']]);
  // Bytes that are not UTF-8 after a routable value (sent as such: the client writes latin1):
  // Envoy 1.37's regex `.` stops there, so the matcher form's extraction must not.
  sets.push(
    [['Reversed-VPN', kapi('shoot--p--foo')], ['Reversed-VPN', '\xff']],
    [['X-Gardener-Destination', socket('shoot--bar--a')], ['X-Gardener-Destination', '\xff\xfe']],
    [['X-Gardener-Destination', `${vpn('shoot-q--foo')}\xff`]],
  );
  return sets;
}

/** Runs `tasks` with bounded concurrency (the machine has two cores; Envoy needs one). */
export async function runAll<T>(tasks: readonly (() => Promise<T>)[], concurrency = 8): Promise<T[]> {
  const results: T[] = new Array<T>(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await (tasks[i] as () => Promise<T>)();
      }
    }),
  );
  return results;
}

/** The cluster Gardener's CONNECT route sends the request to: the first value of its header, if the regex admits it. */
export function routedCluster(headers: Headers, routeHeader: string, regex: RegExp, repeated: RepeatedHeaderMatching = 'first-value'): string | undefined {
  const values = headers.filter(([name]) => name.toLowerCase() === routeHeader.toLowerCase()).map(([, value]) => value);
  const first = values[0];
  if (first === undefined) return undefined;
  // Envoy 1.37's route header matcher sees a repeated header as its values joined with ",".
  const matched = repeated === 'joined' ? values.join(',') : first;
  return regex.test(matched) ? first : undefined;
}

/** How the route's header regex sees a repeated header: the first value (Envoy 1.40) or all values joined (1.37). */
export type RepeatedHeaderMatching = 'first-value' | 'joined';

export interface ConnectExpectation {
  readonly oracle: readonly OracleShoot[];
  readonly protectedHeaders: readonly string[];
  /** The header the port's CONNECT route takes the cluster from, and the regex the route requires. */
  readonly routeHeader: string;
  readonly routeRegex: RegExp;
  readonly routeRepeatedHeaders?: RepeatedHeaderMatching;
  /** Clusters the gateway has; a routed request to one of them must tunnel there when admitted. */
  readonly clusters: ReadonlySet<string>;
  /** Which requests target a shoot: the rules form checks every mention, the matcher form routable first values. */
  readonly reading?: TargetReading;
}

/** The CONNECT requests of the matrix: every header set from every client. */
export function connectCases(haVpnIndex?: number): { client: Client; headers: Headers }[] {
  const sets = headerSets(haVpnIndex);
  return CLIENTS.flatMap((client) => sets.map((headers) => ({ client, headers })));
}

/** Whether docs/design.md section 3 admits this CONNECT. */
export function connectExpected(client: Client, headers: Headers, e: Pick<ConnectExpectation, 'oracle' | 'protectedHeaders' | 'reading'>): boolean {
  return connectAdmitted(headers, oracleClient(client), e.protectedHeaders, e.oracle, e.reading);
}

/** What is wrong with a real CONNECT's outcome (undefined: it is what docs/design.md requires). */
export function connectMismatch(client: Client, headers: Headers, result: Pick<ConnectResult, 'status' | 'tunnel'>, e: ConnectExpectation): string | undefined {
  const expected = connectExpected(client, headers, e);
  const routed = routedCluster(headers, e.routeHeader, e.routeRegex, e.routeRepeatedHeaders);
  const problems: string[] = [];
  if (!expected && (result.status !== 403 || result.tunnel)) problems.push(`expected 403, got ${result.status}`);
  if (expected && result.status === 403) problems.push('denied but docs/design.md admits');
  if (expected && routed && e.clusters.has(routed) && (result.status !== 200 || result.tunnel?.cluster !== routed)) {
    problems.push(`expected a tunnel to ${routed}, got ${result.status} ${JSON.stringify(result.tunnel)}`);
  }
  if (result.tunnel) {
    const reached = e.oracle.find((s) => s.technicalID === result.tunnel?.shoot);
    if (!reached || !admits(reached, oracleClient(client))) problems.push(`reached ${result.tunnel.shoot}, which does not admit the client`);
  }
  return problems.length === 0 ? undefined : `${client.label} ${JSON.stringify(headers)}: ${problems.join('; ')}`;
}

/** Sends every case as a real CONNECT to the gateway's listener for `port`; what differs from docs/design.md, one line per case. */
export async function connectMismatches(
  gateway: { endpoint(logicalPort: number, family?: 4 | 6): Promise<BoundAddress> },
  port: number,
  cases: readonly { client: Client; headers: Headers }[],
  expectation: ConnectExpectation,
): Promise<string[]> {
  const results = await runAll(
    cases.map(({ client, headers }) => async () => {
      const target = await gateway.endpoint(port, client.listenerFamily);
      const result = await httpConnect({ ...target, headers, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
      return connectMismatch(client, headers, result, expectation);
    }),
  );
  return results.filter((m): m is string => m !== undefined);
}

/**
 * What the matcher forms' fallback `rules` decide once `matcher` is gone (a lenient decoder, a
 * missing ECDS bucket's default): every shoot a protected header names routably, with or without
 * an ACL, refuses every client; a request naming none (or another namespace) passes. An oracle of
 * every such shoot.
 */
export function everyNamedShootRefuses(cases: readonly { readonly headers: Headers }[], protectedHeaders: readonly string[]): OracleShoot[] {
  const ids = new Set<string>();
  for (const { headers } of cases) {
    for (const name of protectedHeaders) {
      const values = headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v.trim());
      const id = values.length > 0 ? routedTarget(values.join(',')) : undefined;
      // The fallback refuses shoots' namespaces (technical IDs start with `shoot-`), not other namespaces such as garden.
      if (id?.startsWith('shoot-')) ids.add(id);
    }
  }
  // An ALLOW rule of one reserved address admits none of the matrix's clients.
  const nobody = { action: 'ALLOW', type: 'remote_ip', cidrs: [{ family: 4, address: 0xf0000001n, prefixLen: 32 }], mode: 'enforce' } as const;
  return [...ids].sort().map((technicalID) => ({ technicalID, rule: nobody, alwaysAllowed: [] }));
}
