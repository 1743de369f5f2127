// The garden ACL's inputs and what it makes of them (src/gardener/garden-acl.ts): which ranges are
// always admitted, which chains are protected, and when it refuses to change anything (an input
// gardener-operator has not written yet, a virtual garden it cannot read, a ManagedSeed whose
// Shoot is gone), with the exact words the Extension's status shows.
import { describe, expect, it } from 'vitest';
import { formatCidr } from '../../src/acl/cidr.js';
import { defaultOperatorConfig, parseOperatorConfig } from '../../src/config/operator-config.js';
import { gardenAclFromInventory, gardenInventoryFromObjects, hasGardenClass, VIRTUAL_GARDEN_GATEWAY } from '../../src/gardener/garden-acl.js';
import { hasShootClass, isActive } from '../../src/gardener/extension-class.js';
import { extensionSchema } from '../../src/gardener/objects.js';
import { buildGardenEnvoyFilters } from '../../src/rbac/garden-envoy-filter.js';
import type { JsonObject } from '../envoy/json.js';
import { gardenExtension, gardenHosts, gardenObject, managedSeedObjects, virtualGardenRuntimeObjects, WILDCARD_HOST } from '../istio/garden-fixture.js';

const RULE = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } };
const SEEDS = managedSeedObjects([{ name: 'seed-eu', egressCIDRs: ['198.51.100.20/32'] }]);
const ext = (providerConfig: unknown = RULE) => extensionSchema.parse(gardenExtension(providerConfig));

function compute(objects: readonly JsonObject[], options: { readonly virtualGardenRead?: boolean; readonly providerConfig?: unknown; readonly operator?: ReturnType<typeof defaultOperatorConfig> } = {}) {
  return gardenAclFromInventory(ext(options.providerConfig ?? RULE), gardenInventoryFromObjects(objects, options.virtualGardenRead ?? true), options.operator ?? defaultOperatorConfig());
}

const complete = (exposure: 'tls-termination' | 'passthrough' = 'tls-termination') => [...virtualGardenRuntimeObjects(exposure), gardenObject(), ...SEEDS.managedSeeds, ...SEEDS.shoots];

describe('the garden ACL from the runtime cluster and the virtual garden', () => {
  it('admits the rule, the runtime nodes and pods, every ManagedSeed’s egress and the operator’s ranges, on every TLS server of the Gateway', () => {
    const parsed = parseOperatorConfig({ additionalAllowedCIDRs: ['192.0.2.0/28'] });
    if (!parsed.ok) throw new Error('operator config');
    const result = compute(complete(), { operator: parsed.config });
    if (result.kind !== 'acl') throw new Error(JSON.stringify(result));
    expect(result.acl.alwaysAllowed.map(formatCidr)).toEqual(['10.1.0.0/16', '100.96.0.0/11', '192.0.2.0/28', '198.51.100.20/32', 'fd00:10:1::/64']);
    expect(result.acl.sniChains.map((c) => [c.gateway.namespace, c.hosts])).toEqual([
      ['virtual-garden-istio-ingress', gardenHosts().filter((h) => h !== WILDCARD_HOST)],
      ['virtual-garden-istio-ingress', [WILDCARD_HOST]],
    ]);
    expect(result.warnings).toEqual([]);
  });

  it('writes one EnvoyFilter in the gateway’s namespace with one patch per chain, byte-identical whatever the order of its inputs', () => {
    const build = (objects: readonly JsonObject[]) => {
      const result = compute(objects);
      if (result.kind !== 'acl') throw new Error(JSON.stringify(result));
      return JSON.stringify(buildGardenEnvoyFilters(result.acl, 9443));
    };
    const once = build(complete());
    expect(build([...complete()].reverse())).toBe(once);
    const filters = JSON.parse(once) as { metadata: { name: string; namespace: string }; spec: { workloadSelector: unknown; configPatches: { match: { listener: unknown } }[] } }[];
    expect(filters.map((f) => `${f.metadata.namespace}/${f.metadata.name}`)).toEqual(['virtual-garden-istio-ingress/acl-virtual-garden']);
    expect(filters[0]!.spec.workloadSelector).toEqual({ labels: { app: 'istio-ingressgateway', istio: 'ingressgateway', 'istio-role': 'garden' } });
    expect(filters[0]!.spec.configPatches.map((p) => p.match.listener)).toEqual([
      { portNumber: 9443, filterChain: { sni: 'api.garden.example.test' } },
      { portNumber: 9443, filterChain: { sni: WILDCARD_HOST } },
    ]);
  });

  it('says which egress is unknown when the virtual garden cannot be read (a seed’s gardenlet could be locked out), with the ACL of what is known', () => {
    const result = compute(complete(), { virtualGardenRead: false });
    expect(result.kind === 'egress-unknown' && result.acl.alwaysAllowed.map(formatCidr)).toEqual(['10.1.0.0/16', '100.96.0.0/11', 'fd00:10:1::/64']);
    expect(result.kind === 'egress-unknown' && result.unknown).toEqual([
        {
          severity: 'error',
          object: 'virtual garden',
          message:
            'its ManagedSeeds cannot be read, so the egress of every seed’s gardenlet is unknown and an ACL could lock them out; the ACL is left as it was (check the controller’s virtual garden kubeconfig and its permissions to list ManagedSeeds and Shoots in namespace garden)',
        },
    ]);
  });

  it('says whose egress is unknown while a ManagedSeed’s Shoot is missing, and warns of a Shoot that reports no egress', () => {
    const missing = compute([...virtualGardenRuntimeObjects('passthrough'), gardenObject(), ...SEEDS.managedSeeds]);
    expect(missing.kind).toBe('egress-unknown');
    expect(missing.kind === 'egress-unknown' && missing.unknown.map((p) => `${p.object}: ${p.message}`)).toEqual([
      'ManagedSeed garden/seed-eu: its Shoot garden/seed-eu is not found, so its gardenlet’s egress is unknown; the ACL is left as it was until the Shoot exists or the ManagedSeed is gone',
    ]);
    const quiet = managedSeedObjects([{ name: 'seed-quiet' }]);
    const warned = compute([...virtualGardenRuntimeObjects('passthrough'), gardenObject(), ...quiet.managedSeeds, ...quiet.shoots]);
    expect(warned.kind === 'acl' && warned.warnings.map((p) => `${p.object}: ${p.message}`)).toEqual([
      'ManagedSeed garden/seed-quiet: Shoot garden/seed-quiet reports no status.networking.egressCIDRs (its infrastructure does not tell), so its gardenlet is admitted only if the rule or the operator’s additionalAllowedCIDRs admit its address',
    ]);
  });

  it('before the Gateway exists, protects ahead the hosts gardener-operator will give it, one chain per host on the garden’s gateway', () => {
    const noGateway = complete().filter((o) => !(o['kind'] === 'Gateway' && (o['metadata'] as { name: string }).name === VIRTUAL_GARDEN_GATEWAY.name));
    const result = compute(noGateway);
    if (result.kind !== 'acl') throw new Error(JSON.stringify(result));
    expect(result.ahead).toBe(true);
    expect(result.acl.sniChains.map((c) => `${c.gateway.namespace}: ${c.hosts.join(',')}`)).toEqual(gardenHosts().sort().map((h) => `virtual-garden-istio-ingress: ${h}`));
    const noGardenGateway = noGateway.filter((o) => o['kind'] !== 'Deployment');
    expect(compute(noGardenGateway)).toEqual({
      kind: 'waiting',
      reason: 'the Gateway garden/virtual-garden-kube-apiserver does not exist yet and its hosts cannot be protected ahead (no istio-ingressgateway Deployment with istio-role garden)',
    });
    expect(compute(complete().filter((o) => o['kind'] !== 'Garden'))).toEqual({ kind: 'waiting', reason: 'no Garden (operator.gardener.cloud) in the runtime cluster' });
  });

  it('before the virtual garden’s API server is deployed there is no ManagedSeed to lock out: a Garden’s first reconcile is not held up', () => {
    const first = gardenAclFromInventory(ext(), gardenInventoryFromObjects([...virtualGardenRuntimeObjects('passthrough'), gardenObject()], false, false), defaultOperatorConfig());
    expect(first.kind === 'acl' && first.acl.alwaysAllowed.map(formatCidr)).toEqual(['10.1.0.0/16', '100.96.0.0/11', 'fd00:10:1::/64']);
  });

  it('warns when the gateway cannot see client addresses (no PROXY protocol, externalTrafficPolicy Cluster)', () => {
    const result = compute([...virtualGardenRuntimeObjects('passthrough'), gardenObject({ proxyProtocol: false }), ...SEEDS.managedSeeds, ...SEEDS.shoots]);
    expect(result.kind === 'acl' && result.warnings.map((p) => `${p.object}: ${p.message}`)).toEqual([
      'Garden garden: the virtual garden’s ingress gateway may not see client addresses: without PROXY protocol (spec.runtimeCluster.settings.loadBalancerServices.proxyProtocol.allowed, with your load balancer’s PROXY annotation) and with externalTrafficPolicy Cluster, clients arrive from the runtime cluster’s node addresses, which the ACL always admits; set one of them',
    ]);
  });

  it('refuses an invalid rule as a configuration problem, in the shoot ACL’s words', () => {
    expect(compute(complete(), { providerConfig: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['10.0.0.300/8'] } } })).toEqual({
      kind: 'problem',
      configuration: true,
      problems: [
        {
          severity: 'error',
          object: 'Extension garden/garden-acl',
          message: 'spec.providerConfig.rule.cidrs[0]: "10.0.0.300/8" is not a valid CIDR ("10.0.0.300" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48',
        },
      ],
    });
  });

  it('a garden-class Extension belongs to the garden controller only: the seed’s controller, combined filters and webhook leave it alone (C7)', () => {
    const inSeedNamespace = extensionSchema.parse(gardenExtension(RULE, 'shoot--p--foo'));
    expect([hasGardenClass(inSeedNamespace), hasShootClass(inSeedNamespace), isActive(inSeedNamespace)]).toEqual([true, false, false]);
    const shootClass = extensionSchema.parse({ ...gardenExtension(RULE), spec: { type: 'acl', providerConfig: RULE } });
    expect(hasGardenClass(shootClass)).toBe(false);
  });
});
