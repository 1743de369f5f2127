// Issue 14 point 4: a refused connection names the shoot in the gateway's access log. Gardener's
// istiod sets `accessLogFile: /dev/stdout` (pkg/component/networking/istio/charts/istio/
// istio-istiod/templates/configmap.yaml), so Istio's own code renders the access log with its
// default format; the real Envoy serves it. Envoy's RBAC filters report a denial as
// `rbac_access_denied_matched_policy[<policy>]`, and every policy we generate is named after the
// shoot's technical ID.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpConnect, probeTls } from '../envoy/clients.js';
import { OUTSIDER, CLIENTS, proxyHeader } from '../support/conformance-matrix.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { renderSeedThroughIstio } from './istio-rendered-seed.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { FIXTURE_SHOOTS } from './seed-fixture.js';
import { sniEndpoints } from './sni-endpoints.js';

// Gardener's mesh configuration, as its istiod ConfigMap writes it (the parts that shape gateways),
// with one change: the access log goes to a file instead of /dev/stdout, which Envoy cannot open
// when its stdout is a socket, as a child process's is here. The format is Istio's default either way.
const gardenerMesh = (accessLog: string) => `accessLogFile: "${accessLog}"\ningressControllerMode: "OFF"\n`;
const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const SHOOT = 'shoot--p--foo';
const ALLOWED = CLIENTS[0]!; // 203.0.113.9, inside the shoot's ALLOW range

describe(`refused connections name the shoot in the access log (Gardener ${era.name} seed rendered by Istio with Gardener's mesh config)`, () => {
  let gateway: IstioGateway;
  let accessLog: string;
  const shoot = FIXTURE_SHOOTS.find((s) => s.id === SHOOT)!;

  beforeAll(async () => {
    accessLog = path.join(await mkdtemp(path.join(tmpdir(), 'acl-access-log-')), 'access.log');
    const seed = await renderSeedThroughIstio(era, gardenerMesh(accessLog));
    const render = seed.renders.get(shoot.gateway);
    if (!render) throw new Error(`no render for ${shoot.gateway}`);
    gateway = await startIstioGateway(render);
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  // Envoy flushes file access logs every 10 s (its default file_flush_interval).
  const logged = async (marker: RegExp) => {
    for (let i = 0; i < 150; i++) {
      const line = (await readFile(accessLog, 'utf8').catch(() => '')).split('\n').find((l) => marker.test(l));
      if (line) return line;
      await new Promise((r) => setTimeout(r, 100));
    }
    return undefined;
  };

  it('CONNECT: the refused tunnel’s access-log line carries rbac_access_denied_matched_policy[<technical ID>] and the client address', { timeout: 30_000 }, async () => {
    const target = await gateway.endpoint(8132, 4);
    const headers: [string, string][] = [['Reversed-VPN', `outbound|1194||vpn-seed-server.${SHOOT}.svc.cluster.local`]];
    const admitted = await httpConnect({ ...target, headers, proxyHeader: proxyHeader(ALLOWED) });
    expect(admitted.status).not.toBe(403);
    const refused = await httpConnect({ ...target, headers, proxyHeader: proxyHeader(OUTSIDER) });
    expect(refused.status).toBe(403);
    const line = await logged(new RegExp(`rbac_access_denied_matched_policy\\[${SHOOT}\\]`));
    expect(line).toMatch(/"CONNECT - HTTP\/1\.1" 403 - rbac_access_denied_matched_policy\[shoot--p--foo\] /);
    expect(line).toContain(' 100.64.1.1:40000 ');
    // Only the refused request names the policy.
    const lines = (await readFile(accessLog, 'utf8')).split('\n').filter((l) => l.includes('rbac_access_denied_matched_policy'));
    expect(lines).toHaveLength(1);
  });

  it('SNI: a refused connection counts in the shoot’s own counter gardener_acl_sni.<technical ID>.rbac.denied, and in no other shoot’s', async () => {
    const endpoint = sniEndpoints(era).find((e) => e.owner === SHOOT && e.kind === 'api' && e.tls.mode === 'passthrough');
    if (!endpoint) throw new Error('no passthrough API endpoint of the shoot');
    const target = await gateway.endpoint(9443, 4);
    const before = await gateway.envoy.stats('^gardener_acl_sni\\..*\\.rbac\\.denied$');
    for (let i = 0; i < 3; i++) {
      const { reached } = await probeTls({ ...target, sni: endpoint.sni, proxyHeader: proxyHeader(OUTSIDER) });
      expect(reached).toBeUndefined();
    }
    expect((await probeTls({ ...target, sni: endpoint.sni, proxyHeader: proxyHeader(ALLOWED) })).reached?.cluster).toBe(endpoint.cluster);
    const after = await gateway.envoy.stats('^gardener_acl_sni\\..*\\.rbac\\.denied$');
    const changed = [...after].filter(([name, value]) => value !== (before.get(name) ?? 0)).map(([name, value]) => [name, value - (before.get(name) ?? 0)]);
    expect(changed).toEqual([[`gardener_acl_sni.${SHOOT}.rbac.denied`, 3]]);
  });
});
