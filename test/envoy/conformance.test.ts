// The data-plane conformance suite: a real Envoy, serving a Gardener-shaped gateway with the
// generated EnvoyFilters placed in it, decides a generated adversarial matrix of real
// connections; every decision must equal DESIGN section 3 (the oracle).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeCidrSet } from '../../src/acl/cidr.js';
import { legacyProxyPatch } from '../../src/rbac/legacy-proxy-patch.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { admits, connectAdmitted, type OracleClient, type OracleShoot } from '../oracle/acl-semantics.js';
import { addr } from '../oracle/addresses.js';
import { kapi, socket, vpn, type Headers } from '../support/decide.js';
import { testSeed, type TestShoot } from '../support/test-seed.js';
import jsonpatch from 'fast-json-patch';
import { encodeProxyV2Header, headerValue, httpConnect, probeTcp, probeTls, sendHttpRequest } from './clients.js';
import { gatewayUpstreams, hcmStatPrefix, type GardenerGatewaySpec } from './gardener-gateway.js';
import { DESTINATION_HEADER_REGEX, GARDENER_ERAS, gardenerLegacyProxyEnvoyFilter, type GardenerEra } from './gardener-shapes.js';
import type { JsonObject } from './json.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';

const DOMAIN = 'ingress.seed.example.test';
const host = (id: string): string => `api.${id}.example.test`;

// Prefix-colliding names, a project-suffix pair, a legacy ID whose socket value is a substring of
// another shoot's, ALLOW and DENY, IPv4 and IPv6, a direct-peer rule, shoots without ACL.
const SHOOTS: TestShoot[] = [
  { id: 'shoot--p--foo', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] }, always: ['10.250.0.0/16'], legacyProxyAllowed: ['100.96.0.0/11'] },
  { id: 'shoot--p--foo-bar' },
  { id: 'shoot--bar--a', rule: { action: 'deny', type: 'remote_ip', cidrs: ['198.51.100.0/24', '2001:db8:b::/48'] }, always: ['10.250.0.0/16'] },
  { id: 'shoot--x-bar--a' },
  { id: 'shoot-q--foo', rule: { action: 'ALLOW', type: 'direct_remote_ip', cidrs: ['127.0.0.8/29', '::1/128'] } },
  { id: 'shoot--xshoot-q--foo', rule: { action: 'ALLOW', type: 'source_ip', cidrs: ['192.0.2.0/24'] } },
].map((s) => ({ ...s, hosts: [host(s.id)] }));
const HA_SHOOT = 'shoot--p--foo';

const built = testSeed(SHOOTS, { observabilityDomain: DOMAIN });
const ORACLE: readonly OracleShoot[] = built.oracle;
const GENERATED = allEnvoyFilters(buildSeedEnvoyFilters(built.seed));

interface Client {
  readonly label: string;
  /** The client address the PROXY v2 header claims; undefined: no header, the loopback peer is the client. */
  readonly proxySource?: string;
  readonly proxyFamily?: 'TCP4' | 'TCP6';
  readonly localAddress?: string;
  readonly listenerFamily: 4 | 6;
}

const CLIENTS: readonly Client[] = [
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

function oracleClient(c: Client): OracleClient {
  const peer = c.localAddress ?? (c.listenerFamily === 6 ? '::1' : '127.0.0.1');
  const claimed = c.proxySource === undefined ? peer : c.proxyFamily === 'TCP6' && !c.proxySource.includes(':') ? `::ffff:${c.proxySource}` : c.proxySource;
  return { remote: addr(claimed), direct: addr(peer) };
}

function proxyHeader(c: Client, destination = { address: c.proxySource?.includes(':') ? '2001:db8::1' : '192.0.2.1', port: 443 }): Buffer | undefined {
  if (c.proxySource === undefined) return undefined;
  return encodeProxyV2Header({ source: { address: c.proxySource, port: 40_000 }, destination, family: c.proxyFamily });
}

/** Header sets: each form alone on each header, case variants, pairs, repeats, comma-joined values. */
function headerSets(): Headers[] {
  const sets: Headers[] = [];
  for (const { id } of SHOOTS) {
    const forms = [kapi(id), socket(id), id === HA_SHOOT ? vpn(id, 3) : vpn(id)];
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
  return sets;
}

function gatewaySpec(era: GardenerEra): GardenerGatewaySpec {
  return {
    era,
    family: 'dual',
    observabilityWildcardDomain: DOMAIN,
    shoots: SHOOTS.map((s) => ({ technicalID: s.id, sniChains: [[host(s.id)]], ...(s.id === HA_SHOOT ? { haVpnServers: 5 } : {}) })),
  };
}

/** Runs `tasks` with bounded concurrency (the machine has two cores; Envoy needs one). */
async function runAll<T>(tasks: readonly (() => Promise<T>)[], concurrency = 8): Promise<T[]> {
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

function routedCluster(headers: Headers, routeHeader: string, regex: RegExp): string | undefined {
  const first = headers.find(([name]) => name.toLowerCase() === routeHeader.toLowerCase())?.[1];
  return first !== undefined && regex.test(first) ? first : undefined;
}

describe.each(['v1.130-v1.138', 'v1.139-v1.147'] as const)('conformance on a Gardener %s gateway (real Envoy)', (era) => {
  let gateway: LiveGateway;
  const clusters = new Set(gatewayUpstreams(gatewaySpec(era)).map((u) => u.cluster));

  beforeAll(async () => {
    gateway = await startLiveGateway({ ...gatewaySpec(era), envoyFilters: GENERATED });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('places every generated patch somewhere (no silent no-op)', () => {
    const unapplied = gateway.placement.patches.filter((p) => p.applications === 0).map((p) => `${p.envoyFilter}#${p.patchIndex}`);
    expect(unapplied).toEqual([]);
  });

  it.each(GARDENER_ERAS[era].connectPorts.map((p) => [p.logicalPort, p.header] as const))(
    'HTTP CONNECT on %i: every header set from every client is decided as DESIGN says',
    async (port, routeHeader) => {
      const regex = new RegExp(era === 'v1.139-v1.147' ? DESTINATION_HEADER_REGEX.v1_139 : DESTINATION_HEADER_REGEX.v1_114);
      const deniedStat = `http.${hcmStatPrefix(port)}.rbac.denied`;
      const deniedBefore = await gateway.envoy.stat(deniedStat);
      const cases = CLIENTS.flatMap((client) => headerSets().map((headers) => ({ client, headers })));
      const mismatches = await runAll(
        cases.map(({ client, headers }) => async () => {
          const target = await gateway.endpoint(port, client.listenerFamily);
          const expected = connectAdmitted(headers, oracleClient(client), built.seed.operator.protectedHeaders, ORACLE);
          const result = await httpConnect({ ...target, headers, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
          const routed = routedCluster(headers, routeHeader, regex);
          const problems: string[] = [];
          if (!expected && (result.status !== 403 || result.tunnel)) problems.push(`expected 403, got ${result.status}`);
          if (expected && result.status === 403) problems.push('denied but DESIGN admits');
          if (expected && routed && clusters.has(routed) && (result.status !== 200 || result.tunnel?.cluster !== routed)) {
            problems.push(`expected a tunnel to ${routed}, got ${result.status} ${JSON.stringify(result.tunnel)}`);
          }
          if (result.tunnel) {
            const reached = ORACLE.find((s) => s.technicalID === result.tunnel?.shoot);
            if (!reached || !admits(reached, oracleClient(client))) problems.push(`reached ${result.tunnel.shoot}, which does not admit the client`);
          }
          return problems.length === 0 ? undefined : `${client.label} ${JSON.stringify(headers)}: ${problems.join('; ')}`;
        }),
      );
      expect(cases.length).toBeGreaterThan(500);
      expect(mismatches.filter(Boolean)).toEqual([]);
      const expectedDenials = cases.filter(({ client, headers }) => !connectAdmitted(headers, oracleClient(client), built.seed.operator.protectedHeaders, ORACLE)).length;
      expect(expectedDenials).toBeGreaterThan(50);
      expect(await gateway.envoy.stat(deniedStat)).toBe(deniedBefore + expectedDenials);
    },
  );

  it('non-CONNECT requests and unmatched CONNECTs keep Gardener’s redirect', async () => {
    const target = await gateway.endpoint(8443, 4);
    const outsider = proxyHeader({ label: 'outsider', proxySource: '100.64.1.1', listenerFamily: 4 });
    const get = await sendHttpRequest({ ...target, method: 'GET', target: '/', proxyHeader: outsider, headers: [['Host', host('shoot--p--foo')]] });
    expect(get.status).toBe(301);
    expect(headerValue(get, 'location')).toBe(`https://${host('shoot--p--foo')}:443/`);
    const unmatched = await httpConnect({ ...target, proxyHeader: outsider, headers: [['X-Gardener-Destination', 'not-a-cluster']] });
    expect(unmatched.status).toBe(301);
  });

  it('SNI: each shoot’s API server chain admits exactly its ACL’s clients', async () => {
    const cases = CLIENTS.flatMap((client) => SHOOTS.map((shoot) => ({ client, shoot })));
    const mismatches = await runAll(
      cases.map(({ client, shoot }) => async () => {
        const target = await gateway.endpoint(9443, client.listenerFamily);
        const { reached } = await probeTls({ ...target, sni: host(shoot.id), proxyHeader: proxyHeader(client), localAddress: client.localAddress });
        const oracleShoot = ORACLE.find((s) => s.technicalID === shoot.id) as OracleShoot;
        const expected = admits(oracleShoot, oracleClient(client));
        const ok = expected ? reached?.cluster === kapi(shoot.id) : reached === undefined;
        return ok ? undefined : `${client.label} -> ${shoot.id}: expected ${expected ? 'reached' : 'closed'}, got ${JSON.stringify(reached)}`;
      }),
    );
    expect(mismatches.filter(Boolean)).toEqual([]);
  });

  it('observability wildcard chain: each host is restricted by its owner’s ACL only', async () => {
    const hosts = SHOOTS.flatMap((s) => ['p', 'gu', 'api'].map((prefix) => ({ owner: s.id, sni: `${prefix}-${s.id.replace(/^shoot--?/, '')}.${DOMAIN}` })));
    const cases = CLIENTS.filter((c) => c.listenerFamily === 4).flatMap((client) => hosts.map((h) => ({ client, ...h })));
    const mismatches = await runAll(
      cases.map(({ client, owner, sni }) => async () => {
        const target = await gateway.endpoint(9443, 4);
        const { reached } = await probeTls({ ...target, sni, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
        const expected = admits(ORACLE.find((s) => s.technicalID === owner) as OracleShoot, oracleClient(client));
        return (reached !== undefined) === expected ? undefined : `${client.label} -> ${sni}: expected ${expected ? 'reached' : 'closed'}`;
      }),
    );
    expect(mismatches.filter(Boolean)).toEqual([]);
  });
});

describe('conformance on a Gardener 1.114–1.122 gateway: legacy PROXY-protocol apiserver-proxy port (real Envoy)', () => {
  let gateway: LiveGateway;
  const apiserverIP = (i: number): string => `240.0.0.${10 + i}`;

  beforeAll(async () => {
    const acls = new Map(built.seed.shoots.map((s) => [s.technicalID, s]));
    const legacyFilters = SHOOTS.map((s, i) => {
      const original = gardenerLegacyProxyEnvoyFilter({ technicalID: s.id, apiserverIP: apiserverIP(i), name: `${s.id}-apiserver-proxy` });
      const ops = legacyProxyPatch(original, (id) => acls.get(id), built.seed.operator.legacyProxyPort);
      return jsonpatch.applyPatch(structuredClone(original), ops).newDocument as JsonObject;
    });
    gateway = await startLiveGateway({ ...gatewaySpec('v1.114-v1.122'), envoyFilters: [...GENERATED, ...legacyFilters] });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('the PROXY destination selects the shoot’s chain, which admits exactly its ACL’s clients (and its pods)', async () => {
    const clients: Client[] = [...CLIENTS.filter((c) => c.proxySource !== undefined), { label: 'shoot foo pod', proxySource: '100.96.3.4', listenerFamily: 4 }];
    const cases = clients.flatMap((client) => SHOOTS.map((shoot, i) => ({ client, shoot, i })));
    const mismatches = await runAll(
      cases.map(({ client, shoot, i }) => async () => {
        const target = await gateway.endpoint(8443, 4);
        const destination = { address: client.proxySource?.includes(':') || client.proxyFamily === 'TCP6' ? `::ffff:${apiserverIP(i)}` : apiserverIP(i), port: 443 };
        const header = encodeProxyV2Header({ source: { address: client.proxySource as string, port: 40_000 }, destination, family: client.proxyFamily ?? (client.proxySource?.includes(':') ? 'TCP6' : 'TCP4') });
        const { reached } = await probeTcp({ ...target, proxyHeader: header, localAddress: client.localAddress });
        const o = ORACLE.find((s) => s.technicalID === shoot.id) as OracleShoot;
        const legacy = { ...o, alwaysAllowed: normalizeCidrSet([...o.alwaysAllowed, ...(built.seed.shoots.find((s) => s.technicalID === shoot.id)?.legacyProxyAllowed ?? [])]) };
        const expected = admits(legacy, oracleClient(client));
        // Gardener's chain matches the IPv4 ClusterIP only; a TCP6 destination reaches no chain at all.
        const chainMatches = !(client.proxySource?.includes(':') || client.proxyFamily === 'TCP6');
        const want = chainMatches && expected;
        return (reached?.cluster === kapi(shoot.id)) === want ? undefined : `${client.label} -> ${shoot.id}: expected ${want ? 'reached' : 'closed'}, got ${JSON.stringify(reached)}`;
      }),
    );
    expect(mismatches.filter(Boolean)).toEqual([]);
  });

  it('8132 is still protected in this era', async () => {
    const target = await gateway.endpoint(8132, 4);
    const outsider = proxyHeader({ label: 'outsider', proxySource: '100.64.1.1', listenerFamily: 4 });
    expect((await httpConnect({ ...target, proxyHeader: outsider, headers: [['Reversed-VPN', vpn('shoot--p--foo', 0)]] })).status).toBe(403);
    const inside = proxyHeader({ label: 'in', proxySource: '203.0.113.9', listenerFamily: 4 });
    expect((await httpConnect({ ...target, proxyHeader: inside, headers: [['Reversed-VPN', vpn('shoot--p--foo', 0)]] })).status).toBe(200);
  });
});
