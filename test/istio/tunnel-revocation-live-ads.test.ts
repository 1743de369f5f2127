// Revocation, proven live (README "Revocation"): with `tunnelRevocation: hop` and the ECDS form, a
// real Envoy takes its whole configuration over delta ADS from Istio's own discovery server
// (live-ads-gateway.ts) for the default gateway of a Gardener 1.145 seed. Tunnels are held open to
// the VPN servers and kube-apiservers of two ACL shoots and a shoot without ACL; one owner narrows
// the ALLOW rule, and the objects the product writes for that (the tightened CONNECT buckets, and
// the shoot's hops one tunnel generation up, as the controller raises it once the buckets are
// stored) go into Istio's config store.
// - New CONNECTs from the revoked client are refused; a client the new rule admits gets through the
//   new hop to the same VPN server.
// - At the end of the drain every tunnel of the changed shoot's VPN servers is closed (the allowed
//   client's too: it reconnects), and none other: not the other ACL shoot's, not the shoot without
//   ACL's, and not the changed shoot's kube-apiserver tunnel, which has no hop (README says why).
// - The control: the same change without a new generation closes nothing, so the count can fail.
// Both on Envoy 1.40 and 1.37 (Istio 1.29's).
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOOT_LABEL } from '../../src/rbac/envoy-filter-types.js';
import { tunnelHopFilterName } from '../../src/rbac/shoot-envoy-filters.js';
import { hopListenerName, routedClusterName, upstreamClusterName } from '../../src/rbac/tunnel-hop.js';
import { httpConnect, proxyV2From } from '../envoy/clients.js';
import { CONFORMANCE_ENVOY_VERSIONS } from '../envoy/envoy-binary.js';
import { HeldConnection, connectRequestBytes } from '../envoy/held-connection.js';
import { getObject, getObjectList, getString, isJsonObject, type JsonObject } from '../envoy/json.js';
import { CLIENTS } from '../support/conformance-matrix.js';
import { kapi } from '../support/decide.js';
import { dumpedListeners } from './envoy-config-dump.js';
import { ERAS } from './eras.js';
import { generateForSeed, istioInputObjects, withOperatorSettings, withRule } from './istio-rendered-seed.js';
import { msUntilStatus, startLiveAdsGateway, type LiveAdsGateway } from './live-ads-gateway.js';
import { FIXTURE_SHOOTS, gardenerSeedObjects, gatewayLabels, ingressGateway, vpnServerNames } from './seed-fixture.js';

const era = ERAS['v1.145'];
const CHANGED = 'shoot--p--foo';
const OTHER_ACL = 'shoot-q--foo';
const NO_ACL = 'shoot--p--foo-bar';
const NARROWED = { action: 'ALLOW', type: 'remote_ip', cidrs: ['198.18.0.0/15'] };
const INSIDE_NARROWED = '198.18.0.7';
const FOO_CLIENT = CLIENTS.find((c) => c.label === 'shoot foo range, IPv4')!.proxySource!;
/** Admitted by every shoot (a seed node), so it holds tunnels to shoots whose rules it is not in. */
const SEED_NODE = CLIENTS.find((c) => c.label === 'seed node (always allowed)')!.proxySource!;
const RECONFIGURED_MS = 20_000;
/** From the write: Envoy runs with --drain-time-s 1, and drained chains closed their tunnels 2.3–2.4 s after the write. */
const CLOSE_WINDOW_MS = 6_000;

function fixtureShoot(id: string) {
  const shoot = FIXTURE_SHOOTS.find((s) => s.id === id);
  if (shoot === undefined) throw new Error(`no fixture shoot ${id}`);
  return shoot;
}

const vpnOf = (id: string): string[] => vpnServerNames(fixtureShoot(id)).map((service) => routedClusterName(service, id));

interface Tunnel {
  readonly label: string;
  readonly port: number;
  readonly client: string;
  readonly destination: string;
  /** Whether the hop closes it when CHANGED's generation is raised. */
  readonly revoked: boolean;
}

const TUNNELS: readonly Tunnel[] = [
  ...vpnOf(CHANGED).flatMap((destination) => [
    { label: `${destination} on 8132 from the revoked client`, port: 8132, client: FOO_CLIENT, destination, revoked: true },
    { label: `${destination} on 8443 from the revoked client`, port: 8443, client: FOO_CLIENT, destination, revoked: true },
  ]),
  { label: `${vpnOf(CHANGED)[0]} on 8132 from a seed node (still admitted)`, port: 8132, client: SEED_NODE, destination: vpnOf(CHANGED)[0]!, revoked: true },
  { label: `${kapi(CHANGED)} on 8443 from the revoked client (no hop)`, port: 8443, client: FOO_CLIENT, destination: kapi(CHANGED), revoked: false },
  ...vpnOf(OTHER_ACL).map((destination) => ({ label: `${destination} on 8132 from a seed node`, port: 8132, client: SEED_NODE, destination, revoked: false })),
  ...vpnOf(NO_ACL).map((destination) => ({ label: `${destination} on 8443 from the revoked client`, port: 8443, client: FOO_CLIENT, destination, revoked: false })),
];

function headerOf(port: number): string {
  const header = era.connectPorts.find((p) => p.port === port)?.header;
  if (header === undefined) throw new Error(`the ${era.name} fixture has no CONNECT port ${port}`);
  return header;
}

/** The seed's Istio input as the product writes it, the changed shoot's hops at `generation` (the controller's state, which a render does not read). */
function istioInput(objects: readonly JsonObject[], generation: number): JsonObject[] {
  let hops = 0;
  const input = istioInputObjects(objects, generateForSeed(objects)).map((object) => {
    const metadata = getObject(object, 'metadata') ?? {};
    if (object['kind'] !== 'EnvoyFilter' || getObject(metadata, 'labels')?.[SHOOT_LABEL] !== CHANGED || getString(metadata, 'name') !== tunnelHopFilterName(CHANGED)) return object;
    hops++;
    const text = JSON.stringify(object);
    if (text.split('"tunnelGeneration":1').length !== 4) throw new Error(`${tunnelHopFilterName(CHANGED)} does not hold three hops of generation 1`);
    return JSON.parse(text.replaceAll('"tunnelGeneration":1', `"tunnelGeneration":${generation}`)) as JsonObject;
  });
  if (hops === 0) throw new Error(`no ${tunnelHopFilterName(CHANGED)} among the generated objects`);
  return input;
}

function hopGeneration(dump: JsonObject, listener: string): unknown {
  const found = dumpedListeners(dump).find((l) => getString(l, 'name') === listener);
  const chain = getObjectList(found ?? {}, 'filter_chains')[0];
  const metadata = getObject(getObject(getObject(chain ?? {}, 'metadata') ?? {}, 'filter_metadata') ?? {}, 'gardener-acl');
  return isJsonObject(metadata ?? null) ? metadata?.['tunnelGeneration'] : undefined;
}

describe.each(CONFORMANCE_ENVOY_VERSIONS)(`tunnel revocation through the hop, live ADS from Istio's discovery server (Gardener ${era.name} seed, default gateway), Envoy %s`, (envoyVersion) => {
  const objects = withOperatorSettings(gardenerSeedObjects(era), { combinedForm: 'ecds', ecdsBuckets: 4, tunnelRevocation: 'hop' });
  const narrowed = withRule(objects, CHANGED, NARROWED);
  const gatewayProxy = { namespace: ingressGateway('default').namespace, labels: gatewayLabels(era, ingressGateway('default')) };
  let gateway: LiveAdsGateway;

  beforeAll(async () => {
    gateway = await startLiveAdsGateway({ objects: istioInput(objects, 1), proxy: gatewayProxy, envoyVersion, drainTimeSeconds: 1 });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it("Envoy holds each ACL shoot's VPN servers behind its hop: Gardener's cluster renamed, the route's name a door into the hop", async () => {
    expect(gateway.serveLog()).not.toMatch(/cluster .*: dropped/);
    const dump = await gateway.configDump();
    const clusters = new Map(
      getObjectList(dump, 'configs')
        .flatMap((config) => getObjectList(config, 'dynamic_active_clusters'))
        .map((entry) => getObject(entry, 'cluster') ?? {})
        .map((cluster) => [getString(cluster, 'name') ?? '?', cluster] as const),
    );
    for (const id of [CHANGED, OTHER_ACL]) {
      for (const routed of vpnOf(id)) {
        expect(getString(clusters.get(routed) ?? {}, 'type'), routed).toBe('STATIC');
        expect(JSON.stringify(clusters.get(routed)?.['load_assignment']), routed).toContain(hopListenerName(routed));
        expect(getString(clusters.get(upstreamClusterName(routed)) ?? {}, 'type'), upstreamClusterName(routed)).toBe('STATIC'); // the serve tool's echo
        expect(hopGeneration(dump, hopListenerName(routed)), routed).toBe(1);
      }
    }
    // A door with no Gardener cluster behind it (an HA shoot has no plain vpn-seed-server): an admitted CONNECT gets 503, as without the hop.
    const unused = routedClusterName('vpn-seed-server', CHANGED);
    expect(vpnOf(CHANGED)).not.toContain(unused);
    for (const { port } of era.connectPorts) {
      const endpoint = await gateway.endpoint(port, 4);
      const connect = (destination: string) => httpConnect({ ...endpoint, proxyHeader: proxyV2From(SEED_NODE), headers: [[headerOf(port), destination]] });
      expect((await connect(unused)).status, `${port}`).toBe(503);
      expect((await connect(vpnOf(CHANGED)[0]!)).status, `${port}`).toBe(200);
    }
    for (const routed of vpnOf(NO_ACL)) {
      expect(clusters.has(upstreamClusterName(routed)), routed).toBe(false);
      expect(hopGeneration(dump, hopListenerName(routed)), routed).toBeUndefined();
    }
  });

  describe.each([
    { name: 'a new generation (what the controller writes)', generation: 2 },
    { name: 'the control: the same tightening without a new generation', generation: 1 },
  ])('$name', ({ generation }) => {
    it(generation === 1 ? 'closes no tunnel' : "closes every tunnel of the changed shoot's VPN servers at the end of the drain, and no other", async () => {
      // Each case starts from the seed as it was, so the tightening is the only change.
      await gateway.replaceEnvoyFilters(istioInput(objects, 1));
      const tunnels: { tunnel: HeldConnection; spec: Tunnel }[] = [];
      try {
        const http = await gateway.endpoint(8443, 4);
        const connectTo = (client: string, destination: string) => httpConnect({ ...http, proxyHeader: proxyV2From(client), headers: [['X-Gardener-Destination', destination]] });
        const revokedVpn = vpnOf(CHANGED)[0]!;
        if ((await msUntilStatus(performance.now(), 200, () => connectTo(FOO_CLIENT, revokedVpn), RECONFIGURED_MS)) === undefined) {
          throw new Error('the seed as it was never admitted the revoked client again');
        }
        // Tunnels opened before Envoy has the hops of generation 1 again would be closed by that change.
        const resetSince = performance.now();
        while (hopGeneration(await gateway.configDump(), hopListenerName(revokedVpn)) !== 1) {
          if (performance.now() - resetSince > RECONFIGURED_MS) throw new Error('Envoy never got the hops of generation 1 back');
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        for (const spec of TUNNELS) {
          const endpoint = await gateway.endpoint(spec.port, 4);
          const tunnel = await HeldConnection.open(spec.label, endpoint, connectRequestBytes(spec.client, spec.destination, headerOf(spec.port)));
          tunnels.push({ tunnel, spec });
          expect(await tunnel.connectStatus(), spec.label).toBe('HTTP/1.1 200 OK');
          // Through the hop the tunnel still reaches the VPN server it named (the echo server of that Service).
          expect((await tunnel.identity())?.cluster, spec.label).toBe(spec.destination);
        }

        const sent = performance.now();
        const applied = await gateway.replaceEnvoyFilters(istioInput(narrowed, generation));
        expect(applied).toBeGreaterThan(0);
        const refusedAfterMs = await msUntilStatus(sent, 403, () => connectTo(FOO_CLIENT, revokedVpn), RECONFIGURED_MS);
        expect(refusedAfterMs, 'new CONNECTs of the revoked client refused').toBeDefined();
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, sent + CLOSE_WINDOW_MS - performance.now())));

        const closed: string[] = [];
        for (const { tunnel } of tunnels) if (!(await tunnel.echoes())) closed.push(tunnel.label);
        const closedAfterMs = tunnels.flatMap(({ tunnel }) => (tunnel.closedAt === undefined ? [] : [tunnel.closedAt - sent]));
        console.log(
          `tunnel revocation, Envoy ${envoyVersion}, generation ${generation}: new CONNECTs of the revoked client refused ${refusedAfterMs?.toFixed(0)} ms after the store was written; ` +
            `${closed.length} of ${tunnels.length} open tunnels closed within ${CLOSE_WINDOW_MS / 1000} s${closedAfterMs.length > 0 ? `, ${Math.min(...closedAfterMs).toFixed(0)}–${Math.max(...closedAfterMs).toFixed(0)} ms after the write (drain time 1 s)` : ''}`,
        );
        const expected = generation === 1 ? [] : TUNNELS.filter((t) => t.revoked).map((t) => t.label);
        expect(closed.sort()).toEqual([...expected].sort());

        // The new hop chain takes new tunnels: a client the narrowed rule admits reaches the VPN server.
        const reconnect = await HeldConnection.open('reconnect', await gateway.endpoint(8132, 4), connectRequestBytes(INSIDE_NARROWED, revokedVpn, headerOf(8132)));
        try {
          expect(await reconnect.connectStatus()).toBe('HTTP/1.1 200 OK');
          expect((await reconnect.identity())?.cluster).toBe(revokedVpn);
        } finally {
          reconnect.destroy();
        }
        expect(hopGeneration(await gateway.configDump(), hopListenerName(revokedVpn))).toBe(generation);
      } finally {
        for (const { tunnel } of tunnels) tunnel.destroy();
      }
    });
  });
});
