// Connections that the Go reference extension's EnvoyFilters let through although docs/design.md forbids
// them, shown on a real Envoy; each test is named after the bypass and also shows that
// gardener-acl's filters refuse the same connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { connectAdmitted, admits } from '../oracle/acl-semantics.js';
import { addr } from '../oracle/addresses.js';
import { kapi, socket } from '../support/decide.js';
import { testSeed } from '../support/test-seed.js';
import { encodeProxyV2Header, httpConnect, probeTls, proxyV2From } from './clients.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';
import { referenceExtensionFilters } from './reference-extension-shape.js';

const ALLOW_SHOOT = 'shoot--p--allow';
const DENY_SHOOT = 'shoot--p--deny';
const host = (id: string): string => `api.${id}.example.test`;
const built = testSeed([
  { id: ALLOW_SHOOT, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] }, always: ['10.250.0.0/16'], hosts: [host(ALLOW_SHOOT)] },
  { id: DENY_SHOOT, rule: { action: 'DENY', type: 'remote_ip', cidrs: ['198.51.100.0/24'] }, always: ['10.250.0.0/16'], hosts: [host(DENY_SHOOT)] },
]);
const OUTSIDER = '100.64.1.1';
const DENIED = '198.51.100.7';

type Shape = 'reference' | 'gardener-acl';

describe('bypasses of the reference extension’s shape (real Envoy, Gardener 1.139–1.147 gateway)', () => {
  const gateways = new Map<Shape, LiveGateway>();

  beforeAll(async () => {
    const spec = {
      era: 'v1.139-v1.149' as const,
      shoots: [ALLOW_SHOOT, DENY_SHOOT].map((id) => ({ technicalID: id, sniChains: [[host(id)]] })),
    };
    gateways.set('reference', await startLiveGateway({ ...spec, envoyFilters: referenceExtensionFilters(built.seed) }));
    gateways.set('gardener-acl', await startLiveGateway({ ...spec, envoyFilters: allEnvoyFilters(buildSeedEnvoyFilters(built.seed)) }));
  });
  afterAll(async () => {
    await Promise.all([...gateways.values()].map((g) => g.stop()));
  });

  async function connect(shape: Shape, client: string, headers: [string, string][]) {
    const gateway = gateways.get(shape);
    if (!gateway) throw new Error(`no ${shape} gateway`);
    return httpConnect({ ...(await gateway.endpoint(8443)), proxyHeader: proxyV2From(client), headers });
  }

  it('bypass: the Istio-TLS-termination socket destination has no dots, so an ALLOW list is skipped', async () => {
    const headers: [string, string][] = [['X-Gardener-Destination', socket(ALLOW_SHOOT)]];
    expect(connectAdmitted(headers, { remote: addr(OUTSIDER), direct: addr('127.0.0.1') }, built.seed.operator.protectedHeaders, built.oracle)).toBe(false);
    const reference = await connect('reference', OUTSIDER, headers);
    expect(reference.status).toBe(200);
    expect(reference.tunnel?.cluster).toBe(socket(ALLOW_SHOOT));
    expect((await connect('gardener-acl', OUTSIDER, headers)).status).toBe(403);
  });

  it('bypass: a DENY rule admits the denied range on the HTTP-CONNECT paths (filter hard-coded to ALLOW)', async () => {
    const headers: [string, string][] = [['X-Gardener-Destination', kapi(DENY_SHOOT)]];
    expect(connectAdmitted(headers, { remote: addr(DENIED), direct: addr('127.0.0.1') }, built.seed.operator.protectedHeaders, built.oracle)).toBe(false);
    const reference = await connect('reference', DENIED, headers);
    expect(reference.status).toBe(200);
    expect(reference.tunnel?.cluster).toBe(kapi(DENY_SHOOT));
    expect((await connect('gardener-acl', DENIED, headers)).status).toBe(403);
  });

  it('bypass: an IPv4-mapped PROXY source escapes a DENY rule on the API server SNI path', async () => {
    const deny = built.oracle.find((s) => s.technicalID === DENY_SHOOT);
    expect(deny && admits(deny, { remote: addr(`::ffff:${DENIED}`), direct: addr('127.0.0.1') })).toBe(false);
    const header = encodeProxyV2Header({ source: { address: DENIED, port: 40_000 }, destination: { address: '192.0.2.1', port: 443 }, family: 'TCP6' });
    const probe = async (shape: Shape) => {
      const gateway = gateways.get(shape);
      if (!gateway) throw new Error(`no ${shape} gateway`);
      return (await probeTls({ ...(await gateway.endpoint(9443)), sni: host(DENY_SHOOT), proxyHeader: header })).reached;
    };
    expect((await probe('reference'))?.cluster).toBe(kapi(DENY_SHOOT));
    expect(await probe('gardener-acl')).toBeUndefined();
  });
});
