// The ECDS delivery of the matcher form through Istio's own config generation (Gardener 1.145
// seed): Istio keeps the listeners' config_discovery references and answers every one from our
// EXTENSION_CONFIG patches (its ECDS generator, BuildExtensionConfiguration); a real Envoy serving
// Istio's listeners, with those resources handed over as ECDS files, decides the conformance
// matrix as docs/design.md section 3 says; and an ACL change, rendered by Istio again, changes no
// listener, only the changed shoot's bucket: every open tunnel stays open and new requests see
// the new rule. (The resources reach Envoy through files here; istiod sends the same resources
// over ADS.)
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { BUCKET_MISSING_POLICY, ECDS_FETCH_TIMEOUT, ECDS_TARGET_HEADER, ecdsBucketOf, ecdsResourceName } from '../../src/rbac/connect-matcher-ecds.js';
import { HEADER_TO_METADATA_TYPE, failClosedRules } from '../../src/rbac/connect-matcher.js';
import { matcherMapKeys } from './envoy-config-dump.js';
import { HTTP_RBAC_TYPE } from '../../src/rbac/envoy-rbac-types.js';
import { httpConnect, proxyV2From } from '../envoy/clients.js';
import { EcdsFiles, ecdsReloads } from '../envoy/ecds-files.js';
import { HeldConnection, connectRequestBytes } from '../envoy/held-connection.js';
import { getObject, getObjectList, getString, isJsonObject, type JsonObject } from '../envoy/json.js';
import { CLIENTS, OUTSIDER, SPOOFED_EXTRACTION_HEADERS, connectCases, connectExpected, connectMismatches, everyNamedShootRefuses } from '../support/conformance-matrix.js';
import { kapi } from '../support/decide.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { fixtureOracle } from './fixture-oracle.js';
import { renderGatewayWithIstio, type IstioRenderOutput } from './istio-render.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { istioInputWithEcds, withMatcherForm, withRule } from './istio-rendered-seed.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway } from './seed-fixture.js';

const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const BUCKETS = 4;
const HEADERS = defaultOperatorConfig().protectedHeaders;
const HA_VPN_INDEX = 1;
const CHANGED = 'shoot--p--foo';
const UNCHANGED = 'shoot--bar--a';
const OPEN_SHOOT = 'shoot--p--foo-bar';
const FOO_CLIENT = CLIENTS.find((c) => c.label === 'shoot foo range, IPv4')!;
const RECONFIGURED_MS = 10_000;


/** Our generated objects with the combined CONNECT filters delivered through ECDS, rendered by Istio for the default gateway. */
async function renderWithEcds(objects: readonly JsonObject[]): Promise<IstioRenderOutput> {
  const gateway = ingressGateway('default');
  return renderGatewayWithIstio(istioInputWithEcds(objects, BUCKETS), { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) });
}

function listenerPortOf(listener: JsonObject): unknown {
  return getObject(getObject(listener, 'address') ?? {}, 'socket_address')?.['port_value'];
}

function httpFiltersOn(render: IstioRenderOutput, port: number): JsonObject[] {
  const listener = render.listeners.find((l) => listenerPortOf(l) === port);
  return getObjectList(listener ?? {}, 'filter_chains').flatMap((chain) =>
    getObjectList(chain, 'filters').flatMap((f) => getObjectList(getObject(f, 'typed_config') ?? {}, 'http_filters')),
  );
}

describe(`ECDS delivery of the matcher form through Istio's rendering (Gardener ${era.name} seed)`, () => {
  const objects = withMatcherForm(gardenerSeedObjects(era));
  const names = Array.from({ length: BUCKETS }, (_, b) => ecdsResourceName(b));
  let render: IstioRenderOutput;
  let files: EcdsFiles;
  let gateway: IstioGateway;

  beforeAll(async () => {
    render = await renderWithEcds(objects);
    files = await EcdsFiles.create();
    await files.write(render.extensionConfigs);
    gateway = await startIstioGateway({ ...render, listeners: files.listeners(render.listeners) }, { listenersViaFile: true });
  });
  afterAll(async () => {
    await gateway?.stop();
    await files?.remove();
  });

  it('Istio keeps the references on both CONNECT listeners, after the extraction, and answers each with a non-empty RBAC matcher from our EXTENSION_CONFIG patches', () => {
    expect([...render.discoveredFilters].sort()).toEqual([...names].sort());
    const typeOf = (f: JsonObject | undefined) => getString(getObject(f ?? {}, 'typed_config') ?? {}, '@type');
    for (const { port } of era.connectPorts) {
      const filters = httpFiltersOn(render, port);
      const discovered = filters.filter((f) => isJsonObject(f['config_discovery'])).map((f) => getString(f, 'name'));
      // Every bucket once per protected header.
      expect(discovered, `port ${port}`).toEqual(HEADERS.flatMap(() => names));
      // Istio keeps each reference's bounded wait and its default, which refuses what the bucket would decide on.
      for (const f of filters.filter((x) => isJsonObject(x['config_discovery']))) {
        const discovery = getObject(f, 'config_discovery') ?? {};
        expect(getObject(discovery, 'config_source')?.['initial_fetch_timeout'], `port ${port}`).toBe(ECDS_FETCH_TIMEOUT);
        expect(discovery['default_config'], `port ${port}`).toEqual({ '@type': HTTP_RBAC_TYPE, rules: failClosedRules(BUCKET_MISSING_POLICY, [], ECDS_TARGET_HEADER) });
      }
      // First in the chain: the client addresses, the extraction, the address headers; then per
      // header its ID as the target and every reference.
      const mutation = /header_mutation\.v3\.HeaderMutation$/;
      expect(typeOf(filters[0])).toMatch(mutation);
      expect(typeOf(filters[1])).toBe(HEADER_TO_METADATA_TYPE);
      expect(typeOf(filters[2])).toMatch(mutation);
      HEADERS.forEach((_header, i) => {
        const turn = 3 + i * (names.length + 1);
        expect(typeOf(filters[turn])).toMatch(mutation);
        expect(filters.slice(turn + 1, turn + 1 + names.length).every((f) => isJsonObject(f['config_discovery']))).toBe(true);
      });
    }
    expect(render.extensionConfigs.map((c) => getString(c, 'name')).sort()).toEqual([...names].sort());
    const held = new Set<string>();
    for (const config of render.extensionConfigs) {
      const typed = getObject(config, 'typed_config') ?? {};
      expect(getString(typed, '@type')).toBe(HTTP_RBAC_TYPE);
      expect(isJsonObject(typed['matcher'])).toBe(true);
      // The guard against a missing extraction, then the lookup (empty buckets have no map).
      expect(getObjectList(getObject(getObject(typed, 'matcher') ?? {}, 'matcher_list') ?? {}, 'matchers')).toHaveLength(HEADERS.length);
      for (const id of matcherMapKeys(typed['matcher'])) held.add(id);
    }
    expect([...held].sort()).toEqual(FIXTURE_SHOOTS.filter((s) => s.rule).map((s) => s.id).sort());
  });

  it.each(era.connectPorts.map((p) => [p.port, p.header] as const))('HTTP CONNECT on %i (%s): every header set from every client is decided as docs/design.md says', async (port, routeHeader) => {
    const oracle = fixtureOracle(objects);
    const expectation = { oracle: oracle.shoots, protectedHeaders: HEADERS, routeHeader, routeRegex: new RegExp(era.destinationRegex), clusters: gateway.clusters, reading: 'routable' as const };
    const cases = connectCases(HA_VPN_INDEX);
    expect(await connectMismatches(gateway, port, cases, expectation)).toEqual([]);
    expect(cases.filter(({ client, headers }) => !connectExpected(client, headers, expectation)).length).toBeGreaterThan(50);
  });

  it('a client that sends its own target or address headers cannot choose the shoot whose ACL applies, nor the address it is judged by', async () => {
    for (const { port, header } of era.connectPorts) {
      const target = await gateway.endpoint(port, 4);
      const connect = async (spoofed: readonly (readonly [string, string])[]) =>
        (await httpConnect({ ...target, proxyHeader: proxyV2From(OUTSIDER.proxySource!), headers: [[header, kapi(CHANGED)], ...spoofed.map(([k, v]) => [k, v] as [string, string])] })).status;
      for (const spoofed of SPOOFED_EXTRACTION_HEADERS) expect(await connect([spoofed]), `${port} ${spoofed[0]}`).toBe(403);
      expect(await connect(SPOOFED_EXTRACTION_HEADERS), `${port} all`).toBe(403);
    }
  });

  it('with `matcher` dropped from Istio’s rendered resources (a lenient decoder), the fallback rules refuse every request naming a shoot, on both ports (fails closed)', async () => {
    const stripped = render.extensionConfigs.map((config) => {
      const { matcher: _dropped, shadow_matcher: _alsoDropped, ...rest } = getObject(config, 'typed_config') ?? {};
      return { ...config, typed_config: rest };
    });
    expect(JSON.stringify(stripped)).not.toContain('"matcher"');
    const strippedFiles = await EcdsFiles.create();
    await strippedFiles.write(stripped);
    const degraded = await startIstioGateway({ ...render, listeners: strippedFiles.listeners(render.listeners) }, { listenersViaFile: true });
    try {
      const cases = connectCases(HA_VPN_INDEX);
      for (const { port, header } of era.connectPorts) {
        const expectation = { oracle: everyNamedShootRefuses(cases, HEADERS), protectedHeaders: HEADERS, routeHeader: header, routeRegex: new RegExp(era.destinationRegex), clusters: degraded.clusters, reading: 'routable' as const };
        expect(await connectMismatches(degraded, port, cases, expectation), `port ${port}`).toEqual([]);
      }
    } finally {
      await degraded.stop();
      await strippedFiles.remove();
    }
  });

  it('an ACL change changes no CONNECT listener, only the changed shoot’s bucket: every open tunnel stays open, and new requests see the new rule', async () => {
    const client = FOO_CLIENT.proxySource!;
    const open = async (label: string, port: number, header: string, destination: string) => {
      const connection = await HeldConnection.open(label, await gateway.endpoint(port, 4), connectRequestBytes(client, destination, header));
      expect(await connection.connectStatus(), label).toBe('HTTP/1.1 200 OK');
      expect((await connection.identity())?.cluster, label).toBe(destination);
      return connection;
    };
    const tunnels = [
      await open(`${CHANGED} 8443`, 8443, 'X-Gardener-Destination', kapi(CHANGED)),
      await open(`${CHANGED} 8132`, 8132, 'Reversed-VPN', kapi(CHANGED)),
      await open(`${UNCHANGED} 8443`, 8443, 'X-Gardener-Destination', kapi(UNCHANGED)),
      await open(`${OPEN_SHOOT} 8132`, 8132, 'Reversed-VPN', kapi(OPEN_SHOOT)),
    ];
    try {
      // The owner narrows the ALLOW rule so that this client is no longer admitted.
      const after = await renderWithEcds(withRule(objects, CHANGED, { action: 'ALLOW', type: 'remote_ip', cidrs: ['198.18.0.0/15'] }));
      // The CONNECT listeners are unchanged (the shoot's own SNI chains change, and drain only its own TLS connections).
      // Sorted by port: Istio does not keep the listeners in one order from run to run.
      const connectListeners = (r: IstioRenderOutput) => era.connectPorts.map(({ port }) => r.listeners.find((l) => listenerPortOf(l) === port));
      expect(connectListeners(after).every((l) => l !== undefined)).toBe(true);
      expect(connectListeners(after)).toEqual(connectListeners(render));
      const before = new Map(render.extensionConfigs.map((c) => [getString(c, 'name'), JSON.stringify(c)]));
      const changed = after.extensionConfigs.filter((c) => before.get(getString(c, 'name')) !== JSON.stringify(c)).map((c) => getString(c, 'name'));
      const bucket = ecdsBucketOf(CHANGED, BUCKETS);
      expect(changed).toEqual([ecdsResourceName(bucket)]);
      // What istiod would push: the listeners of the new render, through LDS. Identical CONNECT listeners drain nothing.
      await gateway.replaceListeners({ ...after, listeners: files.listeners(after.listeners) });

      const reloads = await ecdsReloads(gateway.envoy);
      const sent = performance.now();
      await files.write(after.extensionConfigs.filter((c) => changed.includes(getString(c, 'name'))));
      let refusedAfterMs: number | undefined;
      const http = await gateway.endpoint(8443, 4);
      while (performance.now() - sent < RECONFIGURED_MS) {
        const result = await httpConnect({ ...http, proxyHeader: proxyV2From(client), headers: [['X-Gardener-Destination', kapi(CHANGED)]] });
        if (result.status === 403) {
          refusedAfterMs = performance.now() - sent;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(refusedAfterMs, 'new CONNECTs to the changed shoot refused').toBeDefined();
      // One subscription per resource name, shared by both CONNECT listeners: each changed resource reloads once.
      const deadline = performance.now() + RECONFIGURED_MS;
      while ((await ecdsReloads(gateway.envoy)) < reloads + changed.length && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await ecdsReloads(gateway.envoy)).toBe(reloads + changed.length);
      const other = await httpConnect({ ...http, proxyHeader: proxyV2From(client), headers: [['X-Gardener-Destination', kapi(UNCHANGED)]] });
      expect(other.status).toBe(200);
      // The 403 is the new rule's, not the guard's: a client inside the new range is admitted.
      const admittedNow = await httpConnect({ ...http, proxyHeader: proxyV2From('198.18.0.7'), headers: [['X-Gardener-Destination', kapi(CHANGED)]] });
      expect(admittedNow.status).toBe(200);
      // Past the harness's drain time: a drained chain would have closed them by now.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const closed = [];
      for (const tunnel of tunnels) if (!(await tunnel.echoes())) closed.push(tunnel.label);
      expect(closed).toEqual([]);
      console.log(`ECDS change: new CONNECTs refused ${refusedAfterMs?.toFixed(0)} ms after the files were written; ${closed.length} of ${tunnels.length} open tunnels closed`);

      // The control: had a CONNECT listener changed, the same wait would have seen its tunnels closed.
      const control = [await open(`${UNCHANGED} 8443 (control)`, 8443, 'X-Gardener-Destination', kapi(UNCHANGED)), await open(`${OPEN_SHOOT} 8443 (control)`, 8443, 'X-Gardener-Destination', kapi(OPEN_SHOOT))];
      tunnels.push(...control);
      // A changed HCM setting in the 8443 chain, as a listener-patched ACL change would be.
      const changedListener = structuredClone(after.listeners) as JsonObject[];
      const hcm = getObjectList(changedListener.find((l) => listenerPortOf(l) === 8443) ?? {}, 'filter_chains')
        .flatMap((chain) => getObjectList(chain, 'filters'))
        .map((f) => getObject(f, 'typed_config'))
        .find((config) => getString(config ?? {}, 'stat_prefix') !== undefined);
      expect(hcm).toBeDefined();
      if (hcm) hcm['stat_prefix'] = `${getString(hcm, 'stat_prefix')}_changed`;
      expect(JSON.stringify(changedListener)).not.toBe(JSON.stringify(after.listeners));
      await gateway.replaceListeners({ ...after, listeners: files.listeners(changedListener) });
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      for (const tunnel of control) expect(await tunnel.echoes(), tunnel.label).toBe(false);
    } finally {
      for (const tunnel of tunnels) tunnel.destroy();
    }
  });
});
