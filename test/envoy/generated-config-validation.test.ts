// Every RBAC filter the generator emits, on every path, is accepted by a real Envoy
// (`envoy --mode validate`, strict proto parsing), embedded in a minimal listener of its kind; so
// are the tunnel hop's entry filters, door clusters and internal listeners, as they are.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { renderSeed } from '../../src/render/seed-render.js';
import { buildEcdsConnectObjects } from '../../src/rbac/connect-matcher-ecds.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { testSeed } from '../support/test-seed.js';
import { validateConfig } from './envoy-process.js';
import { INTERNAL_LISTENER_EXTENSION, ISTIO_PROXY_RUNTIME } from './gardener-gateway.js';
import type { JsonObject } from './json.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const TCP_PROXY_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
const ROUTER_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

function listener(index: number, filters: unknown[]): JsonObject {
  return {
    name: `l${index}`,
    address: { socket_address: { address: '127.0.0.1', port_value: 20000 + index } },
    filter_chains: [{ filters: filters as JsonObject[] }],
  };
}

function tcpProxy(): JsonObject {
  return { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY_TYPE, stat_prefix: 'tcp', cluster: 'upstream' } };
}

/** Clusters the generated objects add (the tunnel hop's doors), by listenersFor. */
const addedClusters: JsonObject[] = [];

/** Listeners that carry each generated filter where Envoy would run it, and the listeners generated as they are. */
function listenersFor(filters: readonly { spec: { configPatches: readonly { applyTo: string; patch: { value: unknown } }[] } }[], legacyChains: unknown[][]): JsonObject[] {
  const listeners: JsonObject[] = [];
  addedClusters.length = 0;
  for (const f of filters) {
    for (const patch of f.spec.configPatches) {
      // Every gateway gets the same doors and hop listeners: one Envoy takes each name once.
      const name = (patch.patch.value as { name?: unknown }).name;
      if (patch.applyTo === 'CLUSTER') {
        if (!addedClusters.some((c) => c['name'] === name)) addedClusters.push(patch.patch.value as JsonObject);
      } else if (patch.applyTo === 'LISTENER') {
        if (!listeners.some((l) => l['name'] === name)) listeners.push(patch.patch.value as JsonObject);
      }
      else if (patch.applyTo === 'NETWORK_FILTER') listeners.push(listener(listeners.length, [patch.patch.value, tcpProxy()]));
      else
        listeners.push(
          listener(listeners.length, [
            {
              name: 'envoy.filters.network.http_connection_manager',
              typed_config: {
                '@type': HCM_TYPE,
                stat_prefix: 'connect',
                route_config: { virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { connect_matcher: {} }, route: { cluster: 'upstream' } }] }] },
                http_filters: [patch.patch.value, { name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER_TYPE } }],
              },
            },
          ]),
        );
    }
  }
  for (const chain of legacyChains) listeners.push(listener(listeners.length, chain));
  return listeners;
}

const loopbackCluster = (name: string, extra: JsonObject = {}): JsonObject => ({
  name,
  connect_timeout: '1s',
  load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 1 } } } }] }] },
  ...extra,
});

function bootstrap(listeners: JsonObject[], runtime: 'istio' | 'envoy-default' = 'istio'): JsonObject {
  return {
    // The ECDS listener parts take their bucket configs over ADS, as from istiod (validate mode connects to nothing).
    node: { id: 'validate', cluster: 'validate' },
    dynamic_resources: { ads_config: { api_type: 'GRPC', transport_api_version: 'V3', grpc_services: [{ envoy_grpc: { cluster_name: 'xds' } }] } },
    static_resources: {
      listeners,
      clusters: [
        ...addedClusters,
        loopbackCluster('upstream'),
        loopbackCluster('xds', { typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } } } }),
      ],
    },
    ...(runtime === 'istio' ? { layered_runtime: ISTIO_PROXY_RUNTIME } : {}),
    // As Istio's gateway bootstrap: the tunnel hop's internal listeners need it.
    bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION],
  };
}

async function expectValid(listeners: JsonObject[], runtime: 'istio' | 'envoy-default' = 'istio'): Promise<void> {
  expect(listeners.length).toBeGreaterThan(0);
  const result = await validateConfig(bootstrap(listeners, runtime));
  expect(result.output).not.toMatch(/\[(error|critical)\]/);
  expect(result.ok, result.output.slice(-2000)).toBe(true);
}

describe('Envoy accepts every generated RBAC config', () => {
  it.each(['examples/seed', 'test/golden/gardener-1.110/input', 'test/golden/gardener-1.145/input'])('%s', async (dir) => {
    const { objects } = await loadDocuments([path.join(ROOT, dir)]);
    const rendered = renderSeed(objects);
    const legacyChains = rendered.patches.flatMap((p) => {
      const target = objects.map((o) => o.object as { kind?: string; metadata?: { name?: string; namespace?: string } })
        .find((o) => o.kind === 'EnvoyFilter' && o.metadata?.name === p.metadata.name && o.metadata.namespace === p.metadata.namespace);
      const patched = jsonpatch.applyPatch(structuredClone(target), [...p.spec.operations]).newDocument as { spec: { configPatches: { patch: { value: { filters: unknown[] } } }[] } };
      return patched.spec.configPatches.map((c) => c.patch.value.filters);
    });
    expect(legacyChains.length).toBe(dir.includes('1.145') ? 0 : 1);
    await expectValid(listenersFor(rendered.envoyFilters, legacyChains));
  });

  it('every rule shape: actions, types, IPv4, IPv6, mapped, ::/0, empty always-allowed, legacy IDs', async () => {
    const shapes = [
      { action: 'ALLOW', type: 'remote_ip', cidrs: ['0.0.0.0/0'] },
      { action: 'DENY', type: 'direct_remote_ip', cidrs: ['::/0', '10.0.0.0/8'] },
      { action: 'allow', type: 'source_ip', cidrs: ['::ffff:203.0.113.0/120', '2001:db8::1'] },
      { action: 'deny', type: 'REMOTE_IP', cidrs: ['203.0.113.7', '::/1'] },
    ];
    const { seed } = testSeed(
      shapes.flatMap((rule, i) => [
        { id: `shoot--p--s${i}`, rule, always: i % 2 ? [] : ['10.250.0.0/16', '2001:db8:ffff::/48'] },
        { id: `shoot-legacy${i}--s${i}`, rule },
      ]),
      { observabilityDomain: 'ingress.a-very-long-seed-name.region-1.provider.example.com' },
    );
    await expectValid(listenersFor(allEnvoyFilters(buildSeedEnvoyFilters(seed)), []));
  });

  it('needs no raised RE2 limit: longest technical IDs and a long ingress domain under Envoy defaults', async () => {
    const longest = `shoot--${'p'.repeat(10)}--${'s'.repeat(63 - 19)}`;
    expect(longest).toHaveLength(63);
    const { seed } = testSeed([{ id: longest, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }], {
      observabilityDomain: 'ingress.a-very-long-seed-name-for-testing.region-1.cloud-provider.example.com',
    });
    await expectValid(listenersFor(allEnvoyFilters(buildSeedEnvoyFilters(seed)), []), 'envoy-default');
  });

  it('the matcher form (listener patches and ECDS bucket resources), every rule shape, under Envoy defaults', async () => {
    const shapes = [
      { action: 'ALLOW', type: 'remote_ip', cidrs: ['0.0.0.0/0', '::/0'] },
      { action: 'DENY', type: 'direct_remote_ip', cidrs: ['::/0', '10.0.0.0/8'] },
      { action: 'allow', type: 'source_ip', cidrs: ['::ffff:203.0.113.0/120', '2001:db8::1'] },
      { action: 'deny', type: 'REMOTE_IP', cidrs: ['203.0.113.7', '::/1'], mode: 'audit' },
    ];
    const { seed } = testSeed(
      shapes.flatMap((rule, i) => [
        { id: `shoot--p--s${i}`, rule, always: i % 2 ? [] : ['10.250.0.0/16', '2001:db8:ffff::/48'] },
        { id: `shoot-legacy${i}--s${i}`, rule },
      ]),
      { operator: { combinedForm: 'matcher' } },
    );
    const listenerForm = buildSeedEnvoyFilters(seed).combined;
    // The listener form next to the default form's bucket resources, under Envoy's defaults.
    const ecdsBuckets = buildEcdsConnectObjects(seed, 3).filter((o) => o.spec.configPatches.some((p) => p.applyTo === 'EXTENSION_CONFIG'));
    expect(ecdsBuckets).toHaveLength(3);
    await expectValid(listenersFor([...listenerForm, ...ecdsBuckets], []), 'envoy-default');
  });

  it('rejects what Envoy rejects (the check can fail)', async () => {
    const bad = listener(0, [{ name: 'x', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC', stat_prefix: 'nope' } }]);
    expect((await validateConfig(bootstrap([bad]))).ok).toBe(false);
  });
});
