// Issue 14 point 1 through Istio's own config generation: a shoot in audit mode keeps its shadow
// rules and per-policy counters after Istio has decoded our EnvoyFilters (a field Istio dropped
// would leave the counters silent and this test red), while another shoot in the same combined
// shard is still enforced. The seed is Gardener's objects of the newest era, with one shoot's
// providerConfig switched to `mode: audit`.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpConnect, probeTls } from '../envoy/clients.js';
import { isJsonObject, type JsonObject } from '../envoy/json.js';
import { CLIENTS, OUTSIDER, proxyHeader } from '../support/conformance-matrix.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { renderGatewayWithIstio } from './istio-render.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { generateForSeed, istioInputObjects, withOperatorSettings } from './istio-rendered-seed.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway } from './seed-fixture.js';
import { sniEndpoints } from './sni-endpoints.js';

const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const AUDITED = 'shoot--p--foo';
const ENFORCED = 'shoot--bar--a';
const DENIED_BY_BAR = CLIENTS.find((c) => c.label === 'denied by bar--a, IPv4')!;
// The access-log fields docs/operators/audit-mode.md documents, in an operator's mesh config
// (Gardener's sets only accessLogFile; Istio's default format has no RBAC metadata).
const AUDIT_LOG_FORMAT = 'audit connect=%DYNAMIC_METADATA(envoy.filters.http.rbac:shadow_effective_policy_id)% tcp=%DYNAMIC_METADATA(envoy.filters.network.rbac:shadow_effective_policy_id)% client=%DOWNSTREAM_REMOTE_ADDRESS%\n';
const meshConfig = (accessLog: string) => `accessLogFile: "${accessLog}"\naccessLogFormat: ${JSON.stringify(AUDIT_LOG_FORMAT)}\ningressControllerMode: "OFF"\n`;

/** The lines of the access log that hold `marker`, waiting for Envoy's flush (every 10 s, its default file_flush_interval). */
async function linesLogged(accessLog: string, marker: string): Promise<string[]> {
  for (let i = 0; i < 150; i++) {
    const lines = (await readFile(accessLog, 'utf8').catch(() => '')).split('\n').filter((l) => l.includes(marker));
    if (lines.length > 0) return lines;
    await new Promise((r) => setTimeout(r, 100));
  }
  return [];
}

/** The audited shoot's gateway, rendered by Istio with the access-log format above, served by a real Envoy. */
async function startAuditedGateway(objects: readonly JsonObject[]): Promise<{ gateway: IstioGateway; accessLog: string }> {
  const accessLog = path.join(await mkdtemp(path.join(tmpdir(), 'acl-audit-log-')), 'access.log');
  const gw = ingressGateway(FIXTURE_SHOOTS.find((s) => s.id === AUDITED)!.gateway);
  const render = await renderGatewayWithIstio(istioInputObjects(objects, generateForSeed(objects)), { namespace: gw.namespace, labels: gatewayLabels(era, gw) }, meshConfig(accessLog));
  return { gateway: await startIstioGateway(render), accessLog };
}

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
  let accessLog: string;
  const logged = (marker: string) => linesLogged(accessLog, marker);

  beforeAll(async () => {
    ({ gateway, accessLog } = await startAuditedGateway(withAudit(gardenerSeedObjects(era), AUDITED)));
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

  it('the access log names the audited shoot an API-server connection would have been refused for, with the client (network filter)', { timeout: 30_000 }, async () => {
    const client = (proxySource: string) => proxyHeader({ label: proxySource, proxySource, listenerFamily: 4 });
    const endpoint = sniEndpoints(era).find((e) => e.owner === AUDITED && e.kind === 'api' && e.tls.mode === 'passthrough')!;
    await probeTls({ ...(await gateway.endpoint(9443, 4)), sni: endpoint.sni, proxyHeader: client('100.64.8.8') });
    await probeTls({ ...(await gateway.endpoint(9443, 4)), sni: endpoint.sni, proxyHeader: client('203.0.113.9') });
    expect((await logged('client=100.64.8.8:'))[0]).toMatch(new RegExp(`^audit connect=- tcp=${AUDITED} client=100\\.64\\.8\\.8:40000$`));
    expect((await logged('client=203.0.113.9:'))[0]).toMatch(/^audit connect=- tcp=- client=203\.0\.113\.9:40000$/);
  });
});

// The CONNECT field of the access log, in the rules form with one shard: the only form in which one
// HTTP RBAC filter decides a CONNECT. In the default form every bucket's filter runs for every
// protected header and the last one with an audited shoot writes the field
// (docs/operators/audit-mode.md: there the per-shoot counters are the record; tested above on the default form).
describe(`audit mode in the access log, combinedForm rules (Gardener ${era.name} seed)`, () => {
  let gateway: IstioGateway;
  let accessLog: string;
  const logged = (marker: string) => linesLogged(accessLog, marker);

  beforeAll(async () => {
    ({ gateway, accessLog } = await startAuditedGateway(withOperatorSettings(withAudit(gardenerSeedObjects(era), AUDITED), { combinedForm: 'rules' })));
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('the access log names the audited shoot a connection would have been refused for, with the client (both kinds of filter)', { timeout: 30_000 }, async () => {
    const client = (proxySource: string) => proxyHeader({ label: proxySource, proxySource, listenerFamily: 4 });
    const endpoint = sniEndpoints(era).find((e) => e.owner === AUDITED && e.kind === 'api' && e.tls.mode === 'passthrough')!;
    await httpConnect({ ...(await gateway.endpoint(8132, 4)), headers: [['Reversed-VPN', `outbound|1194||vpn-seed-server-1.${AUDITED}.svc.cluster.local`]], proxyHeader: client('100.64.9.9') });
    await probeTls({ ...(await gateway.endpoint(9443, 4)), sni: endpoint.sni, proxyHeader: client('100.64.8.8') });
    // An admitted client leaves the field empty.
    await probeTls({ ...(await gateway.endpoint(9443, 4)), sni: endpoint.sni, proxyHeader: client('203.0.113.9') });
    expect((await logged('client=100.64.9.9:'))[0]).toMatch(new RegExp(`^audit connect=${AUDITED} tcp=- client=100\\.64\\.9\\.9:40000$`));
    expect((await logged('client=100.64.8.8:'))[0]).toMatch(new RegExp(`^audit connect=- tcp=${AUDITED} client=100\\.64\\.8\\.8:40000$`));
    expect((await logged('client=203.0.113.9:'))[0]).toMatch(/^audit connect=- tcp=- client=203\.0\.113\.9:40000$/);
  });
});
