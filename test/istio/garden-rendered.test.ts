// Issue 32 point 1 and 3: the virtual garden's API server behind the ACL. gardener-operator's
// objects for the virtual garden's exposure (test/istio/garden-fixture.ts, both TLS termination
// and passthrough), plus the EnvoyFilter the garden ACL computes from the Garden, the garden-acl
// Extension and the ManagedSeeds, rendered by Istio's own code for the garden's ingress gateway
// and served by a real Envoy: every host of the virtual garden refuses a client the ACL does not
// admit and admits the rule's clients, the runtime cluster's nodes and pods and every ManagedSeed's
// egress, IPv4, IPv6 and IPv4-mapped alike. The expected verdicts are written by hand per client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { gardenAclFromInventory, gardenInventoryFromObjects } from '../../src/gardener/garden-acl.js';
import { extensionSchema } from '../../src/gardener/objects.js';
import { buildGardenEnvoyFilters, GARDEN_STAT_PREFIX } from '../../src/rbac/garden-envoy-filter.js';
import { encodeProxyV2Header, probeTls } from '../envoy/clients.js';
import type { JsonObject } from '../envoy/json.js';
import {
  GARDEN_GATEWAY_LABELS, GARDEN_GATEWAY_NAMESPACE, KUBE_APISERVER_CLUSTER, WILDCARD_HOST, gardenExtension, gardenHosts, gardenObject, managedSeedObjects, virtualGardenRuntimeObjects, type GardenExposure,
} from './garden-fixture.js';
import { probeHttps } from './https-probe.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { renderGatewayWithIstio } from './istio-render.js';

const RULE = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } };
const SEEDS = [
  { name: 'seed-eu', egressCIDRs: ['198.51.100.20/32'] },
  { name: 'seed-us', egressCIDRs: ['192.0.2.128/25', '2001:db8:5eed::/48'] },
];

interface GardenClient {
  readonly label: string;
  readonly proxySource?: string;
  readonly proxyFamily?: 'TCP6';
  readonly localAddress?: string;
  readonly listenerFamily: 4 | 6;
  readonly admitted: boolean;
}

const CLIENTS: readonly GardenClient[] = [
  { label: 'rule range, IPv4', proxySource: '203.0.113.9', listenerFamily: 4, admitted: true },
  { label: 'rule range, IPv4-mapped', proxySource: '203.0.113.9', proxyFamily: 'TCP6', listenerFamily: 4, admitted: true },
  { label: 'rule range, IPv6', proxySource: '2001:db8:a::5', listenerFamily: 4, admitted: true },
  { label: 'runtime node, IPv4', proxySource: '10.1.2.3', listenerFamily: 4, admitted: true },
  { label: 'runtime node, IPv6', proxySource: 'fd00:10:1::7', listenerFamily: 4, admitted: true },
  { label: 'runtime pod (gardener-controller-manager through the internal gateway)', proxySource: '100.100.0.5', listenerFamily: 4, admitted: true },
  { label: 'ManagedSeed seed-eu egress', proxySource: '198.51.100.20', listenerFamily: 4, admitted: true },
  { label: 'ManagedSeed seed-us egress, IPv4-mapped', proxySource: '192.0.2.200', proxyFamily: 'TCP6', listenerFamily: 4, admitted: true },
  { label: 'ManagedSeed seed-us egress, IPv6', proxySource: '2001:db8:5eed::1', listenerFamily: 4, admitted: true },
  { label: 'outsider IPv4', proxySource: '100.64.1.1', listenerFamily: 4, admitted: false },
  { label: 'outsider IPv4-mapped', proxySource: '100.64.1.1', proxyFamily: 'TCP6', listenerFamily: 4, admitted: false },
  { label: 'outsider IPv6', proxySource: '2001:db8:ffff::1', listenerFamily: 4, admitted: false },
  { label: 'next to seed-eu’s egress', proxySource: '198.51.100.21', listenerFamily: 4, admitted: false },
  { label: 'loopback peer 127.0.0.9, no PROXY header', localAddress: '127.0.0.9', listenerFamily: 4, admitted: false },
  { label: 'IPv6 loopback peer ::1, no PROXY header', listenerFamily: 6, admitted: false },
];

function proxyHeaderOf(c: GardenClient): Buffer | undefined {
  if (c.proxySource === undefined) return undefined;
  const destination = { address: c.proxySource.includes(':') ? '2001:db8::1' : '192.0.2.1', port: 443 };
  return encodeProxyV2Header({ source: { address: c.proxySource, port: 40_000 }, destination, family: c.proxyFamily });
}

function gardenAclObjects(exposure: GardenExposure, providerConfig: unknown, options: { readonly beforeGateway?: boolean } = {}): JsonObject[] {
  const runtime = virtualGardenRuntimeObjects(exposure).filter((o) => !(options.beforeGateway && o['kind'] === 'Gateway'));
  const { managedSeeds, shoots } = managedSeedObjects(SEEDS);
  const operator = defaultOperatorConfig();
  const extension = extensionSchema.parse(gardenExtension(providerConfig));
  const result = gardenAclFromInventory(extension, gardenInventoryFromObjects([...runtime, gardenObject(), ...managedSeeds, ...shoots], true), operator);
  if (result.kind !== 'acl' || result.ahead !== (options.beforeGateway ?? false)) throw new Error(`the garden ACL was not computed as expected: ${JSON.stringify(result)}`);
  return buildGardenEnvoyFilters(result.acl, operator.sniPort).map((f) => JSON.parse(JSON.stringify(f)) as JsonObject);
}

async function gateway(exposure: GardenExposure, ours: readonly JsonObject[]): Promise<IstioGateway> {
  const render = await renderGatewayWithIstio([...virtualGardenRuntimeObjects(exposure), ...ours], { namespace: GARDEN_GATEWAY_NAMESPACE, labels: { ...GARDEN_GATEWAY_LABELS } });
  return startIstioGateway(render);
}

let marker = 0;

/** Whether `client` got through to the virtual garden's kube-apiserver on `host`. */
async function reaches(gw: IstioGateway, exposure: GardenExposure, host: string, client: GardenClient): Promise<boolean> {
  const target = { ...(await gw.endpoint(9443, client.listenerFamily)), proxyHeader: proxyHeaderOf(client), ...(client.localAddress ? { localAddress: client.localAddress } : {}) };
  if (exposure === 'passthrough') {
    const { reached } = await probeTls({ ...target, sni: host });
    if (reached !== undefined && reached.cluster !== KUBE_APISERVER_CLUSTER) throw new Error(`${host} reached ${reached.cluster}`);
    return reached !== undefined;
  }
  const probe = `garden-probe-${process.pid}-${++marker}`;
  const result = await probeHttps({ ...target, sni: host, marker: probe });
  const expectedCertificate = host === WILDCARD_HOST ? 'garden-kube-apiserver-wildcard-tls' : 'garden-kube-apiserver-tls';
  if (result.servedCertificate !== expectedCertificate) throw new Error(`${host}: served ${result.servedCertificate}, want ${expectedCertificate}`);
  const upstream = gw.echo.upstream(KUBE_APISERVER_CLUSTER).connections.some((c) => c.received.includes(probe));
  if (upstream !== (result.status !== undefined)) throw new Error(`${host}: answered ${result.status} but the upstream ${upstream ? 'got' : 'did not get'} the request`);
  return upstream;
}

describe.each(['tls-termination', 'passthrough'] as const)('the virtual garden (gardener-operator v1.149, %s) rendered by Istio, served by a real Envoy', (exposure) => {
  let protectedGateway: IstioGateway;
  let openGateway: IstioGateway;

  beforeAll(async () => {
    protectedGateway = await gateway(exposure, gardenAclObjects(exposure, RULE));
    openGateway = await gateway(exposure, []);
  });
  afterAll(async () => {
    await Promise.allSettled([protectedGateway?.stop(), openGateway?.stop()]);
  });

  it('without the garden ACL an outsider reaches the virtual garden’s API server on every host (the probes can tell)', async () => {
    for (const host of gardenHosts()) expect(await reaches(openGateway, exposure, host, CLIENTS.find((c) => c.label === 'outsider IPv4')!), host).toBe(true);
  });

  it('with it, every host admits exactly the rule’s clients, the runtime nodes and pods and every ManagedSeed’s egress', { timeout: 120_000 }, async () => {
    const wrong: string[] = [];
    for (const host of gardenHosts()) {
      for (const client of CLIENTS) {
        const got = await reaches(protectedGateway, exposure, host, client);
        if (got !== client.admitted) wrong.push(`${client.label} -> ${host}: ${got ? 'admitted' : 'refused'}, want ${client.admitted ? 'admitted' : 'refused'}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('a refusal counts in gardener_acl_garden.virtual-garden.rbac.denied', async () => {
    const before = (await protectedGateway.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.denied`) ?? 0;
    expect(await reaches(protectedGateway, exposure, gardenHosts()[0]!, CLIENTS.find((c) => c.label === 'outsider IPv6')!)).toBe(false);
    const after = (await protectedGateway.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.denied`) ?? 0;
    expect(after - before).toBe(1);
  });
});

describe('the virtual garden’s ACL in audit mode (passthrough), rendered by Istio, served by a real Envoy', () => {
  let gw: IstioGateway;
  beforeAll(async () => {
    gw = await gateway('passthrough', gardenAclObjects('passthrough', { rule: { ...RULE.rule, mode: 'audit' } }));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('admits an outsider and counts what enforce would refuse in shadow_denied', async () => {
    const outsider = CLIENTS.find((c) => c.label === 'outsider IPv4')!;
    const before = (await gw.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.shadow_denied`) ?? 0;
    expect(await reaches(gw, 'passthrough', gardenHosts()[1]!, outsider)).toBe(true);
    const after = (await gw.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.shadow_denied`) ?? 0;
    expect(after - before).toBe(1);
  });
});

describe('the virtual garden’s filter written before its Gateway existed (a Garden’s first reconcile), once Istio serves the Gateway (TLS termination)', () => {
  let gw: IstioGateway;
  beforeAll(async () => {
    gw = await gateway('tls-termination', gardenAclObjects('tls-termination', RULE, { beforeGateway: true }));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('already protects every chain the Gateway brings, the wildcard server’s too', { timeout: 120_000 }, async () => {
    const wrong: string[] = [];
    for (const host of gardenHosts()) {
      for (const client of CLIENTS) {
        const got = await reaches(gw, 'tls-termination', host, client);
        if (got !== client.admitted) wrong.push(`${client.label} -> ${host}: ${got ? 'admitted' : 'refused'}, want ${client.admitted ? 'admitted' : 'refused'}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
