// Issue 14 point 1 through Istio's own config generation: a shoot in audit mode keeps its shadow
// rules and per-policy counters after Istio has decoded our EnvoyFilters (a field Istio dropped
// would leave the counters silent and this test red), while another shoot in the same combined
// shard is still enforced. The seed is Gardener's objects of the newest era, with one shoot's
// providerConfig switched to `mode: audit`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpConnect, probeTls } from '../envoy/clients.js';
import { isJsonObject, type JsonObject } from '../envoy/json.js';
import { CLIENTS, OUTSIDER, proxyHeader } from '../support/conformance-matrix.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { renderGatewayWithIstio } from './istio-render.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { generateForSeed, istioInputObjects } from './istio-rendered-seed.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway } from './seed-fixture.js';
import { sniEndpoints } from './sni-endpoints.js';

const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const AUDITED = 'shoot--p--foo';
const ENFORCED = 'shoot--bar--a';
const DENIED_BY_BAR = CLIENTS.find((c) => c.label === 'denied by bar--a, IPv4')!;

function withAudit(objects: readonly JsonObject[], technicalID: string): JsonObject[] {
  return objects.map((object) => {
    const metadata = isJsonObject(object['metadata']) ? object['metadata'] : {};
    if (object['kind'] !== 'Extension' || metadata['namespace'] !== technicalID) return object;
    const copy = JSON.parse(JSON.stringify(object)) as { spec: { providerConfig: { rule: Record<string, unknown> } } };
    copy.spec.providerConfig.rule['mode'] = 'audit';
    return copy as unknown as JsonObject;
  });
}

describe(`audit mode through Istio's rendering (Gardener ${era.name} seed)`, () => {
  let gateway: IstioGateway;
  const shoot = FIXTURE_SHOOTS.find((s) => s.id === AUDITED)!;

  beforeAll(async () => {
    const objects = withAudit(gardenerSeedObjects(era), AUDITED);
    const generated = generateForSeed(objects);
    const gw = ingressGateway(shoot.gateway);
    const render = await renderGatewayWithIstio(istioInputObjects(objects, generated), { namespace: gw.namespace, labels: gatewayLabels(era, gw) });
    gateway = await startIstioGateway(render);
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('CONNECT: the audited shoot admits an outsider and counts it in rbac.policy.<id>.shadow_denied; the enforced shoot in the same shard still refuses', async () => {
    const target = await gateway.endpoint(8132, 4);
    const counter = `policy\\.${AUDITED}\\.shadow_denied$`;
    const before = [...(await gateway.envoy.stats(counter)).values()].reduce((a, b) => a + b, 0);
    // The audited shoot is the fixture's HA-VPN shoot (servers vpn-seed-server-0 and -1).
    const vpnOf = (id: string, server: string): [string, string][] => [['Reversed-VPN', `outbound|1194||${server}.${id}.svc.cluster.local`]];
    const audited = await httpConnect({ ...target, headers: vpnOf(AUDITED, 'vpn-seed-server-0'), proxyHeader: proxyHeader(OUTSIDER) });
    expect(audited.status).toBe(200);
    expect(audited.tunnel?.shoot).toBe(AUDITED);
    const after = await gateway.envoy.stats(counter);
    expect([...after.keys()]).toHaveLength(1);
    expect([...after.values()].reduce((a, b) => a + b, 0)).toBe(before + 1);
    const enforced = await httpConnect({ ...target, headers: vpnOf(ENFORCED, 'vpn-seed-server'), proxyHeader: proxyHeader(DENIED_BY_BAR) });
    expect(enforced.status).toBe(403);
  });

  it('SNI: the audited shoot’s API server is reached from outside; gardener_acl_sni.<id>.rbac.shadow_denied counts it, rbac.denied does not', async () => {
    const endpoint = sniEndpoints(era).find((e) => e.owner === AUDITED && e.kind === 'api' && e.tls.mode === 'passthrough');
    if (!endpoint) throw new Error('no passthrough API endpoint of the shoot');
    const target = await gateway.endpoint(9443, 4);
    const stat = (name: string) => gateway.envoy.stat(`gardener_acl_sni.${AUDITED}.rbac.${name}`);
    const [shadowBefore, deniedBefore] = [await stat('shadow_denied'), await stat('denied')];
    for (let i = 0; i < 2; i++) expect((await probeTls({ ...target, sni: endpoint.sni, proxyHeader: proxyHeader(OUTSIDER) })).reached?.cluster).toBe(endpoint.cluster);
    expect(await stat('shadow_denied')).toBe(shadowBefore + 2);
    expect(await stat('denied')).toBe(deniedBefore);
  });
});
