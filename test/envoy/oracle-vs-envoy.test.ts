// The oracle's model of Envoy (test/oracle/envoy-chain-evaluator.ts) held against the real Envoys
// we support (1.40 and 1.37, the proxy of Istio 1.29), so that the property tests and the
// continuity checker, which judge by the model, judge as Envoy decides.
//
// - The extraction's pieces, compared value by value: what Envoy writes into the address and target
//   headers and into dynamic metadata (echoed back as response headers) for every client of the
//   conformance matrix and more address forms, and for header values with odd bytes, empty, long or
//   padded values; the model must compute the same strings.
// - Whole chains, decision by decision: the matcher and ecds forms of a seed (the conformance
//   matrix's shoots plus rules that exercise the IP matcher's ordering: a DENY of 0.0.0.0/0, nested
//   ranges, a direct_remote_ip DENY; the ecds seed with ranges every shoot admits hoisted), intact,
//   with `matcher` stripped, with a bucket resource missing (its default config decides) and with a
//   bucket missing without a default (500). Every case of the matrix, plus adversarial headers, must
//   get the model's verdict: passed (the route decides), refused (403) or error (500).
//
// One Envoy serves two variants, one per CONNECT port; ECDS resources of the 8132 variant are
// renamed (`<name>~8132`) in what both Envoy and the model get, since Envoy shares a resource
// among listeners by name. A missing resource is one whose xDS source never answers: Envoy applies
// the default config after initial_fetch_timeout (1 s here instead of the product's 30 s).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMITTED_BY_EVERY_SHOOT, extractionFilters } from '../../src/rbac/connect-matcher.js';
import { ecdsBucketOf, ecdsResourceName } from '../../src/rbac/connect-matcher-ecds.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { addr, envoyAddressText, type Address } from '../oracle/addresses.js';
import { EnvoyConnectChain, envoyBehaviour, type ChainOutcome } from '../oracle/envoy-chain-evaluator.js';
import { isRecord } from '../oracle/placement.js';
import { CLIENTS, SPOOFED_EXTRACTION_HEADERS, connectCases, headerSets, oracleClient, proxyHeader, runAll, type Client } from '../support/conformance-matrix.js';
import { definesEcdsResources, withoutMatcher } from '../support/damaged-objects.js';
import { kapi, socket, vpn, type Headers } from '../support/decide.js';
import { testSeed, type TestShoot } from '../support/test-seed.js';
import { encodeProxyV2Header, httpConnect, sendHttpRequest } from './clients.js';
import { CONFORMANCE_SHOOTS, DOMAIN, conformanceGatewaySpec } from './conformance-seed.js';
import { EchoUpstreams } from './echo-upstreams.js';
import { EcdsFiles } from './ecds-files.js';
import { CONFORMANCE_ENVOY_VERSIONS, type EnvoyVersion } from './envoy-binary.js';
import { startEnvoy, type BoundAddress, type EnvoyInstance } from './envoy-process.js';
import { buildGardenerGateway, gatewayBootstrap, gatewayUpstreams } from './gardener-gateway.js';
import { approximateIstioPlacement } from './istio-placement-approximation.js';
import type { JsonObject } from './json.js';

const ERA = 'v1.139-v1.149';
const NAMESPACE = 'istio-ingress';
const HEADERS = ['reversed-vpn', 'x-gardener-destination'];
const METADATA_NAMESPACE = 'gardener-acl';
const REMOTE_HEADER = 'x-gardener-acl-remote-address';
const DIRECT_HEADER = 'x-gardener-acl-direct-address';
const HCM = 'envoy.filters.network.http_connection_manager';
/** Refuses `x-h: b` (exactly) and `x-r` matching `a.b`: the repeated-header and regex-encoding behaviours of RBAC `rules`. */
const RULES_PROBE = {
  '@type': 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC',
  rules: {
    action: 'DENY',
    policies: {
      probe: {
        permissions: [{ header: { name: 'x-h', string_match: { exact: 'b' } } }, { header: { name: 'x-r', string_match: { safe_regex: { regex: 'a.b' } } } }],
        principals: [{ any: true }],
      },
    },
  },
};

// ---------------------------------------------------------------------------------------------
// Seeds and cases

/** Rules whose leaves depend on the IP matcher's order: equal prefixes (a DENY of everything next to the "any other address" ranges), nested ranges, a DENY by the peer. */
const ORDERING_SHOOTS: TestShoot[] = [
  { id: 'shoot--z--deny-all', rule: { action: 'DENY', type: 'remote_ip', cidrs: ['0.0.0.0/0', '::/0'] }, always: ['10.250.0.0/16'] },
  { id: 'shoot--z--nested', rule: { action: 'DENY', type: 'remote_ip', cidrs: ['100.64.0.0/10', '100.64.1.1/32', '2001:db8:ffff::/48'] }, always: ['100.64.1.0/24'] },
  { id: 'shoot--z--peer', rule: { action: 'DENY', type: 'direct_remote_ip', cidrs: ['127.0.0.8/29', '::1/128'] }, always: ['203.0.113.0/24'] },
];
const SEED_NODES = '10.250.0.0/16';
/** Enough shoots sharing the seed nodes that lookups check them once before the leaves (ADMITTED_BY_EVERY_SHOOT). */
const FILLERS: TestShoot[] = Array.from({ length: 30 }, (_, i) => ({ id: `shoot--fill--s${i}`, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [`198.18.${i}.0/24`] }, always: [SEED_NODES] }));
const withSeedNodes = (s: TestShoot): TestShoot => (s.rule ? { ...s, always: [...new Set([...(s.always ?? []), SEED_NODES])] } : s);

const matcherSeed = testSeed([...CONFORMANCE_SHOOTS, ...ORDERING_SHOOTS], { observabilityDomain: DOMAIN, operator: { combinedForm: 'matcher' } }).seed;
// Few buckets, so that each holds enough shoots for the hoisting to pay off (the matcher seed keeps every range in its leaves).
const ecdsSeed = testSeed([...CONFORMANCE_SHOOTS, ...ORDERING_SHOOTS, ...FILLERS].map(withSeedNodes), { observabilityDomain: DOMAIN, operator: { combinedForm: 'ecds', ecdsBuckets: 2 } }).seed;

/** Header sets beyond the matrix: the ordering shoots, clients sending the extraction's own headers, odd bytes and lengths. */
function extraSets(): Headers[] {
  const sets: Headers[] = [];
  for (const { id } of ORDERING_SHOOTS) {
    for (const value of [kapi(id), socket(id), vpn(id)]) sets.push([['X-Gardener-Destination', value]], [['Reversed-VPN', value]]);
    sets.push([['Reversed-VPN', kapi(id)], ['X-Gardener-Destination', kapi('shoot--p--foo')]]);
  }
  for (const spoofed of SPOOFED_EXTRACTION_HEADERS) sets.push([['X-Gardener-Destination', kapi('shoot--p--foo')], spoofed]);
  sets.push(
    [['X-Gardener-Destination', kapi('shoot--p--foo')], ...SPOOFED_EXTRACTION_HEADERS],
    [['x-gardener-acl-target', '=shoot--p--foo'], ['x-gardener-acl-target-x-gardener-destination', '=shoot--bar--a']],
    [['X-Gardener-Destination', '']],
    [['X-Gardener-Destination', ''], ['X-Gardener-Destination', '']],
    [['Reversed-VPN', `${kapi('shoot--p--foo')}${'x'.repeat(9000)}`]],
    // Envoy 1.40 reads the byte as part of the ID (Latin-1), 1.37 extracts nothing (UTF-8): no such shoot either way.
    [['Reversed-VPN', 'outbound|443||kube-apiserver.shoot--p\xff--foo.svc.cluster.local']],
    [['X-Gardener-Destination', `${socket('shoot--bar--a')}\xc3\xa9`]],
    [['X-Gardener-Destination', ` ${socket('shoot--p--foo')}\t`]],
    [['X-Gardener-Destination', `=shoot--p--foo`]],
  );
  return sets;
}

type Case = { readonly client: Client; readonly headers: Headers };
const FULL_CASES: readonly Case[] = [...connectCases(), ...CLIENTS.flatMap((client) => extraSets().map((headers) => ({ client, headers })))];
/** For degraded variants: every header set from a client most ACLs admit, an outsider in both address forms, and a loopback peer. */
const SUBSET_CLIENTS = new Set(['shoot foo range, IPv4', 'outsider IPv4', 'outsider IPv4-mapped', 'loopback peer 127.0.0.9, no PROXY', 'IPv6 loopback peer ::1, no PROXY']);
const SUBSET_CASES: readonly Case[] = FULL_CASES.filter(({ client }) => SUBSET_CLIENTS.has(client.label));

// ---------------------------------------------------------------------------------------------
// Variants: what one port of the gateway gets

type Objects = readonly unknown[];

/** The objects with every ECDS resource the `port` listener part names renamed `<name>~<port>`, so the other port's variant keeps its own. */
function renamedForPort(objects: Objects, port: number): unknown[] {
  const suffix = `~${port}`;
  return objects.map((object) => {
    const o = object as JsonObject;
    const spec = o['spec'] as JsonObject;
    const patches = (spec['configPatches'] as JsonObject[]).map((patch) => {
      const value = (patch['patch'] as JsonObject)['value'] as JsonObject;
      const rename = patch['applyTo'] === 'EXTENSION_CONFIG' || isRecord(value['config_discovery']);
      return rename ? { ...patch, patch: { ...(patch['patch'] as JsonObject), value: { ...value, name: `${String(value['name'])}${suffix}` } } } : patch;
    });
    return { ...o, metadata: { ...(o['metadata'] as JsonObject), name: `${String((o['metadata'] as JsonObject)['name'])}${suffix}` }, spec: { ...spec, configPatches: patches } };
  });
}

/** Only the objects for `port` (CONNECT objects of other ports and per-shoot objects left out). */
function onPort(objects: Objects, port: number): unknown[] {
  return objects.filter((object) => {
    const patches = ((object as JsonObject)['spec'] as JsonObject)['configPatches'] as JsonObject[];
    return patches.every((p) => p['applyTo'] === 'EXTENSION_CONFIG') || patches.some((p) => p['applyTo'] === 'HTTP_FILTER' && ((p['match'] as JsonObject)['listener'] as JsonObject)['portNumber'] === port);
  });
}

interface PortVariant {
  readonly label: string;
  readonly objects: Objects;
  readonly cases: readonly Case[];
}

const combinedOf = (seed: typeof matcherSeed): unknown[] => allEnvoyFilters(buildSeedEnvoyFilters(seed)).filter((o) => o.metadata.name.startsWith('acl-connect-'));
const MATCHER_OBJECTS = combinedOf(matcherSeed);
const ECDS_OBJECTS = combinedOf(ecdsSeed);
/** The bucket holding shoot--p--foo: its requests meet the missing bucket's default after the buckets before it. */
const FOO_BUCKET = ecdsResourceName(ecdsBucketOf('shoot--p--foo', ecdsSeed.operator.ecdsBuckets));
const withoutResource = (objects: Objects, name: string): unknown[] =>
  objects.map((o) => {
    if (!definesEcdsResources(o)) return o;
    const spec = (o as JsonObject)['spec'] as JsonObject;
    const patches = (spec['configPatches'] as JsonObject[]).filter((p) => ((p['patch'] as JsonObject)['value'] as JsonObject)['name'] !== name);
    return { ...(o as JsonObject), spec: { ...spec, configPatches: patches } };
  });
const withoutDefaultConfig = (objects: Objects): unknown[] =>
  objects.map((o) => {
    const spec = (o as JsonObject)['spec'] as JsonObject;
    const patches = (spec['configPatches'] as JsonObject[]).map((p) => {
      const value = (p['patch'] as JsonObject)['value'] as JsonObject;
      if (!isRecord(value['config_discovery'])) return p;
      const { default_config: _dropped, ...discovery } = value['config_discovery'];
      return { ...p, patch: { ...(p['patch'] as JsonObject), value: { ...value, config_discovery: discovery } } };
    });
    return { ...(o as JsonObject), spec: { ...spec, configPatches: patches } };
  });

/** Per Envoy: two variants, on 8443 and on 8132. */
const GATEWAYS: readonly { readonly label: string; readonly ports: Readonly<Record<8443 | 8132, PortVariant>> }[] = [
  {
    label: 'matcher form',
    ports: {
      8443: { label: 'intact', objects: MATCHER_OBJECTS, cases: FULL_CASES },
      8132: { label: '`matcher` stripped', objects: MATCHER_OBJECTS.map(withoutMatcher), cases: FULL_CASES },
    },
  },
  {
    label: 'ecds form, ranges every shoot admits hoisted',
    ports: {
      8443: { label: 'intact', objects: ECDS_OBJECTS, cases: FULL_CASES },
      8132: { label: '`matcher` stripped from every bucket', objects: ECDS_OBJECTS.map(withoutMatcher), cases: SUBSET_CASES },
    },
  },
  {
    label: 'ecds form, a bucket missing',
    ports: {
      8443: { label: `${FOO_BUCKET} missing (its default config decides)`, objects: withoutResource(ECDS_OBJECTS, FOO_BUCKET), cases: SUBSET_CASES },
      8132: { label: `${FOO_BUCKET} missing, no default config (500)`, objects: withoutDefaultConfig(withoutResource(ECDS_OBJECTS, FOO_BUCKET)), cases: SUBSET_CASES },
    },
  },
];

// ---------------------------------------------------------------------------------------------
// A gateway taking listener patches through the Istio approximation and ECDS resources from files

const NOWHERE_XDS = 'gardener-acl-test-xds-nowhere';
/** An xDS server that never answers (a closed loopback port): a resource from it never arrives. */
const NOWHERE_CLUSTER: JsonObject = {
  name: NOWHERE_XDS,
  type: 'STATIC',
  connect_timeout: '0.25s',
  typed_extension_protocol_options: {
    'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } },
  },
  load_assignment: { cluster_name: NOWHERE_XDS, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 1 } } } }] }] },
};

interface EcdsGateway {
  readonly envoy: EnvoyInstance;
  /** Names of the HTTP filters on the listener of `port`, in chain order, as the Istio approximation placed them. */
  httpFilterNames(port: number): string[];
  endpoint(port: number, family: 4 | 6): Promise<BoundAddress>;
  stop(): Promise<void>;
}

async function startEcdsGateway(version: EnvoyVersion, objects: Objects): Promise<EcdsGateway> {
  const spec = conformanceGatewaySpec(ERA);
  const echo = await EchoUpstreams.start(gatewayUpstreams(spec));
  const files = await EcdsFiles.create();
  try {
    const resources = objects.filter(definesEcdsResources).flatMap((o) =>
      (((o as JsonObject)['spec'] as JsonObject)['configPatches'] as JsonObject[]).map((p) => (p['patch'] as JsonObject)['value'] as JsonObject),
    );
    await files.write(resources);
    const stored = new Set(resources.map((r) => String(r['name'])));
    const placement = approximateIstioPlacement(buildGardenerGateway(spec, echo.ports()), objects.filter((o) => !definesEcdsResources(o)));
    const source = (name: string): JsonObject =>
      stored.has(name)
        ? { resource_api_version: 'V3', path_config_source: { path: files.path(name), watched_directory: { path: files.dir } } }
        : { resource_api_version: 'V3', initial_fetch_timeout: '1s', api_config_source: { api_type: 'GRPC', transport_api_version: 'V3', grpc_services: [{ envoy_grpc: { cluster_name: NOWHERE_XDS } }] } };
    const rewrite = (value: unknown): unknown => {
      if (Array.isArray(value)) return (value as unknown[]).map(rewrite);
      if (!isRecord(value)) return value;
      if (isRecord(value['config_discovery']) && typeof value['name'] === 'string') return { ...value, config_discovery: { ...value['config_discovery'], config_source: source(value['name']) } };
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v)]));
    };
    const listeners = placement.gateway.listeners.map((l) => ({ logicalPort: l.logicalPort, config: rewrite(l.config) as JsonObject }));
    const envoy = await startEnvoy({ bootstrap: gatewayBootstrap({ listeners, clusters: [...placement.gateway.clusters, NOWHERE_CLUSTER] }), envoyVersion: version });
    return {
      envoy,
      httpFilterNames(port) {
        const listener = listeners.find((l) => l.logicalPort === port);
        const chains = (listener?.config['filter_chains'] ?? []) as JsonObject[];
        return chains.flatMap((chain) =>
          ((chain['filters'] ?? []) as JsonObject[]).flatMap((f) => (((f['typed_config'] as JsonObject | undefined)?.['http_filters'] ?? []) as JsonObject[]).map((h) => String(h['name']))),
        );
      },
      async endpoint(port, family) {
        const listener = listeners.find((l) => l.logicalPort === port);
        if (listener === undefined) throw new Error(`no listener for port ${port}`);
        return envoy.boundAddress(String(listener.config['name']), family);
      },
      async stop() {
        await Promise.allSettled([envoy.stop(), echo.close(), files.remove()]);
      },
    };
  } catch (error) {
    await Promise.allSettled([echo.close(), files.remove()]);
    throw error;
  }
}

function outcomeOfStatus(status: number): ChainOutcome['kind'] {
  return status === 403 ? 'refused' : status === 500 ? 'error' : 'passed';
}

// ---------------------------------------------------------------------------------------------

describe.each(CONFORMANCE_ENVOY_VERSIONS)('the oracle’s model of Envoy %s decides as Envoy %s does', (version) => {
  const behaviour = envoyBehaviour(version);

  describe('the extraction’s pieces: address text, target and address headers, metadata', () => {
    const probeObjects = [
      {
        metadata: { name: 'probe', namespace: NAMESPACE },
        spec: {
          configPatches: [...extractionFilters(8443, HEADERS)].reverse().map((value) => ({
            applyTo: 'HTTP_FILTER',
            match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: HCM } } } },
            patch: { operation: 'INSERT_FIRST', value },
          })),
        },
      },
    ];
    const echoed: [string, string][] = [
      ['x-out-raw-remote', '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%'],
      ['x-out-raw-direct', '%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%'],
      ...[REMOTE_HEADER, DIRECT_HEADER, ...HEADERS.map((h) => `x-gardener-acl-target-${h}`)].map((h): [string, string] => [`x-out-header-${h}`, `%REQ(${h})%`]),
      ...[REMOTE_HEADER, DIRECT_HEADER, ...HEADERS].map((k): [string, string] => [`x-out-metadata-${k}`, `%DYNAMIC_METADATA(${METADATA_NAMESPACE}:${k})%`]),
      // Metadata nobody wrote: the formatter writes nothing, and the header is not added.
      ['x-out-metadata-absent', `%DYNAMIC_METADATA(${METADATA_NAMESPACE}:absent)%`],
    ];
    let envoy: EnvoyInstance;

    beforeAll(async () => {
      const listener = {
        name: 'probe',
        address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
        additional_addresses: [{ address: { socket_address: { address: '::1', port_value: 0 } } }],
        listener_filters: [{ name: 'proxy_protocol', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol', allow_requests_without_proxy_protocol: true } }],
        filter_chains: [
          {
            filters: [
              {
                name: HCM,
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                  stat_prefix: 'probe',
                  use_remote_address: true,
                  route_config: { virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200 } }] }] },
                  http_filters: [
                    ...extractionFilters(8443, HEADERS),
                    {
                      name: 'echo',
                      typed_config: {
                        '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
                        mutations: { response_mutations: echoed.map(([key, value]) => ({ append: { header: { key, value }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' } })) },
                      },
                    },
                    { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
                  ],
                },
              },
            ],
          },
        ],
      };
      const rulesListener = {
        name: 'rules-probe',
        address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
        filter_chains: [
          {
            filters: [
              {
                name: HCM,
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                  stat_prefix: 'rules_probe',
                  route_config: { virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200 } }] }] },
                  http_filters: [{ name: 'rules', typed_config: RULES_PROBE }, { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }],
                },
              },
            ],
          },
        ],
      };
      // Through JSON: the generated filters are typed loosely, the bootstrap is plain JSON.
      envoy = await startEnvoy({ bootstrap: JSON.parse(JSON.stringify({ static_resources: { listeners: [listener, rulesListener] } })) as JsonObject, envoyVersion: version });
    });
    afterAll(async () => {
      await envoy?.stop();
    });

    /** Clients beyond the matrix: IPv6 sources Envoy prints with a dotted tail, or compressed. */
    const SOURCES: readonly { readonly label: string; readonly source: string }[] = [
      { label: 'IPv4-compatible', source: '::1.2.3.4' },
      { label: 'dotted tail for ::1:ffff', source: '::1:ffff' },
      { label: 'compressed', source: '2001:db8:0:0:1:0:0:1' },
      { label: 'mapped, written in hex', source: '::ffff:a00:1' },
      { label: 'upper-case hex', source: '2001:DB8::A' },
    ];

    it('RBAC `rules`: a repeated header, and a regex `.` on bytes that are not UTF-8 or are, decide as the model says', async () => {
      const chain = new EnvoyConnectChain(
        [{ metadata: { name: 'rules', namespace: NAMESPACE }, spec: { configPatches: [{ applyTo: 'HTTP_FILTER', match: { context: 'GATEWAY', listener: { portNumber: 1 } }, patch: { operation: 'INSERT_FIRST', value: { name: 'rules', typed_config: RULES_PROBE } } }] } }],
        { namespace: NAMESPACE, port: 1 },
        behaviour,
      );
      const requests: Headers[] = [[['x-h', 'a'], ['x-h', 'b']], [['x-h', 'b']], [['x-h', 'a,b']], [['x-h', 'a']], [['x-r', 'a\xffb']], [['x-r', 'a\xc3\xa9b']], [['x-r', 'a-b']], [['x-r', 'a\xc3b']]];
      const target = await envoy.boundAddress('rules-probe', 4);
      const seen = await runAll(
        requests.map((headers) => async () => {
          const { status } = await sendHttpRequest({ ...target, method: 'GET', target: '/', headers: [['Host', 'probe'], ...headers] });
          const model = chain.decide({ headers, remote: addr('127.0.0.1'), direct: addr('127.0.0.1') });
          return { headers, envoy: outcomeOfStatus(status), model: model.kind };
        }),
      );
      expect(seen.filter((r) => r.envoy !== r.model)).toEqual([]);
      // The cases tell the versions apart: each Envoy refuses some and admits some.
      expect(new Set(seen.map((r) => r.envoy)).size).toBe(2);
    });

    it('for every client and header value, Envoy writes what the model computes', async () => {
      const chain = new EnvoyConnectChain(probeObjects, { namespace: NAMESPACE, port: 8443 }, behaviour);
      const probes: { label: string; client: { remote: Address; direct: Address }; family: 4 | 6; proxy: Buffer | undefined; localAddress: string | undefined; headers: Headers }[] = [
        ...CLIENTS.map((client) => ({ label: client.label, client: oracleClient(client), family: client.listenerFamily, proxy: proxyHeader(client), localAddress: client.localAddress, headers: [['X-Gardener-Destination', kapi('shoot--p--foo')]] as Headers })),
        ...SOURCES.map(({ label, source }) => ({
          label,
          client: { remote: addr(source), direct: addr('127.0.0.1') },
          family: 4 as const,
          proxy: encodeProxyV2Header({ source: { address: source, port: 40_000 }, destination: { address: '2001:db8::1', port: 443 }, family: 'TCP6' }),
          localAddress: undefined,
          headers: [] as Headers,
        })),
        ...[...headerSets(), ...extraSets()].map((headers, i) => ({ label: `header set ${i}`, client: oracleClient(CLIENTS[0] as Client), family: 4 as const, proxy: proxyHeader(CLIENTS[0] as Client), localAddress: undefined, headers })),
      ];
      const mismatches = await runAll(
        probes.map((probe) => async () => {
          const target = await envoy.boundAddress('probe', probe.family);
          const response = await sendHttpRequest({ ...target, method: 'GET', target: '/', headers: [['Host', 'probe'], ...probe.headers], proxyHeader: probe.proxy, localAddress: probe.localAddress });
          const got = Object.fromEntries(response.headers.filter(([name]) => name.startsWith('x-out-')));
          const run = chain.run({ headers: probe.headers, ...probe.client });
          const header = (name: string): string | undefined => {
            const values = run.headers.filter(([n]) => n === name).map(([, v]) => v);
            return values.length === 0 ? undefined : values.join(',');
          };
          const want = Object.fromEntries(
            [
              ['x-out-raw-remote', envoyAddressText(probe.client.remote)],
              ['x-out-raw-direct', envoyAddressText(probe.client.direct)],
              ...[REMOTE_HEADER, DIRECT_HEADER, ...HEADERS.map((h) => `x-gardener-acl-target-${h}`)].map((h) => [`x-out-header-${h}`, header(h)]),
              ...[REMOTE_HEADER, DIRECT_HEADER, ...HEADERS].map((k) => [`x-out-metadata-${k}`, run.metadata.get(METADATA_NAMESPACE)?.get(k)]),
            ].filter((entry): entry is [string, string] => entry[1] !== undefined),
          );
          return JSON.stringify(got) === JSON.stringify(want) ? undefined : `${probe.label} ${JSON.stringify(probe.headers).slice(0, 200)}: Envoy ${JSON.stringify(got)}, model ${JSON.stringify(want)}`;
        }),
      );
      expect(mismatches.filter((m) => m !== undefined)).toEqual([]);
      expect(probes.length).toBeGreaterThan(100);
    });
  });

  describe.each(GATEWAYS)('$label', ({ ports }) => {
    const objects = [...onPort(ports[8443].objects, 8443), ...renamedForPort(onPort(ports[8132].objects, 8132), 8132)];
    let gateway: EcdsGateway;

    beforeAll(async () => {
      gateway = await startEcdsGateway(version, objects);
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it.each([8443, 8132] as const)('port %i: every case gets the model’s verdict', async (port) => {
      const { label, cases } = ports[port];
      const chain = new EnvoyConnectChain(objects, { namespace: NAMESPACE, port }, behaviour);
      // The model's placement is the listener's: our filters first, in the same order, then Gardener's router.
      expect(gateway.httpFilterNames(port), label).toEqual([...chain.filterNames.map((n) => n.replace(/ \(ECDS\)$/, '')), 'envoy.filters.http.router']);
      const results = await runAll(
        cases.map(({ client, headers }) => async () => {
          const target = await gateway.endpoint(port, client.listenerFamily);
          const { status } = await httpConnect({ ...target, headers, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
          const model = chain.decide({ headers, ...oracleClient(client) });
          const mismatch = outcomeOfStatus(status) === model.kind ? undefined : `${label}: ${client.label} ${JSON.stringify(headers).slice(0, 300)}: Envoy ${status}, model ${JSON.stringify(model)}`;
          return { kind: model.kind, mismatch };
        }),
      );
      expect(results.flatMap((r) => (r.mismatch === undefined ? [] : [r.mismatch]))).toEqual([]);
      // Each variant decides both ways (and the one without a default config answers 500).
      const count = (kind: ChainOutcome['kind']): number => results.filter((r) => r.kind === kind).length;
      expect(count('refused') + count('error'), label).toBeGreaterThan(20);
      expect(count('passed') + (label.includes('500') ? count('error') : 0), label).toBeGreaterThan(20);
      if (label.includes('500')) expect(count('error'), label).toBeGreaterThan(0);
    });
  });
});

it('the seeds exercise what the calibration is for', () => {
  // The ecds seed checks ranges every shoot admits before some lookups; the DENY-everything rule sits in a leaf.
  expect(JSON.stringify(ECDS_OBJECTS)).toContain(ADMITTED_BY_EVERY_SHOOT);
  expect(JSON.stringify(MATCHER_OBJECTS)).not.toContain(ADMITTED_BY_EVERY_SHOOT);
  expect(JSON.stringify(MATCHER_OBJECTS)).toContain('=shoot--z--deny-all');
  expect(FULL_CASES.length).toBeGreaterThan(1500);
  expect(SUBSET_CASES.length).toBeGreaterThan(400);
});
