// What an ACL change of shoot A does to connections that other shoots already have open through
// the gateway, when Envoy receives the new listeners (file-based LDS, standing in for the push
// istiod makes after an EnvoyFilter changed). Envoy 1.40 updates a listener in place when only its
// filter chains differ: a chain whose config is unchanged keeps its connections; a changed chain is
// drained for --drain-time-s and its connections are then closed, whoever they belong to.
//
// The CONNECT listeners have one chain holding every shoot's RBAC policies (ours: the combined
// filter; the reference extension: one filter per shoot), so any ACL change drains every tunnel.
// On the SNI listener every shoot has its own chain, except the shared observability wildcard
// chain, where our per-shoot filters all sit. A third variant serves the combined CONNECT policies
// through ECDS (file-based here; Istio: an EXTENSION_CONFIG patch), which leaves the listeners, and
// so the tunnels, untouched. Findings: docs/developers/envoy-listener-updates.md.

import { performance } from 'node:perf_hooks';
import { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { testSeed, type TestShoot } from '../support/test-seed.js';
import { httpConnect, probeTls, proxyV2From } from './clients.js';
import { EchoUpstreams } from './echo-upstreams.js';
import { EcdsFiles, ecdsReloads } from './ecds-files.js';
import type { JsonObject } from './json.js';
import { HeldConnection, connectRequestBytes } from './held-connection.js';
import { startEnvoy, type BoundAddress, type EnvoyInstance } from './envoy-process.js';
import { buildGardenerGateway, gatewayBootstrap, gatewayUpstreams, listenerConfigs, type GardenerGatewaySpec, type GatewayModel } from './gardener-gateway.js';
import { GARDENER_PORT, HEADER_GARDENER_DESTINATION, HEADER_REVERSED_VPN, TYPE_URL, istioClusterName } from './gardener-shapes.js';
import { envoyFilterObject, insertFirstHttpFilter } from './hand-written-filters.js';
import { approximateIstioPlacement } from './istio-placement-approximation.js';
import { referenceExtensionFilters } from './reference-extension-shape.js';
import { rulesFormOnly } from '../support/rules-form.js';

const SHOOT_A = 'shoot--p--a';
const SHOOT_B = 'shoot--p--b';
const HOST_A = 'api.a.p.example.test';
const HOST_B = 'api.b.p.example.test';
const WILDCARD_DOMAIN = 'ingress.seed.example.test';
/** Shoot B's Plutono host on the seed's shared nginx chain `*.<domain>` (`<prefix>-<shortID>.<domain>`). */
const OBSERVABILITY_B = `gu-p--b.${WILDCARD_DOMAIN}`;
/** Admitted by both shoots before the change, by B only after it. */
const CLIENT = '10.1.2.3';

const IO_TIMEOUT_MS = 3_000;
const sleep = async (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** How far around the drain time a close still counts as Envoy's end-of-drain close (timers, polling, load). */
const DRAIN_SLACK_MS = 1_500;
const DRAIN_EARLY_MS = 250;

// ---------------------------------------------------------------------------------------------
// The seed before and after shoot A's owner changes A's ACL (B's stays as it is)

const aclShoot = (id: string, host: string, cidrs: string[]): TestShoot => ({
  id,
  hosts: [host],
  rule: { action: 'ALLOW', type: 'remote_ip', cidrs },
});
const SHOOTS_BEFORE = [aclShoot(SHOOT_A, HOST_A, ['10.0.0.0/8']), aclShoot(SHOOT_B, HOST_B, ['10.0.0.0/8'])];
const SHOOTS_AFTER = [aclShoot(SHOOT_A, HOST_A, ['192.0.2.0/24']), aclShoot(SHOOT_B, HOST_B, ['10.0.0.0/8'])];

type Shape = 'ours' | 'reference';
/** How the seed after the change is built and handed to Envoy. */
type Variant = Shape | 'ours, CONNECT policies via ECDS' | 'ours, unchanged seed re-applied';

/**
 * Pinned to the rules form: this experiment is about policies delivered in the listeners (ours as
 * the rules form writes them, the ECDS variant hands the same rules config over through ECDS) and
 * its gateway places listener patches only. The product's ecds form is measured on Istio's own
 * rendering (test/istio/ecds-rendered.test.ts), where an ACL change closes no tunnel either.
 */
const RULES_FORM = { combinedForm: 'rules' } as const;

function envoyFiltersOf(shape: Shape, shoots: readonly TestShoot[]): unknown[] {
  const { seed } = testSeed(shoots, { observabilityDomain: WILDCARD_DOMAIN, operator: RULES_FORM });
  return shape === 'ours' ? allEnvoyFilters(buildSeedEnvoyFilters(seed)) : referenceExtensionFilters(seed);
}

const GATEWAY_SPEC: GardenerGatewaySpec = {
  era: 'v1.139-v1.149',
  shoots: [
    { technicalID: SHOOT_A, sniChains: [[HOST_A]] },
    { technicalID: SHOOT_B, sniChains: [[HOST_B]] },
  ],
  observabilityWildcardDomain: WILDCARD_DOMAIN,
};

// ---------------------------------------------------------------------------------------------
// A gateway whose Envoy runs with a chosen drain time (startLiveGateway keeps envoy-process's 1 s)

class DrainingGateway {
  private constructor(
    readonly envoy: EnvoyInstance,
    private readonly echo: EchoUpstreams,
    private readonly base: GatewayModel,
  ) {}

  static async start(envoyFilters: readonly unknown[], drainTimeSeconds: number): Promise<DrainingGateway> {
    const echo = await EchoUpstreams.start(gatewayUpstreams(GATEWAY_SPEC));
    try {
      const base = buildGardenerGateway(GATEWAY_SPEC, echo.ports());
      const bootstrap = gatewayBootstrap(approximateIstioPlacement(base, envoyFilters).gateway);
      const envoy = await startEnvoy({ bootstrap, listenersViaFile: true, drainTimeSeconds });
      return new DrainingGateway(envoy, echo, base);
    } catch (error) {
      await echo.close();
      throw error;
    }
  }

  /** Listener names are Istio's `0.0.0.0_<port>` (IPv4 loopback gateway). */
  async endpoint(logicalPort: number): Promise<BoundAddress> {
    return this.envoy.boundAddress(`0.0.0.0_${logicalPort}`);
  }

  /** Hands Envoy the listeners with `envoyFilters` placed; resolves once they are accepted and warm. */
  async apply(envoyFilters: readonly unknown[]): Promise<void> {
    const result = await this.envoy.replaceListeners(listenerConfigs(approximateIstioPlacement(this.base, envoyFilters).gateway));
    if (!result.accepted) throw new Error(`Envoy rejected the listener update:\n${result.output}`);
  }

  async stop(): Promise<void> {
    await Promise.allSettled([this.envoy.stop(), this.echo.close()]);
  }
}

// ---------------------------------------------------------------------------------------------
// How the change reaches Envoy

interface AclDelivery {
  /** The EnvoyFilters Envoy starts with (the seed before the change). */
  readonly before: readonly unknown[];
  /** Hands Envoy the seed after the change; resolves once Envoy applied it. */
  deliverChange(gateway: DrainingGateway): Promise<void>;
  cleanUp(): Promise<void>;
}

function listenerDelivery(shape: Shape, after: readonly TestShoot[]): AclDelivery {
  return {
    before: envoyFiltersOf(shape, SHOOTS_BEFORE),
    deliverChange: async (gateway) => gateway.apply(envoyFiltersOf(shape, after)),
    cleanUp: async () => undefined,
  };
}

const ECDS_FILTER = 'gardener-acl-connect';
const ECDS_TIMEOUT_MS = 5_000;

/** The combined filter's RBAC config for these shoots (two shoots: one shard; 8443 and 8132 carry the same policies). */
function combinedRbacConfig(shoots: readonly TestShoot[]): unknown {
  const combined = rulesFormOnly(buildSeedEnvoyFilters(testSeed(shoots, { operator: RULES_FORM }).seed).combined);
  const patch = combined.find((filter) => filter.metadata.name.startsWith(`acl-connect-${GARDENER_PORT.httpProxy}-`))?.spec.configPatches[0];
  if (patch === undefined || combined.length !== 2) throw new Error('expected one combined shard per CONNECT port');
  return patch.patch.value.typed_config;
}

/** The combined RBAC config as one file-based ECDS resource, and the EnvoyFilter whose listeners fetch it. */
class EcdsFile {
  private constructor(private readonly files: EcdsFiles) {}

  static async create(): Promise<EcdsFile> {
    return new EcdsFile(await EcdsFiles.create());
  }

  async write(typedConfig: unknown): Promise<void> {
    await this.files.write([{ name: ECDS_FILTER, typed_config: typedConfig as JsonObject }]);
  }

  /** EnvoyFilter putting the ECDS-configured filter first on both CONNECT ports (what the listeners keep). */
  envoyFilter(): unknown {
    const filter = this.files.listeners([{ name: ECDS_FILTER, config_discovery: { config_source: { ads: {} }, type_urls: [TYPE_URL.httpRbac] } }])[0] as JsonObject;
    const ports = [GARDENER_PORT.httpProxy, GARDENER_PORT.tlsTunnel];
    return envoyFilterObject('acl-connect-ecds', ports.map((port) => insertFirstHttpFilter(port, filter)));
  }

  async remove(): Promise<void> {
    await this.files.remove();
  }
}

/** Our per-shoot filters as usual, the combined CONNECT policies through ECDS instead of in the listeners. */
async function ecdsDelivery(): Promise<AclDelivery> {
  const ecds = await EcdsFile.create();
  await ecds.write(combinedRbacConfig(SHOOTS_BEFORE));
  const envoyFilters = (shoots: readonly TestShoot[]): unknown[] => {
    const { perShoot } = buildSeedEnvoyFilters(testSeed(shoots, { observabilityDomain: WILDCARD_DOMAIN, operator: RULES_FORM }).seed);
    return [...[...perShoot.values()].flat(), ecds.envoyFilter()];
  };
  return {
    before: envoyFilters(SHOOTS_BEFORE),
    async deliverChange(gateway) {
      const reloadsBefore = await ecdsReloads(gateway.envoy);
      await ecds.write(combinedRbacConfig(SHOOTS_AFTER));
      const deadline = performance.now() + ECDS_TIMEOUT_MS;
      while ((await ecdsReloads(gateway.envoy)) === reloadsBefore) {
        if (performance.now() > deadline) throw new Error(`Envoy did not reload the ECDS resource within ${ECDS_TIMEOUT_MS} ms`);
        await sleep(20);
      }
      await gateway.apply(envoyFilters(SHOOTS_AFTER));
    },
    cleanUp: async () => ecds.remove(),
  };
}

async function deliveryFor(variant: Variant): Promise<AclDelivery> {
  switch (variant) {
    case 'ours, CONNECT policies via ECDS':
      return ecdsDelivery();
    case 'ours, unchanged seed re-applied':
      return listenerDelivery('ours', SHOOTS_BEFORE);
    default:
      return listenerDelivery(variant, SHOOTS_AFTER);
  }
}

// ---------------------------------------------------------------------------------------------
// Connections held open across the update

/** The ClientHello node:tls sends for `sni`: the SNI listener picks the chain from a real one. */
async function clientHello(sni: string): Promise<Buffer> {
  let timer: NodeJS.Timeout | undefined;
  let written: (chunk: Buffer) => void = () => undefined;
  const hello = new Promise<Buffer>((resolve, reject) => {
    written = resolve;
    timer = setTimeout(() => reject(new Error('node:tls wrote no ClientHello')), IO_TIMEOUT_MS);
  });
  const capture = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      written(chunk);
      callback();
    },
  });
  const tls = tlsConnect({ socket: capture, servername: sni, rejectUnauthorized: false });
  tls.on('error', () => undefined);
  try {
    return await hello;
  } finally {
    clearTimeout(timer);
    tls.destroy();
  }
}

function connectRequest(destination: string, header: string): Buffer {
  return connectRequestBytes(CLIENT, destination, header);
}

async function openTunnel(gateway: DrainingGateway, label: string, port: number, header: string, destination: string): Promise<HeldConnection> {
  const connection = await HeldConnection.open(label, await gateway.endpoint(port), connectRequest(destination, header));
  expect(await connection.connectStatus(), label).toBe('HTTP/1.1 200 OK');
  expect((await connection.identity())?.cluster, label).toBe(destination);
  return connection;
}

async function openTls(gateway: DrainingGateway, label: string, sni: string, cluster: string): Promise<HeldConnection> {
  const firstBytes = Buffer.concat([proxyV2From(CLIENT), await clientHello(sni)]);
  const connection = await HeldConnection.open(label, await gateway.endpoint(GARDENER_PORT.sni), firstBytes);
  expect((await connection.identity())?.cluster, label).toBe(cluster);
  return connection;
}

// ---------------------------------------------------------------------------------------------
// The experiment

type Fate = 'still open' | 'closed at the drain time' | 'closed before the drain time' | 'closed late' | 'open but silent';

interface Observation {
  /** Every connection still carried data right after Envoy accepted the update. */
  allEchoedRightAfter: boolean;
  fates: Record<string, Fate>;
  /** ms from the test seeing the change applied to the close, per closed connection (for the docs). */
  closedAfterMs: Record<string, number>;
  /** New connections from CLIENT right after the update: A must be refused now, B admitted. */
  newConnections: { connectA: number; connectB: number; tlsAReached: boolean; tlsBReached: boolean };
}

/** When the change was handed to Envoy and when the test saw it applied: Envoy applied it in between. */
interface ChangeWindow {
  sentAt: number;
  appliedAt: number;
}

async function fateOf(connection: HeldConnection, change: ChangeWindow, drainMs: number): Promise<Fate> {
  const closedAt = connection.closedAt;
  if (closedAt === undefined) return (await connection.echoes()) ? 'still open' : 'open but silent';
  if (closedAt - change.sentAt < drainMs - DRAIN_EARLY_MS) return 'closed before the drain time';
  return closedAt - change.appliedAt <= drainMs + DRAIN_SLACK_MS ? 'closed at the drain time' : 'closed late';
}

async function newConnectionsAfterUpdate(gateway: DrainingGateway): Promise<Observation['newConnections']> {
  const http = await gateway.endpoint(GARDENER_PORT.httpProxy);
  const tls = await gateway.endpoint(GARDENER_PORT.sni);
  const connect = async (shoot: string): Promise<number> =>
    (await httpConnect({ ...http, proxyHeader: proxyV2From(CLIENT), headers: [[HEADER_GARDENER_DESTINATION, istioClusterName.kubeApiserver(shoot)]] })).status;
  const reached = async (sni: string): Promise<boolean> => (await probeTls({ ...tls, sni, proxyHeader: proxyV2From(CLIENT) })).reached !== undefined;
  return { connectA: await connect(SHOOT_A), connectB: await connect(SHOOT_B), tlsAReached: await reached(HOST_A), tlsBReached: await reached(HOST_B) };
}

async function observeAclChange(gateway: DrainingGateway, delivery: AclDelivery, drainTimeSeconds: number): Promise<Observation> {
  const connections = [
    await openTunnel(gateway, 'A tunnel 8443', GARDENER_PORT.httpProxy, HEADER_GARDENER_DESTINATION, istioClusterName.kubeApiserver(SHOOT_A)),
    await openTunnel(gateway, 'B tunnel 8443', GARDENER_PORT.httpProxy, HEADER_GARDENER_DESTINATION, istioClusterName.kubeApiserver(SHOOT_B)),
    await openTunnel(gateway, 'B tunnel 8132', GARDENER_PORT.tlsTunnel, HEADER_REVERSED_VPN, istioClusterName.vpnSeedServer(SHOOT_B)),
    await openTls(gateway, 'A TLS', HOST_A, istioClusterName.kubeApiserver(SHOOT_A)),
    await openTls(gateway, 'B TLS', HOST_B, istioClusterName.kubeApiserver(SHOOT_B)),
    await openTls(gateway, 'B observability TLS', OBSERVABILITY_B, istioClusterName.nginxIngress),
  ];
  try {
    const sentAt = performance.now();
    await delivery.deliverChange(gateway);
    const change: ChangeWindow = { sentAt, appliedAt: performance.now() };
    const echoedRightAfter = await Promise.all(connections.map(async (connection) => connection.echoes()));
    const newConnections = await newConnectionsAfterUpdate(gateway);
    const drainMs = drainTimeSeconds * 1000;
    await sleep(Math.max(0, change.appliedAt + drainMs + DRAIN_SLACK_MS + 500 - performance.now()));
    const fates: Record<string, Fate> = {};
    const closedAfterMs: Record<string, number> = {};
    for (const connection of connections) {
      fates[connection.label] = await fateOf(connection, change, drainMs);
      if (connection.closedAt !== undefined) closedAfterMs[connection.label] = Math.round(connection.closedAt - change.appliedAt);
    }
    return { allEchoedRightAfter: echoedRightAfter.every(Boolean), fates, closedAfterMs, newConnections };
  } finally {
    for (const connection of connections) connection.destroy();
  }
}

const AT_DRAIN: Fate = 'closed at the drain time';
const OPEN: Fate = 'still open';
const A_NOW_REFUSED: Observation['newConnections'] = { connectA: 403, connectB: 200, tlsAReached: false, tlsBReached: true };

interface Case {
  variant: Variant;
  drainTimeSeconds: number;
  fates: Record<string, Fate>;
  newConnections: Observation['newConnections'];
}

const OURS_OVER_LDS: Record<string, Fate> = {
  'A tunnel 8443': AT_DRAIN,
  'B tunnel 8443': AT_DRAIN,
  'B tunnel 8132': AT_DRAIN,
  'A TLS': AT_DRAIN,
  'B TLS': OPEN,
  // Every ACL shoot's observability filter sits in the one shared wildcard chain.
  'B observability TLS': AT_DRAIN,
};

const CASES: readonly Case[] = [
  { variant: 'ours', drainTimeSeconds: 2, fates: OURS_OVER_LDS, newConnections: A_NOW_REFUSED },
  { variant: 'ours', drainTimeSeconds: 4, fates: OURS_OVER_LDS, newConnections: A_NOW_REFUSED },
  {
    variant: 'reference',
    drainTimeSeconds: 2,
    // The reference extension does not protect the wildcard chain, so nothing of it changes.
    fates: { ...OURS_OVER_LDS, 'B observability TLS': OPEN },
    newConnections: A_NOW_REFUSED,
  },
  {
    variant: 'ours, CONNECT policies via ECDS',
    drainTimeSeconds: 2,
    fates: {
      ...OURS_OVER_LDS,
      // RBAC decides once per CONNECT: A's tunnel, opened before A's owner removed its range, stays.
      'A tunnel 8443': OPEN,
      'B tunnel 8443': OPEN,
      'B tunnel 8132': OPEN,
    },
    newConnections: A_NOW_REFUSED,
  },
  {
    variant: 'ours, unchanged seed re-applied',
    drainTimeSeconds: 2,
    // Identical listeners: Envoy changes nothing, so a rewrite with the same content costs no connection.
    fates: Object.fromEntries(Object.keys(OURS_OVER_LDS).map((label) => [label, OPEN])),
    newConnections: { connectA: 200, connectB: 200, tlsAReached: true, tlsBReached: true },
  },
];

// Concurrent: each case has its own Envoy and spends most of its time waiting out the drain time.
describe.concurrent('an ACL change of shoot A and the connections already open through the gateway (Envoy 1.40)', () => {
  it.each(CASES)('$variant, --drain-time-s $drainTimeSeconds', async ({ variant, drainTimeSeconds, fates, newConnections }) => {
    const delivery = await deliveryFor(variant);
    try {
      const gateway = await DrainingGateway.start(delivery.before, drainTimeSeconds);
      try {
        const observation = await observeAclChange(gateway, delivery, drainTimeSeconds);
        console.info(`${variant}, drain ${drainTimeSeconds} s: closed after (ms) ${JSON.stringify(observation.closedAfterMs)}`);
        expect(observation.allEchoedRightAfter).toBe(true);
        expect(observation.newConnections).toEqual(newConnections);
        expect(observation.fates).toEqual(fates);
      } finally {
        await gateway.stop();
      }
    } finally {
      await delivery.cleanUp();
    }
  });
});
