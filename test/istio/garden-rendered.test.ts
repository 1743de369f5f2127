// Issue 32 point 1 and 3: the virtual garden's API server behind the ACL. gardener-operator's
// objects for the virtual garden's exposure (test/istio/garden-fixture.ts, both TLS termination
// and passthrough), plus the EnvoyFilter the garden ACL computes from the Garden, the garden-acl
// Extension and the ManagedSeeds, rendered by Istio's own code for the garden's ingress gateway
// and served by a real Envoy: every host of the virtual garden refuses a client the ACL does not
// admit and admits the rule's clients, the runtime cluster's nodes and pods and every ManagedSeed's
// egress, IPv4, IPv6 and IPv4-mapped alike. The expected verdicts are written by hand per client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GardenAcl } from '../../src/acl/model.js';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { parseClientAddress } from '../../src/explain/client-address.js';
import { explainGarden } from '../../src/explain/explain-acl.js';
import { gardenAclFromInventory, gardenInventoryFromObjects } from '../../src/gardener/garden-acl.js';
import { extensionSchema } from '../../src/gardener/objects.js';
import { buildGardenEnvoyFilters, GARDEN_STAT_PREFIX } from '../../src/rbac/garden-envoy-filter.js';
import type { JsonObject } from '../envoy/json.js';
import { gardenExtension, gardenHosts, gardenObject, managedSeedObjects, virtualGardenRuntimeObjects, type GardenExposure } from './garden-fixture.js';
import { CLIENTS, gateway, reaches, type GardenClient } from './garden-probes.js';
import type { IstioGateway } from './istio-rendered-gateway.js';

const RULE = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } };
const SEEDS = [
  { name: 'seed-eu', egressCIDRs: ['198.51.100.20/32'] },
  { name: 'seed-us', egressCIDRs: ['192.0.2.128/25', '2001:db8:5eed::/48'] },
];

function gardenAcl(exposure: GardenExposure, providerConfig: unknown, options: { readonly beforeGateway?: boolean } = {}): GardenAcl {
  const runtime = virtualGardenRuntimeObjects(exposure).filter((o) => !(options.beforeGateway && o['kind'] === 'Gateway'));
  const { managedSeeds, shoots } = managedSeedObjects(SEEDS);
  const extension = extensionSchema.parse(gardenExtension(providerConfig));
  const result = gardenAclFromInventory(extension, gardenInventoryFromObjects([...runtime, gardenObject(), ...managedSeeds, ...shoots], true), defaultOperatorConfig());
  if (result.kind !== 'acl' || result.ahead !== (options.beforeGateway ?? false)) throw new Error(`the garden ACL was not computed as expected: ${JSON.stringify(result)}`);
  return result.acl;
}

function gardenAclObjects(exposure: GardenExposure, providerConfig: unknown, options: { readonly beforeGateway?: boolean } = {}): JsonObject[] {
  return buildGardenEnvoyFilters(gardenAcl(exposure, providerConfig, options), defaultOperatorConfig().sniPort).map((f) => JSON.parse(JSON.stringify(f)) as JsonObject);
}

/** What `explain --garden` says of a probe client: the address Envoy sees as remote (the PROXY source, else the loopback peer). */
function explained(acl: GardenAcl, client: GardenClient): readonly string[] {
  const source = client.proxySource ?? client.localAddress ?? '::1';
  const remote = parseClientAddress(client.proxyFamily === 'TCP6' && !source.includes(':') ? `::ffff:${source}` : source);
  if (!remote) throw new Error(`unparsable ${source}`);
  return explainGarden(acl, defaultOperatorConfig().sniPort, remote).verdicts.map((v) => v.verdict);
}

describe.each(['tls-termination', 'passthrough'] as const)('the virtual garden (gardener-operator v1.149, %s) rendered by Istio, served by a real Envoy', (exposure) => {
  let protectedGateway: IstioGateway;
  let openGateway: IstioGateway;

  beforeAll(async () => {
    protectedGateway = await gateway(exposure, gardenAclObjects(exposure, RULE));
    openGateway = await gateway(exposure, []);
  });
  afterAll(async () => {
    await Promise.allSettled([protectedGateway?.stop(), openGateway?.stop()]);
  });

  it('without the garden ACL an outsider reaches the virtual garden’s API server on every host (the probes can tell)', async () => {
    for (const host of gardenHosts()) expect(await reaches(openGateway, exposure, host, CLIENTS.find((c) => c.label === 'outsider IPv4')!), host).toBe(true);
  });

  it('with it, every host admits exactly the rule’s clients, the runtime nodes and pods and every ManagedSeed’s egress, as explain --garden says', { timeout: 120_000 }, async () => {
    const acl = gardenAcl(exposure, RULE);
    const wrong: string[] = [];
    for (const client of CLIENTS) {
      const said = explained(acl, client);
      if (said.length === 0 || said.some((v) => v !== (client.admitted ? 'admitted' : 'refused'))) wrong.push(`explain --garden for ${client.label}: ${said.join(', ')}`);
    }
    for (const host of gardenHosts()) {
      for (const client of CLIENTS) {
        const got = await reaches(protectedGateway, exposure, host, client);
        if (got !== client.admitted) wrong.push(`${client.label} -> ${host}: ${got ? 'admitted' : 'refused'}, want ${client.admitted ? 'admitted' : 'refused'}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('a refusal counts in gardener_acl_garden.virtual-garden.rbac.denied', async () => {
    const before = (await protectedGateway.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.denied`) ?? 0;
    expect(await reaches(protectedGateway, exposure, gardenHosts()[0]!, CLIENTS.find((c) => c.label === 'outsider IPv6')!)).toBe(false);
    const after = (await protectedGateway.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.denied`) ?? 0;
    expect(after - before).toBe(1);
  });
});

describe('the virtual garden’s ACL in audit mode (passthrough), rendered by Istio, served by a real Envoy', () => {
  let gw: IstioGateway;
  beforeAll(async () => {
    gw = await gateway('passthrough', gardenAclObjects('passthrough', { rule: { ...RULE.rule, mode: 'audit' } }));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('admits an outsider and counts what enforce would refuse in shadow_denied', async () => {
    const outsider = CLIENTS.find((c) => c.label === 'outsider IPv4')!;
    const before = (await gw.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.shadow_denied`) ?? 0;
    expect(await reaches(gw, 'passthrough', gardenHosts()[1]!, outsider)).toBe(true);
    const after = (await gw.envoy.stats('^gardener_acl_garden\\.')).get(`${GARDEN_STAT_PREFIX}rbac.shadow_denied`) ?? 0;
    expect(after - before).toBe(1);
  });
});

describe('the virtual garden’s filter written before its Gateway existed (a Garden’s first reconcile), once Istio serves the Gateway (TLS termination)', () => {
  let gw: IstioGateway;
  beforeAll(async () => {
    gw = await gateway('tls-termination', gardenAclObjects('tls-termination', RULE, { beforeGateway: true }));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('already protects every chain the Gateway brings, the wildcard server’s too', { timeout: 120_000 }, async () => {
    const wrong: string[] = [];
    for (const host of gardenHosts()) {
      for (const client of CLIENTS) {
        const got = await reaches(gw, 'tls-termination', host, client);
        if (got !== client.admitted) wrong.push(`${client.label} -> ${host}: ${got ? 'admitted' : 'refused'}, want ${client.admitted ? 'admitted' : 'refused'}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
