// The shared tunnel hop (src/rbac/shared-tunnel-hop.ts, docs/operators/revocation.md; tunnelRevocation hop,
// the default), proven live: a real Envoy takes its whole configuration over delta ADS from Istio's
// own discovery server for the default gateway of a Gardener 1.145 seed with the ECDS form (4
// buckets, so that the test seed's shoots share buckets), the product's objects as generated, the
// changed shoot's chain at the generation the controller records. Tunnels are held open to the VPN servers of two ACL shoots
// and a shoot without ACL, and to an ACL shoot's kube-apiserver.
// - Every VPN tunnel reaches the server it named through the hop (the door's pools are partitioned
//   by destination: both servers of an HA VPN from one client), every other tunnel goes as before.
// - An owner narrows the rule and the changed shoot's generation goes up: at the end of the drain
//   every tunnel of that shoot's VPN servers is closed and no other; new CONNECTs of the revoked
//   client are refused and an admitted client reaches the VPN server through the new chain.
// - The control, the same tightening without a new generation, closes nothing.
// - Headers as an attacker sends them: two protected headers naming different VPN servers are
//   refused; a repeated header goes where Envoy routes it (its first value); a name in capitals is
//   the same header.
// Both on Envoy 1.40 and 1.37 (Istio 1.29's).
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CHAIN, SHARED_HOP_SHARDS, sharedHopChainName, sharedHopListenerName, sharedHopObjectName, sharedHopShard, vpnClusterName as routedClusterName } from '../../src/rbac/shared-tunnel-hop.js';
import { httpConnect, proxyV2From } from '../envoy/clients.js';
import { CONFORMANCE_ENVOY_VERSIONS } from '../envoy/envoy-binary.js';
import { HeldConnection, connectRequestBytes } from '../envoy/held-connection.js';
import { getObject, getObjectList, getString, type JsonObject } from '../envoy/json.js';
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
/** From the write: Envoy runs with --drain-time-s 1. */
const CLOSE_WINDOW_MS = 6_000;

function fixtureShoot(id: string) {
  const shoot = FIXTURE_SHOOTS.find((s) => s.id === id);
  if (shoot === undefined) throw new Error(`no fixture shoot ${id}`);
  return shoot;
}

const vpnOf = (id: string): string[] => vpnServerNames(fixtureShoot(id)).map((service) => routedClusterName(service, id));
const ACL_SHOOTS = FIXTURE_SHOOTS.filter((s) => s.rule !== undefined).map((s) => s.id);

interface Tunnel {
  readonly label: string;
  readonly port: number;
  readonly client: string;
  readonly destination: string;
  /** Whether a new generation of CHANGED closes it. */
  readonly revoked: boolean;
}

const TUNNELS: readonly Tunnel[] = [
  ...vpnOf(CHANGED).flatMap((destination) => [
    { label: `${destination} on 8132 from the revoked client`, port: 8132, client: FOO_CLIENT, destination, revoked: true },
    { label: `${destination} on 8443 from the revoked client`, port: 8443, client: FOO_CLIENT, destination, revoked: true },
  ]),
  { label: `${vpnOf(CHANGED)[0]} on 8132 from a seed node (still admitted)`, port: 8132, client: SEED_NODE, destination: vpnOf(CHANGED)[0]!, revoked: true },
  { label: `${kapi(CHANGED)} on 8443 from the revoked client (not a VPN server)`, port: 8443, client: FOO_CLIENT, destination: kapi(CHANGED), revoked: false },
  ...vpnOf(OTHER_ACL).map((destination) => ({ label: `${destination} on 8132 from a seed node`, port: 8132, client: SEED_NODE, destination, revoked: false })),
  ...vpnOf(NO_ACL).map((destination) => ({ label: `${destination} on 8443 from the revoked client (default chain)`, port: 8443, client: FOO_CLIENT, destination, revoked: false })),
];

function headerOf(port: number): string {
  const header = era.connectPorts.find((p) => p.port === port)?.header;
  if (header === undefined) throw new Error(`the ${era.name} fixture has no CONNECT port ${port}`);
  return header;
}

const gatewayProxy = { namespace: ingressGateway('default').namespace, labels: gatewayLabels(era, ingressGateway('default')) };

/** What Istio reads: the product's objects for the seed, CHANGED's chain at `generation` (the controller's state, which a render does not read). */
function istioInput(objects: readonly JsonObject[], generation: number): JsonObject[] {
  const shard = sharedHopObjectName(sharedHopShard(CHANGED));
  let shards = 0;
  const input = istioInputObjects(objects, generateForSeed(objects)).map((object) => {
    if (object['kind'] !== 'EnvoyFilter' || getString(getObject(object, 'metadata') ?? {}, 'name') !== shard) return object;
    shards++;
    const text = JSON.stringify(object);
    // The chain's name and the matcher's action naming it.
    if (text.split(`"${sharedHopChainName(CHANGED, 1)}"`).length !== 3) throw new Error(`${shard} does not hold the chain ${sharedHopChainName(CHANGED, 1)}`);
    return JSON.parse(text.replaceAll(`"${sharedHopChainName(CHANGED, 1)}"`, `"${sharedHopChainName(CHANGED, generation)}"`)) as JsonObject;
  });
  if (shards === 0) throw new Error(`no ${shard} among the generated objects`);
  return input;
}

/** The chain names of a hop listener as Envoy holds it. */
function chainNames(dump: JsonObject, listener: string): string[] {
  const found = dumpedListeners(dump).find((l) => getString(l, 'name') === listener);
  return getObjectList(found ?? {}, 'filter_chains').map((chain) => getString(chain, 'name') ?? '?');
}

describe.each(CONFORMANCE_ENVOY_VERSIONS)(`the shared tunnel hop, live ADS from Istio's discovery server (Gardener ${era.name} seed, default gateway, ECDS form), Envoy %s`, (envoyVersion) => {
  const objects = withOperatorSettings(gardenerSeedObjects(era), { combinedForm: 'ecds', ecdsBuckets: 4 });
  const narrowed = withRule(objects, CHANGED, NARROWED);
  let gateway: LiveAdsGateway;

  beforeAll(async () => {
    gateway = await startLiveAdsGateway({ objects: istioInput(objects, 1), proxy: gatewayProxy, envoyVersion, drainTimeSeconds: 1 });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  const connectTo = async (port: number, client: string, headers: [string, string][]) =>
    httpConnect({ ...(await gateway.endpoint(port, 4)), proxyHeader: proxyV2From(client), headers });

  it('Envoy holds every shard listener, with a chain per ACL shoot and the default chain, and every tunnel reaches what it named', async () => {
    expect(gateway.serveLog()).not.toMatch(/gardener-acl[^\n]*: dropped/);
    const dump = await gateway.configDump();
    for (let shard = 0; shard < SHARED_HOP_SHARDS; shard++) {
      const ids = ACL_SHOOTS.filter((id) => sharedHopShard(id) === shard);
      expect(chainNames(dump, sharedHopListenerName(shard)).sort(), `shard ${shard}`).toEqual([DEFAULT_CHAIN, ...ids.map((id) => sharedHopChainName(id, 1))].sort());
    }
    const held: HeldConnection[] = [];
    try {
      for (const spec of TUNNELS) {
        const tunnel = await HeldConnection.open(spec.label, await gateway.endpoint(spec.port, 4), connectRequestBytes(spec.client, spec.destination, headerOf(spec.port)));
        held.push(tunnel);
        expect(await tunnel.connectStatus(), spec.label).toBe('HTTP/1.1 200 OK');
        expect((await tunnel.identity())?.cluster, spec.label).toBe(spec.destination);
      }
    } finally {
      for (const tunnel of held) tunnel.destroy();
    }
  });

  it('headers as an attacker sends them: two VPN servers refused, a repeated header goes by its first value, a name in capitals is the same header', async () => {
    const [foo0, foo1] = vpnOf(CHANGED) as [string, string];
    const other = vpnOf(OTHER_ACL)[0]!;
    // Two protected headers naming different VPN servers, both admitted to a seed node: refused before the route.
    const both = await connectTo(8443, SEED_NODE, [
      ['X-Gardener-Destination', foo0],
      ['Reversed-VPN', other],
    ]);
    expect(both.status).toBe(403);
    // The same server in both headers is one destination.
    expect((await connectTo(8443, SEED_NODE, [['X-Gardener-Destination', foo0], ['Reversed-VPN', foo0]])).status).toBe(200);
    // A repeated header: Envoy routes by the first value; the tunnel reaches exactly that server.
    const repeated = await HeldConnection.open(
      'repeated',
      await gateway.endpoint(8443, 4),
      Buffer.concat([proxyV2From(SEED_NODE), Buffer.from(`CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nX-Gardener-Destination: ${foo1}\r\nX-Gardener-Destination: ${other}\r\n\r\n`)]),
    );
    try {
      expect(await repeated.connectStatus()).toBe('HTTP/1.1 200 OK');
      expect((await repeated.identity())?.cluster).toBe(foo1);
    } finally {
      repeated.destroy();
    }
    const capitals = await HeldConnection.open('capitals', await gateway.endpoint(8443, 4), connectRequestBytes(SEED_NODE, foo1, 'X-GARDENER-DESTINATION'));
    try {
      expect(await capitals.connectStatus()).toBe('HTTP/1.1 200 OK');
      expect((await capitals.identity())?.cluster).toBe(foo1);
    } finally {
      capitals.destroy();
    }
    // A VPN server the gateway has no cluster for (an HA shoot has no plain vpn-seed-server) leads nowhere.
    const missing = routedClusterName('vpn-seed-server', CHANGED);
    const unused = await HeldConnection.open('missing', await gateway.endpoint(8443, 4), connectRequestBytes(SEED_NODE, missing, 'X-Gardener-Destination'));
    try {
      const status = await unused.connectStatus();
      console.log(`shared hop, Envoy ${envoyVersion}: a CONNECT to a VPN server without cluster is answered ${status ?? '(closed)'}`);
      expect(await unused.echoes()).toBe(false);
    } finally {
      unused.destroy();
    }
  });

  describe.each([
    { name: 'a new generation (what the controller writes)', generation: 2 },
    { name: 'the control: the same tightening without a new generation', generation: 1 },
  ])('$name', ({ generation }) => {
    it(generation === 1 ? 'closes no tunnel' : "closes every tunnel of the changed shoot's VPN servers at the end of the drain, and no other", async () => {
      await gateway.replaceEnvoyFilters(istioInput(objects, 1));
      const tunnels: { tunnel: HeldConnection; spec: Tunnel }[] = [];
      try {
        const revokedVpn = vpnOf(CHANGED)[0]!;
        if ((await msUntilStatus(performance.now(), 200, () => connectTo(8443, FOO_CLIENT, [['X-Gardener-Destination', revokedVpn]]), RECONFIGURED_MS)) === undefined) {
          throw new Error('the seed as it was never admitted the revoked client again');
        }
        const listener = sharedHopListenerName(sharedHopShard(CHANGED));
        const resetSince = performance.now();
        while (!chainNames(await gateway.configDump(), listener).includes(sharedHopChainName(CHANGED, 1))) {
          if (performance.now() - resetSince > RECONFIGURED_MS) throw new Error('Envoy never got generation 1 back');
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        for (const spec of TUNNELS) {
          const tunnel = await HeldConnection.open(spec.label, await gateway.endpoint(spec.port, 4), connectRequestBytes(spec.client, spec.destination, headerOf(spec.port)));
          tunnels.push({ tunnel, spec });
          expect(await tunnel.connectStatus(), spec.label).toBe('HTTP/1.1 200 OK');
          expect((await tunnel.identity())?.cluster, spec.label).toBe(spec.destination);
        }

        const sent = performance.now();
        expect(await gateway.replaceEnvoyFilters(istioInput(narrowed, generation))).toBeGreaterThan(0);
        const refusedAfterMs = await msUntilStatus(sent, 403, () => connectTo(8443, FOO_CLIENT, [['X-Gardener-Destination', revokedVpn]]), RECONFIGURED_MS);
        expect(refusedAfterMs, 'new CONNECTs of the revoked client refused').toBeDefined();
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, sent + CLOSE_WINDOW_MS - performance.now())));

        const closed: string[] = [];
        for (const { tunnel } of tunnels) if (!(await tunnel.echoes())) closed.push(tunnel.label);
        const closedAfterMs = tunnels.flatMap(({ tunnel }) => (tunnel.closedAt === undefined ? [] : [tunnel.closedAt - sent]));
        console.log(
          `shared hop, Envoy ${envoyVersion}, generation ${generation}: new CONNECTs of the revoked client refused ${refusedAfterMs?.toFixed(0)} ms after the store was written; ` +
            `${closed.length} of ${tunnels.length} open tunnels closed within ${CLOSE_WINDOW_MS / 1000} s${closedAfterMs.length > 0 ? `, ${Math.min(...closedAfterMs).toFixed(0)}–${Math.max(...closedAfterMs).toFixed(0)} ms after the write (drain time 1 s)` : ''}`,
        );
        const expected = generation === 1 ? [] : TUNNELS.filter((t) => t.revoked).map((t) => t.label);
        expect(closed.sort()).toEqual([...expected].sort());

        const reconnect = await HeldConnection.open('reconnect', await gateway.endpoint(8132, 4), connectRequestBytes(INSIDE_NARROWED, revokedVpn, headerOf(8132)));
        try {
          expect(await reconnect.connectStatus()).toBe('HTTP/1.1 200 OK');
          expect((await reconnect.identity())?.cluster).toBe(revokedVpn);
        } finally {
          reconnect.destroy();
        }
        expect(chainNames(await gateway.configDump(), listener)).toContain(sharedHopChainName(CHANGED, generation));
      } finally {
        for (const { tunnel } of tunnels) tunnel.destroy();
      }
    });
  });
});
