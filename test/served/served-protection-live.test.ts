// Protection checked where it is served (issue 30 point 3): checkServedProtection reads what a
// real Envoy holds, fed over delta ADS by Istio's own discovery server (istio-render serve) for
// the default gateway of a Gardener 1.145 seed, with the operator settings the chart ships (no
// OperatorConfiguration: the defaults, combinedForm ecds with 48 buckets). Three changes on
// Gardener's side make our EnvoyFilters (stored and accepted by Istio) match nothing; each must
// be reported, and each report is checked against the decision Envoy makes for a real client:
// - the SNI listener moves (the gateway Service's targetPort 9443 -> 9444, Gardener's own filters
//   follow): every ACL shoot's API and observability chains are served without their filters;
// - port 8132 is removed (RemoveHTTPProxyLegacyPort): the CONNECT patches for 8132 match nothing,
//   nothing is exposed, 8443 still enforces;
// - a Gardener EnvoyFilter names the 8443 connection manager differently (applied live, through
//   Istio's config store): reported within a minute, 8443 exposed, 8132 still enforces.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCommand } from '../../src/cli/verify-command.js';
import { seedModelFromObjects } from '../../src/render/seed-render.js';
import { servedGateway } from '../../src/served/served-config.js';
import { checkServedProtection, isProtectionFault, type ServedReport } from '../../src/served/served-protection.js';
import { httpConnect, probeTcp, probeTls, proxyV2From } from '../envoy/clients.js';
import type { JsonObject } from '../envoy/json.js';
import { kapi } from '../support/decide.js';
import { ERAS } from '../istio/eras.js';
import { generateForSeed, istioInputObjects } from '../istio/istio-rendered-seed.js';
import type { GardenerEraFixture } from '../istio/eras.js';
import { startLiveAdsGateway, type LiveAdsGateway } from '../istio/live-ads-gateway.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway } from '../istio/seed-fixture.js';
import { sniEndpoints } from '../istio/sni-endpoints.js';

const era = ERAS['v1.145'];
const GATEWAY = ingressGateway('default').namespace;
const proxyOf = (e: GardenerEraFixture) => ({ namespace: GATEWAY, labels: gatewayLabels(e, ingressGateway('default')) });
const PROXY = proxyOf(era);
/** ALLOW 203.0.113.0/24 on the default gateway (test/support/conformance-matrix.ts). */
const FOO = 'shoot--p--foo';
const ADMITTED = '203.0.113.9';
const REFUSED = '100.64.1.1';
/** Every ACL shoot has a chain on the default gateway (the zonal and exposure-class ones their wildcard host), and the observability wildcard is there. */
const ACL_SHOOTS = ['shoot--bar--a', 'shoot--p--foo', 'shoot--xshoot-q--foo', 'shoot-q--foo'];
const REPORTED_WITHIN_MS = 60_000;

type Mutate = (object: JsonObject) => JsonObject | undefined;

function metadataOf(object: JsonObject): { name: string; namespace: string } {
  const metadata = object['metadata'] as { name?: string; namespace?: string } | undefined;
  return { name: metadata?.name ?? '', namespace: metadata?.namespace ?? '' };
}

function inDefaultGateway(kind: string, names: readonly string[]): (object: JsonObject) => boolean {
  return (object) => object['kind'] === kind && metadataOf(object).namespace === GATEWAY && names.includes(metadataOf(object).name);
}

/** Gardener's objects with one change; what Istio reads is them plus exactly what the product writes for them (`webhook: false`: without the admission webhook's patches). */
function seedWith(mutate: Mutate = (o) => o, options: { era?: GardenerEraFixture; webhook?: boolean } = {}): { objects: JsonObject[]; istioInput: JsonObject[] } {
  const objects = gardenerSeedObjects(options.era ?? era).flatMap((o) => {
    const changed = mutate(structuredClone(o));
    return changed === undefined ? [] : [changed];
  });
  const generated = generateForSeed(objects);
  return { objects, istioInput: istioInputObjects(objects, options.webhook === false ? { ...generated, patches: [] } : generated) };
}

/** `gardener-acl verify` against the running Envoy's admin address, with the seed's objects as a file. */
async function verifyCli(gateway: LiveAdsGateway, objects: readonly JsonObject[]): Promise<{ code: number; out: string; err: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'gardener-acl-verify-'));
  const file = join(dir, 'seed.yaml');
  await writeFile(file, objects.map((o) => JSON.stringify(o)).join('\n---\n'));
  let out = '';
  let err = '';
  const code = await verifyCommand(['--admin-url', gateway.envoy.adminUrl, '--gateway', GATEWAY, file], { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

function reportFor(objects: readonly JsonObject[], dump: unknown): ServedReport {
  const model = seedModelFromObjects(objects.map((object, i) => ({ object, source: `fixture #${i}` })));
  if (!model.seed) throw new Error('the fixture has no seed model');
  return checkServedProtection(model.seed, GATEWAY, servedGateway(dump));
}

const faults = (report: ServedReport) => report.findings.filter(isProtectionFault);
const summary = (report: ServedReport) => report.findings.map((f) => `${f.severity} ${f.technicalID ?? '*'} ${f.path} ${f.where}`);

async function connectStatus(gateway: LiveAdsGateway, port: number, client: string): Promise<number> {
  const header = port === 8132 ? 'Reversed-VPN' : 'X-Gardener-Destination';
  return (await httpConnect({ ...(await gateway.endpoint(port, 4)), headers: [[header, kapi(FOO)]], proxyHeader: proxyV2From(client) })).status;
}

async function withGateway<T>(istioInput: readonly JsonObject[], body: (gateway: LiveAdsGateway) => Promise<T>, proxy = PROXY): Promise<T> {
  const gateway = await startLiveAdsGateway({ objects: istioInput, proxy });
  try {
    return await body(gateway);
  } finally {
    await gateway.stop();
  }
}

describe(`served protection, judged on a real Envoy fed by Istio (Gardener ${era.name}, default gateway, chart defaults)`, () => {
  it('intact seed: every ACL shoot is served on every path, nothing reported', { timeout: 120_000 }, async () => {
    const { objects, istioInput } = seedWith();
    await withGateway(istioInput, async (gateway) => {
      const report = reportFor(objects, await gateway.configDump());
      expect(report.shoots).toBe(ACL_SHOOTS.length);
      expect(summary(report)).toEqual([]);
      expect(await connectStatus(gateway, 8443, REFUSED)).toBe(403);
      const cli = await verifyCli(gateway, objects);
      expect(cli).toEqual({ code: 0, out: `gateway ${GATEWAY}: every path it serves into the 4 ACL shoot(s) checked carries the shoot's filter\n`, err: '' });
    });
  });

  it('the SNI listener moved to 9444 (Service targetPort, Gardener filters follow): every API and observability chain on the gateway is reported exposed, and Envoy admits a refused client', { timeout: 120_000 }, async () => {
    const moved = (object: JsonObject): JsonObject => {
      const text = JSON.stringify(object);
      if (metadataOf(object).namespace !== GATEWAY || !['Service', 'EnvoyFilter'].includes(String(object['kind']))) return object;
      return JSON.parse(text.replaceAll('"targetPort":9443', '"targetPort":9444').replaceAll('"portNumber":9443', '"portNumber":9444')) as JsonObject;
    };
    const { objects, istioInput } = seedWith(moved);
    await withGateway(istioInput, async (gateway) => {
      const report = reportFor(objects, await gateway.configDump());
      const exposed = faults(report);
      expect(exposed.every((f) => f.severity === 'exposed' && f.where.startsWith('0.0.0.0_9444'))).toBe(true);
      expect([...new Set(exposed.filter((f) => f.path === 'api').map((f) => f.technicalID))].sort()).toEqual(ACL_SHOOTS);
      expect([...new Set(exposed.filter((f) => f.path === 'observability').map((f) => f.technicalID))].sort()).toEqual(ACL_SHOOTS);
      expect(exposed.find((f) => f.technicalID === FOO && f.path === 'api')?.cause).toMatch(/^the filter chain serving \S+ has no gardener-acl-sni filter for the shoot: a Gardener or Istio change/);
      // The report is Envoy's decision: the refused client reaches foo's API server.
      const endpoint = sniEndpoints(era).find((e) => e.owner === FOO && e.kind === 'api' && e.tls.mode === 'passthrough');
      if (!endpoint) throw new Error('no passthrough API endpoint of foo');
      const reached = await probeTls({ ...(await gateway.endpoint(9444, 4)), sni: endpoint.sni, proxyHeader: proxyV2From(REFUSED) });
      expect(reached.reached?.cluster).toBe(endpoint.cluster);
    });
  });

  it('port 8132 removed (RemoveHTTPProxyLegacyPort): reported as a path the gateway no longer serves, nothing exposed, 8443 still enforces', { timeout: 120_000 }, async () => {
    const without8132: Mutate = (object) => {
      if (inDefaultGateway('Gateway', ['http-connect'])(object) || inDefaultGateway('EnvoyFilter', ['reversed-vpn', 'http-connect-listener', 'proxy-protocol-vpn'])(object)) return undefined;
      if (inDefaultGateway('Service', ['istio-ingressgateway'])(object)) {
        const spec = object['spec'] as { ports: { port: number }[] };
        spec.ports = spec.ports.filter((p) => p.port !== 8132);
      }
      return object;
    };
    const { objects, istioInput } = seedWith(without8132);
    await withGateway(istioInput, async (gateway) => {
      const report = reportFor(objects, await gateway.configDump());
      expect(report.findings).toEqual([
        {
          technicalID: undefined,
          path: 'connect',
          severity: 'absent',
          where: 'port 8132',
          cause: 'no listener on port 8132: the combined CONNECT patches for port 8132 match nothing (the gateway does not serve that path)',
        },
      ]);
      expect(await connectStatus(gateway, 8443, REFUSED)).toBe(403);
      expect(await connectStatus(gateway, 8443, ADMITTED)).toBe(200);
    });
  });

  describe('the 8443 connection manager renamed by a Gardener EnvoyFilter, applied live', () => {
    let gateway: LiveAdsGateway;
    const { objects, istioInput } = seedWith();
    beforeAll(async () => {
      gateway = await startLiveAdsGateway({ objects: istioInput, proxy: PROXY });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('is reported within a minute for every ACL shoot on 0.0.0.0_8443 only; Envoy admits a refused CONNECT there and still refuses it on 8132', { timeout: 120_000 }, async () => {
      expect(faults(reportFor(objects, await gateway.configDump()))).toEqual([]);
      const renamer: JsonObject = {
        apiVersion: 'networking.istio.io/v1alpha3',
        kind: 'EnvoyFilter',
        metadata: { name: 'http-proxy-hcm-name', namespace: GATEWAY },
        spec: {
          workloadSelector: { labels: PROXY.labels },
          configPatches: [
            {
              applyTo: 'NETWORK_FILTER',
              match: { context: 'GATEWAY', listener: { portNumber: 8443, filterChain: { filter: { name: 'envoy.filters.network.http_connection_manager' } } } },
              patch: { operation: 'MERGE', value: { name: 'envoy.http_connection_manager' } },
            },
          ],
        },
      };
      const written = performance.now();
      await gateway.replaceEnvoyFilters([...istioInput, renamer]);
      let report = reportFor(objects, await gateway.configDump());
      while (faults(report).length === 0 && performance.now() - written < REPORTED_WITHIN_MS) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        report = reportFor(objects, await gateway.configDump());
      }
      const reportedMs = Math.round(performance.now() - written);
      console.log(`[served] connection manager renamed: reported ${reportedMs} ms after the write`);
      expect(reportedMs).toBeLessThan(REPORTED_WITHIN_MS);
      expect(summary(report)).toEqual(ACL_SHOOTS.map((id) => `exposed ${id} connect 0.0.0.0_8443`));
      expect(report.findings[0]?.cause).toBe(
        'the connection manager routes CONNECT by x-gardener-destination and no filter before its router holds a policy for the shoot: a Gardener or Istio change (a renamed or moved listener, a connection manager under another filter name) leaves the EnvoyFilter patch matching nothing there',
      );
      expect(await connectStatus(gateway, 8443, REFUSED)).toBe(200);
      expect(await connectStatus(gateway, 8132, REFUSED)).toBe(403);
      expect(await connectStatus(gateway, 8132, ADMITTED)).toBe(200);
      const cli = await verifyCli(gateway, objects);
      expect(cli.code).toBe(1);
      expect(cli.out.split('\n')[0]).toBe(`gateway ${GATEWAY}: 4 path(s) into 4 of 4 ACL shoot(s) not served as stored`);
      expect(cli.out).toContain('EXPOSED  shoot--p--foo            connect       0.0.0.0_8443\n         the connection manager routes CONNECT by x-gardener-destination');
    });
  });
});

// Gardener <= 1.122: the legacy PROXY-protocol apiserver-proxy port, whose per-shoot chains are
// Gardener's own EnvoyFilters that the admission webhook patches.
describe('served protection on the legacy apiserver-proxy port (Gardener v1.118, default gateway, chart defaults)', () => {
  const legacy = ERAS['v1.118'];
  const LEGACY_ACL_SHOOTS = ['shoot--p--foo', 'shoot-q--foo'];

  it('with the webhook\'s patches every legacy chain of an ACL shoot carries its filter; 8443 is no CONNECT port in this era (reported absent)', { timeout: 120_000 }, async () => {
    const { objects, istioInput } = seedWith(undefined, { era: legacy });
    await withGateway(istioInput, async (gateway) => {
      expect(summary(reportFor(objects, await gateway.configDump()))).toEqual(['absent * connect port 8443']);
    }, proxyOf(legacy));
  });

  it('without them (webhook disabled or down at the write): each ACL shoot\'s legacy chain is reported exposed, and Envoy admits a refused client there', { timeout: 120_000 }, async () => {
    const { objects, istioInput } = seedWith(undefined, { era: legacy, webhook: false });
    await withGateway(istioInput, async (gateway) => {
      const report = reportFor(objects, await gateway.configDump());
      const exposed = faults(report);
      expect(exposed.map((f) => `${f.technicalID} ${f.path} ${f.where}`)).toEqual(LEGACY_ACL_SHOOTS.map((id) => `${id} legacy 0.0.0.0_8443 [port 8443]`));
      expect(exposed[0]?.cause).toMatch(/^the legacy PROXY-protocol chain forwarding to the shoot has no gardener-acl-legacy-proxy filter: the admission webhook did not patch/);
      // The shoot's apiserver-proxy path: a PROXY header naming the shoot's API server address as destination.
      const apiserverIP = FIXTURE_SHOOTS.find((shoot) => shoot.id === FOO)?.apiserverIP ?? '';
      const reached = await probeTcp({ ...(await gateway.endpoint(8443, 4)), proxyHeader: proxyV2From(REFUSED, { address: apiserverIP, port: 443 }) });
      expect(reached.reached?.cluster).toBe(kapi(FOO));
    }, proxyOf(legacy));
  });
});
