// The matcher form of the combined CONNECT filters through Istio's own config generation: the
// seed's OperatorConfiguration selects `combinedForm: matcher`, Istio renders every ingress
// gateway, and
// - the running Envoy's config dump holds, first on every protected CONNECT listener, the
//   extraction (header_to_metadata with its regex rewrite), the target headers (header_mutation)
//   and one RBAC filter per protected header and shard whose `matcher` holds an exact-match map
//   over every ACL shoot; no RBAC filter there is empty (a field Istio dropped would show here);
// - the conformance matrix is decided as docs/design.md section 3 says, reading "targets S" as the
//   matcher form does (a routable first value of a protected header; docs/operators/combined-forms.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { CANONICAL_ADDRESS, HEADER_TO_METADATA_TYPE, MATCHER_DROPPED_POLICY, ROUTABLE_DESTINATION } from '../../src/rbac/connect-matcher.js';
import { HTTP_RBAC_TYPE } from '../../src/rbac/envoy-rbac-types.js';
import { getObject, getObjectList, getString, type JsonObject } from '../envoy/json.js';
import { connectCases, connectExpected, connectMismatches } from '../support/conformance-matrix.js';
import { dumpedListeners, listenerHttpFilters, matcherMapKeys } from './envoy-config-dump.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { fixtureOracle } from './fixture-oracle.js';
import { renderGatewayWithIstio } from './istio-render.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { generateForSeed, istioInputObjects, withMatcherForm } from './istio-rendered-seed.js';
import { FIXTURE_SHOOTS, INGRESS_GATEWAYS, gardenerSeedObjects, gatewayLabels, type GatewayKey } from './seed-fixture.js';

const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const HA_VPN_INDEX = 1;
const ACL_SHOOTS = FIXTURE_SHOOTS.filter((s) => s.rule !== undefined).map((s) => s.id).sort();


describe(`the matcher form through Istio's rendering (Gardener ${era.name} seed)`, () => {
  const gateways = new Map<GatewayKey, IstioGateway>();
  let oracle: ReturnType<typeof fixtureOracle>;

  beforeAll(async () => {
    const objects = withMatcherForm(gardenerSeedObjects(era));
    oracle = fixtureOracle(objects);
    const generated = generateForSeed(objects);
    for (const gateway of INGRESS_GATEWAYS) {
      const render = await renderGatewayWithIstio(istioInputObjects(objects, generated), { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) });
      gateways.set(gateway.key, await startIstioGateway(render));
    }
  });
  afterAll(async () => {
    await Promise.allSettled([...gateways.values()].map((g) => g.stop()));
  });

  it.each(INGRESS_GATEWAYS.map((g) => [g.key] as const))('the %s gateway’s Envoy holds the extraction and a non-empty matcher on every protected CONNECT listener', async (key) => {
    const gateway = gateways.get(key)!;
    const response = await fetch(`${gateway.envoy.adminUrl}/config_dump`, { signal: AbortSignal.timeout(10_000) });
    const dump = (await response.json()) as JsonObject;
    const problems: string[] = [];
    for (const { port } of era.connectPorts) {
      const name = gateway.listenersByPort.get(port);
      const listener = dumpedListeners(dump).find((l) => getString(l, 'name') === name);
      if (!listener) {
        problems.push(`${port}: no listener in the config dump`);
        continue;
      }
      const filters = listenerHttpFilters(listener);
      const typeOf = (f: JsonObject | undefined) => getString(getObject(f ?? {}, 'typed_config') ?? {}, '@type');
      const [address, extract, target] = filters;
      if (!typeOf(address)?.endsWith('header_mutation.v3.HeaderMutation')) problems.push(`${port}: first filter is ${typeOf(address)}, not the client addresses`);
      if (typeOf(extract) !== HEADER_TO_METADATA_TYPE) problems.push(`${port}: second filter is ${typeOf(extract)}, not the extraction`);
      const rules = getObjectList(getObject(extract ?? {}, 'typed_config') ?? {}, 'request_rules');
      const regexes = rules.map((r) => getString(getObject(getObject(getObject(r, 'on_header_present') ?? {}, 'regex_value_rewrite') ?? {}, 'pattern') ?? {}, 'regex'));
      const wanted = [...defaultOperatorConfig().protectedHeaders.map(() => ROUTABLE_DESTINATION), CANONICAL_ADDRESS, CANONICAL_ADDRESS];
      if (JSON.stringify(regexes) !== JSON.stringify(wanted)) problems.push(`${port}: extraction rules ${JSON.stringify(regexes)}`);
      if (!typeOf(target)?.endsWith('header_mutation.v3.HeaderMutation')) problems.push(`${port}: third filter is ${typeOf(target)}`);
      const rbac = filters.filter((f) => typeOf(f) === HTTP_RBAC_TYPE);
      if (rbac.length === 0) problems.push(`${port}: no RBAC filter`);
      const held = new Set<string>();
      for (const f of rbac) {
        const config = getObject(f, 'typed_config') ?? {};
        // The lookup decides; beside it only the fail-closed fallback, which Envoy ignores while the matcher is there.
        if (!('matcher' in config)) problems.push(`${port}: ${getString(f, 'name')} has no matcher`);
        const fallback = Object.keys(getObject(getObject(config, 'rules') ?? {}, 'policies') ?? {});
        if (fallback.join() !== MATCHER_DROPPED_POLICY) problems.push(`${port}: ${getString(f, 'name')} has rules ${fallback.join()}, not the fallback`);
        for (const id of matcherMapKeys(config['matcher'])) held.add(id);
      }
      if ([...held].sort().join() !== ACL_SHOOTS.join()) problems.push(`${port}: matchers hold ${[...held].sort().join()}, want ${ACL_SHOOTS.join()}`);
    }
    expect(problems).toEqual([]);
  });

  const targets = INGRESS_GATEWAYS.flatMap((g) => era.connectPorts.map((p) => [g.key, p.port, p.header] as const));
  it.each(targets)('HTTP CONNECT on the %s gateway’s %i (%s): every header set from every client is decided as docs/design.md says', async (key, port, routeHeader) => {
    const gateway = gateways.get(key)!;
    const expectation = {
      oracle: oracle.shoots,
      protectedHeaders: defaultOperatorConfig().protectedHeaders,
      routeHeader,
      routeRegex: new RegExp(era.destinationRegex),
      clusters: gateway.clusters,
      reading: 'routable' as const,
    };
    const denied = async () => [...(await gateway.envoy.stats('^http\\..*\\.rbac\\.denied$')).values()].reduce((a, b) => a + b, 0);
    const before = await denied();
    const cases = connectCases(HA_VPN_INDEX);
    expect(await connectMismatches(gateway, port, cases, expectation)).toEqual([]);
    const expectedDenials = cases.filter(({ client, headers }) => !connectExpected(client, headers, expectation)).length;
    expect(expectedDenials).toBeGreaterThan(50);
    expect(await denied()).toBe(before + expectedDenials);
  });
});
