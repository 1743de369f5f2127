// Issue 30 point 2: a new shoot's API server is never reachable without its ACL. The creation
// sequence as gardenlet runs it, on a Gardener 1.145 seed: the Cluster, Infrastructure and
// Services first, then the acl Extension (lifecycle BeforeKubeAPIServer: gardenlet waits until it
// is Succeeded), the API server DNSRecords, and, once kube-apiserver is ready, its Gateways. A real
// kube-apiserver stores it all, the real gardener-resource-manager applies the per-shoot filters,
// the controller runs as the chart ships it, and each of the two gateways involved (the shoot's
// zonal one, and the default one with its wildcard host) is a real Envoy fed by Istio's own
// discovery server. What istiod does on a write (take the stored Gateways and EnvoyFilters) the
// test does from its own watches of the API server, as soon as a change arrives.
//
// Throughout, clients probe the shoot's three API server hosts with real TLS connections: one from
// an address the ACL refuses (every connection that reaches the API server is an unprotected
// moment) and one it admits (which tells when each chain is served); and Envoy's served config is
// read for chains of those hosts without the shoot's RBAC filter first.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AclController } from '../../src/actuator/controller.js';
import { ResilientInformer } from '../../src/kube/informer.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, getObject } from '../../src/kube/objects-client.js';
import { probeTls } from '../envoy/clients.js';
import type { JsonObject } from '../envoy/json.js';
import { ERAS } from '../istio/eras.js';
import { forApiServer, withoutServerFields } from '../istio/stored-fixture-objects.js';
import { startLiveAdsGateway, type LiveAdsGateway } from '../istio/live-ads-gateway.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway, shootHosts, type FixtureShoot } from '../istio/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithObjects, testLogger } from '../kube/kube-test-helpers.js';
import { startTestController } from '../actuator/seed-fixture.js';
import { CLIENTS, OUTSIDER, proxyHeader } from '../support/conformance-matrix.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const era = ERAS['v1.145'];
const NEW: FixtureShoot = {
  id: 'shoot--new--n',
  project: 'new',
  name: 'n',
  gateway: 'zonal',
  rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] },
  tlsTermination: false,
  apiserverIP: '240.0.0.99',
  egressCIDRs: ['198.18.99.0/24'],
};
const ALLOWED = CLIENTS[0]!; // 203.0.113.9
const HOSTS = shootHosts(NEW);
/** Host → the gateway whose Envoy serves its chain (the wildcard host: the default gateway, as Gardener 1.115+ does for zonal shoots). */
const PROBED: readonly { host: string; gateway: string }[] = [
  { host: HOSTS.internal, gateway: ingressGateway('zonal').namespace },
  { host: HOSTS.external, gateway: ingressGateway('zonal').namespace },
  { host: HOSTS.wildcard, gateway: ingressGateway('default').namespace },
];
const API_SERVER_KINDS = new Set(['Deployment', 'Service', 'Gateway', 'EnvoyFilter', 'Cluster', 'Infrastructure', 'Extension']);
const SNI_STAT_PREFIX = `gardener_acl_sni.${NEW.id}.`;
const API_SERVER_CLUSTER = `outbound|443||kube-apiserver.${NEW.id}.svc.cluster.local`;

const kindOf = (o: JsonObject) => String(o['kind']);
const metaOf = (o: JsonObject) => o['metadata'] as { name: string; namespace?: string };
const isNew = (o: JsonObject) => metaOf(o).namespace === NEW.id || (kindOf(o) === 'Cluster' && metaOf(o).name === NEW.id);
// Plutono comes long after the API server, and its Gateway needs a certificate the static Envoy lacks.
const isObservability = (o: JsonObject) => metaOf(o).name.startsWith('plutono');



interface FilterChain {
  filter_chain_match?: { server_names?: string[] };
  filters?: { name?: string; typed_config?: { stat_prefix?: string } }[];
}

/** Chains Envoy serves for one of `hosts`, each with whether the shoot's network RBAC filter comes before the TCP proxy. */
function chainsOf(dump: JsonObject, hosts: readonly string[]): { chain: string; protected: boolean }[] {
  const found: { chain: string; protected: boolean }[] = [];
  for (const config of (dump['configs'] as JsonObject[] | undefined) ?? []) {
    for (const entry of (config['dynamic_listeners'] as JsonObject[] | undefined) ?? []) {
      const listener = (entry['active_state'] as { listener?: { name?: string; filter_chains?: FilterChain[] } } | undefined)?.listener;
      for (const chain of listener?.filter_chains ?? []) {
        const names = chain.filter_chain_match?.server_names ?? [];
        if (!names.some((n) => hosts.includes(n))) continue;
        const filters = chain.filters ?? [];
        const rbac = filters.findIndex((f) => f.typed_config?.stat_prefix?.startsWith(SNI_STAT_PREFIX));
        const forward = filters.findIndex((f) => f.name === 'envoy.filters.network.tcp_proxy' || f.name === 'envoy.filters.network.http_connection_manager');
        found.push({ chain: `${listener?.name ?? '?'} [${names.join(',')}]`, protected: rbac >= 0 && (forward < 0 || rbac < forward) });
      }
    }
  }
  return found;
}

interface Probe {
  readonly at: number;
  readonly host: string;
  readonly admitted: boolean;
  /** The connection reached the new shoot's API server (before its Gateway, the wildcard host reaches the seed's nginx chain instead). */
  readonly reached: boolean;
}

describe('creation sequence of a new ACL shoot as gardenlet runs it (real kube-apiserver, resource manager, Istio and Envoy; chart defaults)', () => {
  let cp: ControlPlane;
  let grm: ResourceManager;
  let controller: AclController;
  const gateways = new Map<string, LiveAdsGateway>();
  const all = gardenerSeedObjects(era, [...FIXTURE_SHOOTS, NEW]).filter((o) => !(isNew(o) && isObservability(o)));
  const newGateways = all.filter((o) => isNew(o) && kindOf(o) === 'Gateway');
  const newExtension = all.find((o) => isNew(o) && kindOf(o) === 'Extension')!;
  const atStart = all.filter((o) => API_SERVER_KINDS.has(kindOf(o)) && !(isNew(o) && ['Gateway', 'Extension'].includes(kindOf(o))));

  const storedIstio = async () => {
    const lists = await Promise.all(['/apis/networking.istio.io/v1alpha3/envoyfilters', '/apis/networking.istio.io/v1beta1/gateways'].map((p) => listAll(cp.kubeConfig, p)));
    return [
      ...lists[0]!.items.map((f) => ({ ...withoutServerFields(f as Record<string, unknown>), apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter' }) as JsonObject),
      ...lists[1]!.items.map((g) => ({ ...withoutServerFields(g as Record<string, unknown>), apiVersion: 'networking.istio.io/v1beta1', kind: 'Gateway' }) as JsonObject),
    ];
  };
  const extensionState = async () =>
    (await getObject(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: NEW.id })) as
      | { metadata: { generation?: number }; status?: { lastOperation?: { state: string }; observedGeneration?: number; state?: { gatewayNamespaces?: string[] } } }
      | undefined;
  const succeeded = async () => {
    const e = await extensionState();
    return e?.status?.lastOperation?.state === 'Succeeded' && e.status.observedGeneration === e.metadata.generation ? e : undefined;
  };

  beforeAll(async () => {
    cp = await startWithObjects(atStart.map(forApiServer));
    grm = await startResourceManager(cp);
    controller = await startTestController(cp.kubeConfig);
    const stored = await storedIstio();
    const istioAtStart = [...all.filter((o) => !['EnvoyFilter', 'Gateway'].includes(kindOf(o))), ...stored];
    for (const key of ['default', 'zonal'] as const) {
      const gateway = ingressGateway(key);
      gateways.set(gateway.namespace, await startLiveAdsGateway({ objects: istioAtStart, proxy: { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) } }));
    }
  }, 300_000);

  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    for (const gateway of gateways.values()) await gateway.stop();
    await cp?.stop();
  });

  it('0 moments where a chain of the new shoot serves without its ACL, from the Extension to the Gateways and after', { timeout: 400_000 }, async () => {
    const extensionAt = performance.now();
    let gatewaysAt = Infinity;
    const probes: Probe[] = [];
    const dumpFindings: string[] = [];
    /** When Envoy first served a chain of each host (performance.now()), protected or not. */
    const chainSeenAt = new Map<string, number>();
    /** When the bridge first handed Istio a Gateway, and a per-shoot filter, of the new shoot. */
    const pushedAt = new Map<string, number>();
    let running = true;
    // istiod's part: the stored Gateways and EnvoyFilters, handed to Istio as a change arrives;
    // only the kinds that changed (a Gateway is handed in milliseconds, the seed's EnvoyFilters in
    // about a second), and changes during a hand-over together right after it.
    let handing: Promise<void> | undefined;
    const dirty = new Set<'EnvoyFilter' | 'Gateway'>();
    const watched = { EnvoyFilter: '/apis/networking.istio.io/v1alpha3/envoyfilters', Gateway: '/apis/networking.istio.io/v1beta1/gateways' } as const;
    const apiVersions = { EnvoyFilter: 'networking.istio.io/v1alpha3', Gateway: 'networking.istio.io/v1beta1' } as const;
    const kinds = ['Gateway', 'EnvoyFilter'] as const;
    const informers = Object.fromEntries(
      kinds.map((kind) => [
        kind,
        new ResilientInformer<JsonObject & { metadata: { name: string; namespace?: string } }>({
          kubeConfig: cp.kubeConfig,
          path: watched[kind],
          parse: (raw) => raw as JsonObject & { metadata: { name: string; namespace?: string } },
          onChange: () => handOver(kind),
          logger: testLogger().child({ component: 'istiod-standin' }),
        }),
      ]),
    ) as Record<(typeof kinds)[number], ResilientInformer<JsonObject & { metadata: { name: string; namespace?: string } }>>;
    const handOver = (kind: (typeof kinds)[number]): void => {
      dirty.add(kind);
      handing ??= (async () => {
        while (dirty.size > 0) {
          const now = [...dirty];
          dirty.clear();
          const objects = now.flatMap((k) => informers[k].list().map((o) => ({ ...withoutServerFields(o), apiVersion: apiVersions[k], kind: k }) as JsonObject));
          for (const o of objects) {
            const what = kindOf(o) === 'Gateway' && metaOf(o).namespace === NEW.id ? 'Gateway' : metaOf(o).name === `acl-${NEW.id}` ? 'filter' : undefined;
            if (what !== undefined && !pushedAt.has(what)) pushedAt.set(what, performance.now());
          }
          await Promise.all([...gateways.values()].map((g) => g.replaceIstioConfig(objects, now)));
        }
        handing = undefined;
      })();
    };
    await Promise.all(kinds.map((k) => informers[k].start()));
    const prober = (async () => {
      while (running) {
        for (const { host, gateway } of PROBED) {
          const live = gateways.get(gateway)!;
          const target = await live.endpoint(9443, 4);
          for (const client of [OUTSIDER, ALLOWED]) {
            const { reached } = await probeTls({ ...target, sni: host, proxyHeader: proxyHeader(client), timeoutMs: 2_000 });
            probes.push({ at: performance.now(), host, admitted: client === ALLOWED, reached: reached?.cluster === API_SERVER_CLUSTER });
          }
        }
        for (const [namespace, live] of gateways) {
          const now = performance.now();
          for (const { chain, protected: safe } of chainsOf(await live.configDump(), PROBED.map((p) => p.host))) {
            if (!chainSeenAt.has(chain)) chainSeenAt.set(chain, now);
            if (!safe) dumpFindings.push(`${Math.round(now - gatewaysAt)} ms ${namespace} ${chain}`);
          }
        }
        await sleep(20);
      }
    })();

    await createObject(cp.kubeConfig, forApiServer(newExtension));
    // gardenlet waits for an extension that reconciles before kube-apiserver.
    await eventually('the new Extension Succeeded', succeeded, 120_000);
    const extensionSucceededMs = performance.now() - extensionAt;
    // The API server's DNS records (after its Service is ready), then, once kube-apiserver rolled
    // out, its Gateways: here at once, leaving the controller no time to read the records first.
    for (const suffix of ['internal', 'external'] as const) {
      await createObject(cp.kubeConfig, {
        apiVersion: 'extensions.gardener.cloud/v1alpha1',
        kind: 'DNSRecord',
        metadata: { name: `${NEW.name}-${suffix}`, namespace: NEW.id },
        spec: { type: 'local', name: HOSTS[suffix], recordType: 'A', values: ['198.18.10.2'] },
      });
    }
    // kube-apiserver takes minutes to roll out: Istio is idle when the Gateways come.
    await eventually('Istio up to date', () => handing === undefined, 30_000);
    gatewaysAt = performance.now();
    for (const gateway of newGateways) await createObject(cp.kubeConfig, forApiServer(gateway));
    // Every host is served to the admitted client.
    const servedAt = new Map<string, number>();
    await eventually('every chain served', () => {
      for (const p of probes) if (p.admitted && p.reached && !servedAt.has(p.host)) servedAt.set(p.host, p.at);
      return servedAt.size === PROBED.length;
    }, 120_000);
    // The controller replaces the filters written ahead with those for the Gateways it now sees.
    await eventually('the Extension records the gateways that serve it', async () => {
      const e = await succeeded();
      return JSON.stringify(e?.status?.state?.gatewayNamespaces) === JSON.stringify(['istio-ingress', 'istio-ingress--z1']);
    }, 120_000);
    await sleep(5_000);
    running = false;
    await prober;
    await Promise.all(kinds.map((k) => informers[k].stop()));
    await handing;

    const exposed = probes.filter((p) => !p.admitted && p.reached);
    const servedMs = [...servedAt.entries()].map(([host, at]) => `${host} ${Math.round(at - gatewaysAt)} ms`);
    const sinceGateways = (at: number | undefined) => (at === undefined ? 'never' : `${Math.round(at - gatewaysAt)} ms`);
    console.log(
      `[creation] handed to Istio: the filter ${sinceGateways(pushedAt.get('filter'))}, the Gateways ${sinceGateways(pushedAt.get('Gateway'))}; ` +
        `chains first in Envoy's config: ${[...chainSeenAt.entries()].map(([chain, at]) => `${chain} ${sinceGateways(at)}`).join(', ')} (all relative to the Gateways' creation)`,
    );
    const lastExposedMs = exposed.length === 0 ? 0 : Math.round(Math.max(...exposed.map((p) => p.at)) - gatewaysAt);
    console.log(
      `[creation] Extension Succeeded ${Math.round(extensionSucceededMs)} ms after it was created; after the Gateways were created: chains served at ${servedMs.join(', ')}; ` +
        `refused client reached the API server in ${exposed.length} of ${probes.filter((p) => !p.admitted).length} probes (last ${lastExposedMs} ms after the Gateways); ${dumpFindings.length} served configs with an unprotected chain`,
    );
    expect(dumpFindings).toEqual([]);
    expect(exposed.map((p) => `${Math.round(p.at - gatewaysAt)} ms ${p.host}`)).toEqual([]);
    // The probes covered the whole window: each host was probed, refused, after it was served.
    for (const { host } of PROBED) expect(probes.some((p) => p.host === host && !p.admitted && p.at > (servedAt.get(host) ?? Infinity))).toBe(true);
  });
});
