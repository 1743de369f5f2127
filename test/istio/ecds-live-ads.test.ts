// "No drain on ACL changes", proven live: a real Envoy takes its whole configuration over delta
// ADS from Istio's own discovery server (tools/istio-render `serve`: pilot's xDS server, push,
// debounce and ECDS generator, on loopback), serving the default gateway of a Gardener 1.145 seed
// with the combined CONNECT policies in the matcher form. Tunnels to several shoots are held open
// on both CONNECT ports, one shoot's owner narrows its ALLOW rule, and the new EnvoyFilters go
// into Istio's config store, from where Istio pushes as after an API server write.
// - ECDS delivery (listeners reference the policies through config_discovery; the policies are
//   EXTENSION_CONFIG patches): Envoy gets no changed listener, new CONNECTs see the new rule, and
//   no open tunnel is closed.
// - Listener delivery (the policies patched into the HTTP connection manager; the control): the
//   same change changes both CONNECT listeners, and every open tunnel is closed at the end of the
//   drain time, which shows the count can fail.
// Both on Envoy 1.40 and 1.37 (Istio 1.29's). Numbers are logged for docs/developers/envoy-listener-updates.md.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { ecdsResourceName } from '../../src/rbac/connect-matcher-ecds.js';
import { HTTP_RBAC_TYPE } from '../../src/rbac/envoy-rbac-types.js';
import { httpConnect, proxyV2From } from '../envoy/clients.js';
import { ecdsReloads } from '../envoy/ecds-files.js';
import { CONFORMANCE_ENVOY_VERSIONS } from '../envoy/envoy-binary.js';
import { HeldConnection, connectRequestBytes } from '../envoy/held-connection.js';
import { getObject, getObjectList, getString, type JsonObject } from '../envoy/json.js';
import { CLIENTS } from '../support/conformance-matrix.js';
import { kapi } from '../support/decide.js';
import { dumpedEcdsFilters, dumpedListenerVersions, dumpedListeners, listenerHttpFilters, matcherMapKeys } from './envoy-config-dump.js';
import { ERAS, ERA_NAMES } from './eras.js';
import { generateForSeed, istioInputObjects, istioInputWithEcds, withMatcherForm, withRule } from './istio-rendered-seed.js';
import { msUntilStatus, startLiveAdsGateway, type LiveAdsGateway } from './live-ads-gateway.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway } from './seed-fixture.js';

const era = ERAS[ERA_NAMES[ERA_NAMES.length - 1]!];
const BUCKETS = 4;
const HEADERS = defaultOperatorConfig().protectedHeaders;
const CHANGED = 'shoot--p--foo';
const UNCHANGED = 'shoot--bar--a';
/** The owner narrows the ALLOW rule so that FOO_CLIENT is no longer admitted. */
const NARROWED = { action: 'ALLOW', type: 'remote_ip', cidrs: ['198.18.0.0/15'] };
const INSIDE_NARROWED = '198.18.0.7';
const FOO_CLIENT = CLIENTS.find((c) => c.label === 'shoot foo range, IPv4')!.proxySource!;
const XSHOOT_CLIENT = CLIENTS.find((c) => c.label === 'xshoot range via source_ip')!.proxySource!;
const ACL_SHOOTS = FIXTURE_SHOOTS.filter((s) => s.rule !== undefined).map((s) => s.id).sort();
const RECONFIGURED_MS = 20_000;
/** Envoy runs with --drain-time-s 1: a drained chain has closed its connections well before this. */
const PAST_DRAIN_MS = 3_000;

/** Tunnels held open across the change: five shoots (with and without ACL, the changed one), both ports. */
const TUNNELS: readonly { shoot: string; port: number; client: string }[] = [
  { shoot: CHANGED, port: 8443, client: FOO_CLIENT },
  { shoot: CHANGED, port: 8132, client: FOO_CLIENT },
  { shoot: UNCHANGED, port: 8443, client: FOO_CLIENT },
  { shoot: UNCHANGED, port: 8132, client: FOO_CLIENT },
  { shoot: 'shoot--p--foo-bar', port: 8132, client: FOO_CLIENT },
  { shoot: 'shoot--x-bar--a', port: 8443, client: FOO_CLIENT },
  { shoot: 'shoot--xshoot-q--foo', port: 8132, client: XSHOOT_CLIENT },
];

const LISTENER_STATS = ['listener_manager.lds.update_success', 'listener_manager.listener_modified'] as const;

interface Delivery {
  readonly name: string;
  readonly ecds: boolean;
  /** What Istio reads for the seed's Gardener objects. */
  istioInput(objects: readonly JsonObject[]): JsonObject[];
}

const DELIVERIES: readonly Delivery[] = [
  { name: 'ECDS', ecds: true, istioInput: (objects) => istioInputWithEcds(objects, BUCKETS) },
  { name: 'listener (control)', ecds: false, istioInput: (objects) => istioInputObjects(objects, generateForSeed(objects)) },
];

function headerOf(port: number): string {
  const header = era.connectPorts.find((p) => p.port === port)?.header;
  if (header === undefined) throw new Error(`the ${era.name} fixture has no CONNECT port ${port}`);
  return header;
}

async function listenerStats(gateway: LiveAdsGateway): Promise<Record<(typeof LISTENER_STATS)[number], number>> {
  const [ldsSuccess, modified] = await Promise.all(LISTENER_STATS.map((name) => gateway.envoy.stat(name)));
  return { 'listener_manager.lds.update_success': ldsSuccess!, 'listener_manager.listener_modified': modified! };
}

describe.each(CONFORMANCE_ENVOY_VERSIONS)(`live ADS from Istio's discovery server (Gardener ${era.name} seed, default gateway), Envoy %s`, (envoyVersion) => {
  const objects = withMatcherForm(gardenerSeedObjects(era));
  const gatewayProxy = { namespace: ingressGateway('default').namespace, labels: gatewayLabels(era, ingressGateway('default')) };

  describe.each(DELIVERIES)('$name delivery', (delivery) => {
    let gateway: LiveAdsGateway;
    beforeAll(async () => {
      gateway = await startLiveAdsGateway({ objects: delivery.istioInput(objects), proxy: gatewayProxy, envoyVersion, drainTimeSeconds: 1 });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it('Envoy holds the combined policies Istio served: a non-empty RBAC matcher over every ACL shoot, on both CONNECT listeners', async () => {
      // Every cluster of the static render arrived (none dropped for want of an upstream), plus the xDS cluster.
      expect(await gateway.envoy.stat('cluster_manager.active_clusters')).toBe(gateway.plan.upstreams.length + gateway.plan.keptClusters.length + 1);
      expect(gateway.serveLog()).not.toMatch(/cluster .*: dropped/);
      const dump = await gateway.configDump();
      const ecds = dumpedEcdsFilters(dump);
      const held = new Set<string>();
      if (delivery.ecds) {
        const names = Array.from({ length: BUCKETS }, (_, b) => ecdsResourceName(b));
        expect([...ecds.keys()].sort()).toEqual([...names].sort());
        for (const [name, typed] of ecds) {
          expect(getString(typed, '@type'), name).toBe(HTTP_RBAC_TYPE);
          // The guard against a missing extraction is always there; the lookup only in buckets with shoots.
          expect(getObjectList(getObject(getObject(typed, 'matcher') ?? {}, 'matcher_list') ?? {}, 'matchers'), name).toHaveLength(HEADERS.length);
          for (const id of matcherMapKeys(typed['matcher'])) held.add(id);
        }
      } else {
        expect(ecds.size).toBe(0);
      }
      for (const { port } of era.connectPorts) {
        const listener = dumpedListeners(dump).find((l) => getString(l, 'name') === gateway.listenersByPort.get(port));
        expect(listener, `listener on ${port}`).toBeDefined();
        const filters = listenerHttpFilters(listener ?? {});
        const discovered = filters.filter((f) => getObject(f, 'config_discovery') !== undefined).length;
        expect(discovered, `config_discovery filters on ${port}`).toBe(delivery.ecds ? BUCKETS * HEADERS.length : 0);
        for (const f of filters.filter((f) => getString(getObject(f, 'typed_config') ?? {}, '@type') === HTTP_RBAC_TYPE)) {
          for (const id of matcherMapKeys(getObject(f, 'typed_config')?.['matcher'])) held.add(id);
        }
      }
      expect([...held].sort()).toEqual(ACL_SHOOTS);
    });

    it(delivery.ecds ? 'an ACL change reaches new CONNECTs without a changed listener, and closes no open tunnel' : 'the control: the same change through the listeners closes every open tunnel at the end of the drain', async () => {
      const tunnels: HeldConnection[] = [];
      try {
        for (const { shoot, port, client } of TUNNELS) {
          const endpoint = await gateway.endpoint(port, 4);
          const tunnel = await HeldConnection.open(`${shoot} ${port}`, endpoint, connectRequestBytes(client, kapi(shoot), headerOf(port)));
          tunnels.push(tunnel);
          expect(await tunnel.connectStatus(), tunnel.label).toBe('HTTP/1.1 200 OK');
          expect((await tunnel.identity())?.cluster, tunnel.label).toBe(kapi(shoot));
        }
        const statsBefore = await listenerStats(gateway);
        const reloadsBefore = await ecdsReloads(gateway.envoy);
        const versionsBefore = dumpedListenerVersions(await gateway.configDump());

        const http = await gateway.endpoint(8443, 4);
        const connectTo = (client: string, shoot: string) => httpConnect({ ...http, proxyHeader: proxyV2From(client), headers: [['X-Gardener-Destination', kapi(shoot)]] });
        expect((await connectTo(FOO_CLIENT, CHANGED)).status).toBe(200);

        const sent = performance.now();
        const applied = await gateway.replaceEnvoyFilters(delivery.istioInput(withRule(objects, CHANGED, NARROWED)));
        expect(applied).toBeGreaterThan(0);
        const refusedAfterMs = await msUntilStatus(sent, 403, () => connectTo(FOO_CLIENT, CHANGED), RECONFIGURED_MS);
        expect(refusedAfterMs, 'new CONNECTs to the changed shoot refused').toBeDefined();
        // The 403 is the new rule's: a client inside the new range is admitted, other shoots still admit the old client.
        expect((await connectTo(INSIDE_NARROWED, CHANGED)).status).toBe(200);
        expect((await connectTo(FOO_CLIENT, UNCHANGED)).status).toBe(200);

        await new Promise((resolve) => setTimeout(resolve, PAST_DRAIN_MS));
        const closed: string[] = [];
        for (const tunnel of tunnels) if (!(await tunnel.echoes())) closed.push(tunnel.label);
        const closedAfterMs = tunnels.flatMap((t) => (t.closedAt === undefined ? [] : [t.closedAt - sent]));
        const statsAfter = await listenerStats(gateway);
        const reloads = (await ecdsReloads(gateway.envoy)) - reloadsBefore;
        const versionsAfter = dumpedListenerVersions(await gateway.configDump());
        const changedListeners = [...versionsAfter].filter(([name, version]) => versionsBefore.get(name) !== version).map(([name]) => name).sort();
        console.log(
          `live ADS, Envoy ${envoyVersion}, ${delivery.name} delivery: ${applied} EnvoyFilters changed in Istio's store; ` +
            `new CONNECTs refused ${refusedAfterMs?.toFixed(0)} ms after the store was written; ${closed.length} of ${tunnels.length} open tunnels closed ` +
            `within ${PAST_DRAIN_MS / 1000} s after that (drain time 1 s)${closedAfterMs.length > 0 ? `, ${Math.min(...closedAfterMs).toFixed(0)}–${Math.max(...closedAfterMs).toFixed(0)} ms after the write` : ''}; ECDS reloads ${reloads}; changed listeners ${changedListeners.join(', ')}; ` +
            `listener stats before ${JSON.stringify(statsBefore)} after ${JSON.stringify(statsAfter)}`,
        );

        // Istio pushed listeners either way (an EnvoyFilter changed). The changed shoot's per-shoot
        // SNI filter changes its own chains on 9443 (draining only its TLS connections) in both.
        const connectListeners = era.connectPorts.map(({ port }) => gateway.listenersByPort.get(port) ?? `? ${port}`);
        const sniListener = gateway.listenersByPort.get(9443) ?? '? 9443';
        expect(statsAfter['listener_manager.lds.update_success']).toBeGreaterThan(statsBefore['listener_manager.lds.update_success']);
        expect(statsAfter['listener_manager.listener_modified'] - statsBefore['listener_manager.listener_modified']).toBe(changedListeners.length);
        if (delivery.ecds) {
          // With ECDS the CONNECT listeners Istio sent were identical: Envoy kept them, and reloaded only the changed bucket's resource, once for every filter that names it.
          expect(changedListeners).toEqual([sniListener]);
          expect(reloads).toBe(1);
          expect(closed).toEqual([]);
        } else {
          // Through the listeners, both CONNECT listeners changed, and every tunnel on them was closed.
          expect(changedListeners).toEqual([...connectListeners, sniListener].sort());
          expect(reloads).toBe(0);
          expect(closed.sort()).toEqual(tunnels.map((t) => t.label).sort());
        }
      } finally {
        for (const tunnel of tunnels) tunnel.destroy();
      }
    });
  });
});
