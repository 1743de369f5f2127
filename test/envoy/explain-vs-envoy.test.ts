// Issue 14 point 2: `gardener-acl explain` against the real Envoy, case by case, on the embedded
// example seed. Every gateway of the seed is served by a real Envoy with exactly what `render`
// prints for it (and Gardener's legacy filter with the webhook's patch); for every shoot, client,
// path and gateway the verdict explain gives must be the decision Envoy makes on a real
// connection. explain states docs/design.md section 3 from the ACL model; it does not read the RBAC.
import jsonpatch from 'fast-json-patch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatAddress } from '../../src/acl/cidr.js';
import { COMBINED_FORMS, defaultOperatorConfig, type CombinedFormName } from '../../src/config/operator-config.js';
import { parseTechnicalID } from '../../src/acl/shoot-identity.js';
import { explainCommand } from '../../src/cli/explain-command.js';
import { loadDocuments } from '../../src/cli/load-documents.js';
import type { SourcedObject } from '../../src/gardener/inventory.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { explainShoot, type ClientAddress, type ExplainRequest, type LegacyChain, type PathVerdict } from '../../src/explain/explain-acl.js';
import type { SeedAcl } from '../../src/acl/model.js';
import { findLegacyChains } from '../../src/rbac/legacy-proxy-patch.js';
import { renderSeed, seedModelFromObjects, type SeedRender } from '../../src/render/seed-render.js';
import { oracleClient, proxyHeader, runAll, type Client } from '../support/conformance-matrix.js';
import { kapi, socket, vpn } from '../support/decide.js';
import { encodeProxyV2Header, httpConnect, probeTcp, probeTls } from './clients.js';
import type { GardenerGatewaySpec } from './gardener-gateway.js';
import type { JsonObject } from './json.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';

// Every kind of verdict the example's rules give: inside and outside each ALLOW and DENY range,
// the always-allowed ranges (seed nodes, the operator's probes, a shoot's egress), IPv4-mapped and
// IPv6 forms, and clients without a PROXY header whose loopback peer is the client.
const CLIENTS: readonly Client[] = [
  { label: 'prod range', proxySource: '203.0.113.9', listenerFamily: 4 },
  { label: 'prod range, IPv4-mapped', proxySource: '203.0.113.9', proxyFamily: 'TCP6', listenerFamily: 4 },
  { label: 'prod range, IPv6', proxySource: '2001:db8:100::5', listenerFamily: 4 },
  { label: 'outsider in 0.0.0.0/1', proxySource: '100.64.1.1', listenerFamily: 4 },
  { label: 'outsider above 128.0.0.0', proxySource: '200.1.1.1', listenerFamily: 4 },
  { label: 'outsider IPv6', proxySource: '2001:db8:ffff::1', listenerFamily: 4 },
  { label: 'legacy range', proxySource: '198.51.100.7', listenerFamily: 4 },
  { label: 'prod-eu egress (always allowed for it)', proxySource: '198.51.100.8', listenerFamily: 4 },
  { label: 'operator probe (always allowed)', proxySource: '192.0.2.3', listenerFamily: 4 },
  { label: 'seed node (always allowed)', proxySource: '10.250.1.1', listenerFamily: 4 },
  { label: 'seed node, IPv4-mapped', proxySource: '10.250.1.1', proxyFamily: 'TCP6', listenerFamily: 4 },
  { label: 'loopback peer, no PROXY header', listenerFamily: 4, localAddress: '127.0.0.5' },
  { label: 'IPv6 loopback peer, no PROXY header', listenerFamily: 6 },
];

function asExplainAddress(a: { family: 4 | 6; value: bigint }): ClientAddress {
  return { ...a, text: formatAddress(a.family, a.value) };
}

function requestFor(seed: SeedAcl, legacyChains: readonly LegacyChain[], technicalID: string, client: Client, extra: Partial<ExplainRequest> = {}): ExplainRequest {
  const { remote, direct } = oracleClient(client);
  return { seed, legacyChains, technicalID, client: asExplainAddress(remote), peer: asExplainAddress(direct), ...extra };
}

const OBSERVABILITY_PREFIXES = ['p', 'gu'];

/** The example's objects with the operator's combinedForm set (the matcher form reads "targets S" differently). */
function withForm(objects: readonly SourcedObject[], form: CombinedFormName): SourcedObject[] {
  const isOperator = (o: SourcedObject) => (o.object as { kind?: string }).kind === 'OperatorConfiguration';
  const operator = objects.find(isOperator);
  const base = operator ? (operator.object as Record<string, unknown>) : { apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'OperatorConfiguration' };
  return [...objects.filter((o) => !isOperator(o)), { source: operator?.source ?? 'combined form', object: { ...base, combinedForm: form } }];
}

// Every form, the default ecds included (its buckets served as Envoy runs them once ECDS delivered
// them; that delivery is proven with Istio's discovery server in test/istio/ecds-*.test.ts).
describe.each(COMBINED_FORMS)('gardener-acl explain equals the real Envoy on the example seed (combinedForm %s), case by case', (form) => {
  let seed: SeedAcl;
  let render: SeedRender;
  let ids: string[];
  let legacyChains: LegacyChain[];
  let legacyFilters: JsonObject[];
  const gateways = new Map<string, LiveGateway>();
  let legacyGateway: LiveGateway;
  const compared = { api: 0, observability: 0, connect: 0, legacy: 0 };

  const specFor = (namespace: string, era: GardenerGatewaySpec['era']): GardenerGatewaySpec => {
    const gateway = seed.gateways.find((g) => g.namespace === namespace)!;
    const wildcard = seed.observabilityWildcards.find((w) => w.gateway.namespace === namespace);
    return {
      era,
      family: 'dual',
      namespace,
      labels: gateway.selector,
      ...(wildcard ? { observabilityWildcardDomain: wildcard.domain } : {}),
      shoots: ids.map((id) => ({
        technicalID: id,
        sniChains: (seed.shoots.find((s) => s.technicalID === id)?.sniChains ?? []).filter((c) => c.gateway.namespace === namespace).map((c) => [...c.hosts]),
      })),
    };
  };

  beforeAll(async () => {
    const loaded = { objects: withForm((await loadDocuments([EMBEDDED_EXAMPLE])).objects, form) };
    const model = seedModelFromObjects(loaded.objects);
    if (!model.seed) throw new Error('the example seed has no model');
    seed = model.seed;
    render = renderSeed(loaded.objects);
    expect(render.problems.filter((p) => p.severity === 'error')).toEqual([]);
    ids = loaded.objects.flatMap(({ object }) => {
      const o = object as { kind?: string; metadata?: { name?: string } };
      return o.kind === 'Cluster' && o.metadata?.name ? [o.metadata.name] : [];
    });
    expect(ids.length).toBe(5);
    legacyChains = model.legacyFilters.flatMap((f) => findLegacyChains(f, seed.operator.legacyProxyPort).map((c) => ({ namespace: f.metadata.namespace, envoyFilter: `${f.metadata.namespace}/${f.metadata.name}`, technicalID: c.technicalID })));
    legacyFilters = model.legacyFilters.map((f) => {
      const patch = render.patches.find((p) => p.metadata.namespace === f.metadata.namespace && p.metadata.name === f.metadata.name);
      return jsonpatch.applyPatch(structuredClone(f) as unknown as JsonObject, patch ? [...patch.spec.operations] : []).newDocument;
    });
    expect(legacyChains.length).toBeGreaterThan(0);
    for (const g of seed.gateways) gateways.set(g.namespace, await startLiveGateway({ ...specFor(g.namespace, 'v1.139-v1.149'), envoyFilters: render.envoyFilters }));
    const legacyNamespace = legacyChains[0]!.namespace;
    legacyGateway = await startLiveGateway({ ...specFor(legacyNamespace, 'v1.114-v1.122'), envoyFilters: [...render.envoyFilters, ...legacyFilters] });
  }, 60_000);

  afterAll(async () => {
    for (const g of gateways.values()) await g.stop();
    await legacyGateway?.stop();
  });

  it('every generated patch is placed on some gateway (ECDS buckets: every resource a listener names is served)', () => {
    const isBucket = (f: (typeof render.envoyFilters)[number]) => f.spec.configPatches.every((p) => p.applyTo === 'EXTENSION_CONFIG');
    const unplaced = render.envoyFilters
      .filter((f) => !isBucket(f))
      .filter((f) => ![...gateways.values()].some((g) => g.placement.patches.some((p) => p.envoyFilter === `${f.metadata.namespace}/${f.metadata.name}` && p.applications > 0)));
    expect(unplaced.map((f) => f.metadata.name)).toEqual([]);
    for (const [namespace, g] of gateways) {
      const served = new Set(g.placement.extensionConfigs.map((r) => r['name']));
      const named = [...JSON.stringify(render.envoyFilters.filter((f) => f.metadata.namespace === namespace && !isBucket(f))).matchAll(/"name":"(gardener-acl-connect-bucket-\d{3})","config_discovery"/g)].map((m) => m[1]);
      expect(named.filter((n) => !served.has(n)), namespace).toEqual([]);
      expect(named.length > 0).toBe(form === 'ecds');
    }
  });

  it('api, observability and CONNECT: explain’s verdict on every gateway is Envoy’s decision', async () => {
    const tasks: (() => Promise<string | undefined>)[] = [];
    for (const id of ids) {
      for (const client of CLIENTS) {
        const explanation = explainShoot(requestFor(seed, legacyChains, id, client));
        const check = (v: PathVerdict, reached: boolean, what: string) =>
          reached === (v.verdict === 'admitted') ? undefined : `${id} ${v.path} ${v.gateway} ${v.at} from ${client.label}: explain says ${v.verdict} (${v.reason}), Envoy ${what}`;
        for (const v of explanation.verdicts) {
          const gateway = gateways.get(v.gateway)!;
          if (v.path === 'api') {
            const sni = v.at.slice('SNI '.length).split(/[, ]/)[0]!;
            tasks.push(async () => {
              compared.api++;
              const { reached } = await probeTls({ ...(await gateway.endpoint(9443, client.listenerFamily)), sni, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
              return check(v, reached?.cluster === kapi(id), reached ? `reached ${reached.cluster}` : 'closed the connection');
            });
          } else if (v.path === 'observability' && client.listenerFamily === 4) {
            const domain = seed.observabilityWildcards.find((w) => w.gateway.namespace === v.gateway)!.domain;
            for (const prefix of OBSERVABILITY_PREFIXES) {
              const sni = `${prefix}-${parseTechnicalID(id)!.shortID}.${domain}`;
              tasks.push(async () => {
                compared.observability++;
                const { reached } = await probeTls({ ...(await gateway.endpoint(9443, 4)), sni, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
                return check(v, reached !== undefined, reached ? 'reached nginx' : 'closed the connection');
              });
            }
          } else if (v.path === 'connect') {
            const port = Number(v.at.replace('CONNECT port ', ''));
            const headers: [string, string][] = port === 8132 ? [['Reversed-VPN', vpn(id)]] : [['X-Gardener-Destination', kapi(id)]];
            tasks.push(async () => {
              compared.connect++;
              const result = await httpConnect({ ...(await gateway.endpoint(port, client.listenerFamily)), headers, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
              const admitted = result.status === 200 && result.tunnel?.shoot === id;
              if (!admitted && result.status !== 403) return `${id} CONNECT ${port} from ${client.label}: neither tunnel nor 403 (${result.status})`;
              return check(v, admitted, `answered ${result.status}`);
            });
          }
        }
      }
    }
    const mismatches = await runAll(tasks);
    expect(mismatches.filter(Boolean)).toEqual([]);
    expect(compared.api).toBeGreaterThan(60);
    expect(compared.observability).toBeGreaterThan(50);
    expect(compared.connect).toBeGreaterThan(300);
  });

  it('concrete CONNECT requests (--header): several shoots at once, case variants, the socket form, repeats, two VPN servers: explain’s verdict is Envoy’s', async () => {
    const [a, b, c] = ['shoot--team--prod', 'shoot--team--prod-eu', 'shoot--web--shop'];
    const headerSets: [string, string][][] = [
      [['X-Gardener-Destination', socket(a!)]],
      [['X-Gardener-Destination', kapi(b!).toUpperCase()]],
      [['X-Gardener-Destination', kapi(c!)], ['Reversed-VPN', vpn(a!)]],
      [['X-Gardener-Destination', `${kapi(c!)},${socket(b!)}`]],
      [['X-Gardener-Destination', kapi(c!)], ['x-gardener-destination', kapi(a!)]],
      [['X-Gardener-Destination', `outbound|443||kube-apiserver.${a}x.svc.cluster.local`]],
      // The tunnel hop (the default): two VPN servers are refused even where both ACLs admit; one named twice is one.
      [['X-Gardener-Destination', vpn(c!)], ['Reversed-VPN', vpn(a!)]],
      [['X-Gardener-Destination', vpn(a!)], ['reversed-vpn', vpn(a!)]],
    ];
    const tasks: (() => Promise<string | undefined>)[] = [];
    for (const headers of headerSets) {
      for (const client of CLIENTS) {
        const verdicts = explainShoot(requestFor(seed, legacyChains, a!, client, { headers, paths: ['connect'] })).verdicts;
        for (const v of verdicts.filter((x) => x.at === 'CONNECT port 8443')) {
          tasks.push(async () => {
            compared.connect++;
            const result = await httpConnect({ ...(await gateways.get(v.gateway)!.endpoint(8443, client.listenerFamily)), headers, proxyHeader: proxyHeader(client), localAddress: client.localAddress });
            return (result.status !== 403) === (v.verdict === 'admitted') ? undefined : `${JSON.stringify(headers)} from ${client.label} on ${v.gateway}: explain says ${v.verdict} (${v.reason}), Envoy answered ${result.status}`;
          });
        }
      }
    }
    expect((await runAll(tasks)).filter(Boolean)).toEqual([]);
  });

  it('legacy PROXY-protocol port: explain’s verdict is Envoy’s for every IPv4 client', async () => {
    const chain = legacyChains[0]!;
    const destination = { address: '240.64.0.1', port: 443 };
    const clients = CLIENTS.filter((c) => c.proxySource !== undefined && !c.proxySource.includes(':') && c.proxyFamily !== 'TCP6');
    const mismatches = await runAll(
      clients.map((client) => async () => {
        compared.legacy++;
        const [v] = explainShoot(requestFor(seed, legacyChains, chain.technicalID, client, { paths: ['legacy'] })).verdicts;
        if (!v) return `no legacy verdict for ${chain.technicalID}`;
        const header = encodeProxyV2Header({ source: { address: client.proxySource!, port: 40_000 }, destination, family: 'TCP4' });
        const { reached } = await probeTcp({ ...(await legacyGateway.endpoint(8443, 4)), proxyHeader: header });
        const admitted = reached?.cluster === kapi(chain.technicalID);
        return admitted === (v.verdict === 'admitted') ? undefined : `legacy from ${client.label}: explain says ${v.verdict} (${v.reason}), Envoy ${admitted ? 'forwarded' : 'closed'}`;
      }),
    );
    expect(mismatches.filter(Boolean)).toEqual([]);
    // Both verdicts occur, so the comparison can fail either way.
    const kinds = new Set(clients.map((client) => explainShoot(requestFor(seed, legacyChains, chain.technicalID, client, { paths: ['legacy'] })).verdicts[0]?.verdict));
    expect([...kinds].sort()).toEqual(['admitted', 'refused']);
  });

  // The command reads the embedded example, which uses the default form.
  if (form === defaultOperatorConfig().combinedForm) {
    it('the command prints the same verdicts as JSON, exits 1 when a path refuses, and names the field of bad input', async () => {
      const run = async (args: string[]) => {
        let out = '';
        let err = '';
        const code = await explainCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
        return { code, out, err };
      };
      const refused = await run(['--shoot', 'shoot--team--prod', '--client', '100.64.1.1', '--output', 'json']);
      expect(refused.code).toBe(1);
      const expected = explainShoot({ seed, legacyChains, technicalID: 'shoot--team--prod', client: { family: 4, value: 0x64400101n, text: '100.64.1.1' } });
      expect(JSON.parse(refused.out)).toEqual(JSON.parse(JSON.stringify(expected)));
      const admitted = await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.9', '--path', 'api']);
      expect(admitted.code).toBe(0);
      expect(admitted.out).toContain('admitted api           istio-ingress  SNI api.prod.team.example.com, api.prod.team.internal.example.com (port 9443)\n         remote_ip 203.0.113.9 is in the ALLOW range 203.0.113.0/24');
      expect(await run(['--shoot', 'prod', '--client', '1.2.3.400'])).toEqual({
        code: 2,
        out: '',
        err: expect.stringMatching(/^--shoot "prod" is not a technical ID; write shoot--<project>--<name> \(or the legacy shoot-<project>--<name>\)\n--client "1\.2\.3\.400" is not an IPv4 or IPv6 address; write e\.g\. 203\.0\.113\.9 or 2001:db8::1\n/),
      });
      expect((await run(['--shoot', 'shoot--a--b', '--client', '10.0.0.1', '--header', 'no-colon'])).err).toMatch(/^--header "no-colon" is not "Name: value"/);
    });
  }
});
