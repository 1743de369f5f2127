// The virtual garden's ACL from the runtime cluster's objects and the virtual garden's
// ManagedSeeds: the owner's rule from the `garden`-class Extension gardener-operator writes from
// the Garden's spec.extensions, admitted always: the runtime cluster's nodes and pods (the garden's
// own components reach the virtual garden's API server through the same ingress gateway, from pod
// addresses), the egress of every ManagedSeed's shoot (its gardenlet) and the operator's ranges.
// Which chains: every TLS server of gardener-operator's Gateway garden/virtual-garden-kube-apiserver
// (api.<domain> and gardener.<domain> of every virtual garden domain, both the same API server).
import { normalizeCidrSet } from '../acl/cidr.js';
import { formatFieldErrors } from '../acl/field-errors.js';
import type { GardenAcl, GatewayWorkload, SniChain } from '../acl/model.js';
import type { OperatorConfig } from '../acl/operator-settings.js';
import { CidrCollector } from './cidr-collector.js';
import { EXTENSION_TYPE } from './extension-class.js';
import { gardenSchema, gardenShootSchema, managedSeedSchema, type Garden, type GardenShoot, type ManagedSeed } from './garden-objects.js';
import { GATEWAY_DEPLOYMENT, podLabels, resolveGateway, sortedLabels, tlsChains } from './gateway-workloads.js';
import { deploymentSchema, gatewaySchema, type Deployment, type Extension, type Gateway } from './objects.js';
import { hostsOnEveryGateway } from './predicted-api-hosts.js';
import { objectRef, type Problem } from './problems.js';
import { parsedProviderConfig } from './seed-acl.js';

export const GARDEN_CLASS = 'garden';
/** gardener-operator's Extension for a Garden's spec.extensions entry of type acl (NamePrefix garden-). */
export const GARDEN_EXTENSION = { namespace: 'garden', name: `garden-${EXTENSION_TYPE}` } as const;
/** The Istio Gateway gardener-operator writes for the virtual garden's kube-apiserver. */
export const VIRTUAL_GARDEN_GATEWAY = { namespace: 'garden', name: 'virtual-garden-kube-apiserver' } as const;
/** The virtual garden's kube-apiserver Deployment in the runtime cluster (gardener-operator's, same name). */
export const VIRTUAL_GARDEN_APISERVER = { namespace: 'garden', name: 'virtual-garden-kube-apiserver' } as const;

export function hasGardenClass(ext: Pick<Extension, 'spec'>): boolean {
  return ext.spec.class === GARDEN_CLASS;
}

/** What the garden ACL reads. `managedSeeds`/`gardenShoots` undefined: the virtual garden cannot be read (yet). */
export interface GardenInventory {
  readonly gardens: readonly Garden[];
  readonly gateways: readonly Gateway[];
  readonly deployments: readonly Deployment[];
  /**
   * Whether the virtual garden's kube-apiserver Deployment exists in the runtime cluster. Before it
   * does (a Garden's first reconcile, which deploys extensions of lifecycle BeforeKubeAPIServer
   * before the API server) no ManagedSeed can exist, so none can be locked out.
   */
  readonly virtualGardenDeployed: boolean;
  readonly managedSeeds: readonly ManagedSeed[] | undefined;
  readonly gardenShoots: readonly GardenShoot[] | undefined;
}

export type GardenAclResult =
  /** `ahead`: no Gateway yet; the chains are the hosts it will have (api.<d> and gardener.<d> of every domain), one per host. */
  | { readonly kind: 'acl'; readonly acl: GardenAcl; readonly warnings: readonly Problem[]; readonly ahead: boolean }
  /**
   * Computable but for some ManagedSeed's egress (the virtual garden cannot be read, or a
   * ManagedSeed's Shoot is missing, `unknown` says which): `acl` admits only the egress that is
   * known. Applied alone it could lock a gardenlet out; the actuator may only widen what is in force.
   */
  | { readonly kind: 'egress-unknown'; readonly acl: GardenAcl; readonly warnings: readonly Problem[]; readonly ahead: boolean; readonly unknown: readonly Problem[] }
  /** Not computable now; the stored protection stays as it is. `configuration`: only the owner can fix it. */
  | { readonly kind: 'problem'; readonly problems: readonly Problem[]; readonly configuration: boolean }
  /** An input gardener-operator writes next to the Extension is not there yet. */
  | { readonly kind: 'waiting'; readonly reason: string };

/** The virtual garden's ingress gateways: gardener-operator's `istio-ingressgateway` with role garden. */
function gardenGatewayWorkloads(deployments: readonly Deployment[]): GatewayWorkload[] {
  return deployments
    .filter((d) => d.metadata.name === GATEWAY_DEPLOYMENT && !d.metadata.deletionTimestamp && podLabels(d)['istio-role'] === GARDEN_CLASS)
    .map((d) => ({ namespace: d.metadata.namespace, selector: sortedLabels(d.spec.selector.matchLabels) }))
    .sort((a, b) => a.namespace.localeCompare(b.namespace));
}

/** The known egress of every ManagedSeed's shoot; `unknown` gets an error for each egress that cannot be known now. */
function managedSeedEgress(inv: GardenInventory, problems: Problem[], warnings: Problem[], unknown: Problem[]): CidrCollector {
  if ((inv.managedSeeds === undefined || inv.gardenShoots === undefined) && !inv.virtualGardenDeployed) return new CidrCollector(problems, 'virtual garden');
  if (inv.managedSeeds === undefined || inv.gardenShoots === undefined) {
    unknown.push({
      severity: 'error',
      object: 'virtual garden',
      message: 'its ManagedSeeds cannot be read, so the egress of every seed’s gardenlet is unknown and an ACL could lock them out; the ACL is left as it was (check the controller’s virtual garden kubeconfig and its permissions to list ManagedSeeds and Shoots in namespace garden)',
    });
    return new CidrCollector(problems, 'virtual garden');
  }
  const shoots = new Map(inv.gardenShoots.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s]));
  const egress = new CidrCollector(problems, 'virtual garden');
  for (const seed of [...inv.managedSeeds].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
    const seedRef = objectRef('ManagedSeed', seed.metadata.namespace, seed.metadata.name);
    const shootName = seed.spec.shoot?.name;
    if (shootName === undefined) continue;
    const shoot = shoots.get(`${seed.metadata.namespace}/${shootName}`);
    const shootRef = objectRef('Shoot', seed.metadata.namespace, shootName);
    if (!shoot) {
      unknown.push({ severity: 'error', object: seedRef, message: `its ${shootRef} is not found, so its gardenlet’s egress is unknown; the ACL is left as it was until the Shoot exists or the ManagedSeed is gone` });
      continue;
    }
    const cidrs = shoot.status?.networking?.egressCIDRs ?? [];
    if (cidrs.length === 0) {
      warnings.push({
        severity: 'warning',
        object: seedRef,
        message: `${shootRef} reports no status.networking.egressCIDRs (its infrastructure does not tell), so its gardenlet is admitted only if the rule or the operator’s additionalAllowedCIDRs admit its address`,
      });
    }
    const collector = new CidrCollector(problems, shootRef);
    cidrs.forEach((c, i) => collector.add(c, `status.networking.egressCIDRs[${i}]`));
    egress.cidrs.push(...collector.cidrs);
  }
  return egress;
}

/** The hosts gardener-operator gives the virtual garden's Gateway: api.<d> and gardener.<d> of every domain (components.go getAPIServerDomains). */
export function predictedGardenHosts(garden: Garden): string[] {
  const domains = (garden.spec.virtualCluster?.dns?.domains ?? []).map((d) => d.name).filter((d) => d !== '');
  return [...new Set(domains.flatMap((d) => [`api.${d}`, `gardener.${d}`]))].sort();
}

/** Whether the gateway sees the clients' own addresses (PROXY protocol, or a load balancer that keeps them with externalTrafficPolicy Local). */
function clientAddressWarning(garden: Garden, gardenRef: string): Problem | undefined {
  const lb = garden.spec.runtimeCluster.settings?.loadBalancerServices;
  if (lb?.proxyProtocol?.allowed === true || lb?.externalTrafficPolicy === 'Local') return undefined;
  return {
    severity: 'warning',
    object: gardenRef,
    message:
      'the virtual garden’s ingress gateway may not see client addresses: without PROXY protocol (spec.runtimeCluster.settings.loadBalancerServices.proxyProtocol.allowed, with your load balancer’s PROXY annotation) and with externalTrafficPolicy Cluster, clients arrive from the runtime cluster’s node addresses, which the ACL always admits; set one of them',
  };
}

export function gardenAclFromInventory(extension: Extension, inv: GardenInventory, operator: OperatorConfig): GardenAclResult {
  const extRef = objectRef('Extension', extension.metadata.namespace, extension.metadata.name);
  const config = parsedProviderConfig(extension.spec.providerConfig, operator.maxCIDRs);
  if (!config.ok) return { kind: 'problem', configuration: true, problems: [{ severity: 'error', object: extRef, message: formatFieldErrors(config.errors) }] };
  const problems: Problem[] = [];
  const warnings: Problem[] = config.warnings.map((w) => ({ severity: 'warning', object: extRef, message: `${w.path}: ${w.message}` }));

  const live = inv.gardens.filter((g) => !g.metadata.deletionTimestamp);
  if (live.length !== 1) {
    const names = inv.gardens.map((g) => g.metadata.name).join(', ');
    return live.length === 0
      ? { kind: 'waiting', reason: 'no Garden (operator.gardener.cloud) in the runtime cluster' }
      : { kind: 'problem', configuration: false, problems: [{ severity: 'error', object: extRef, message: `the runtime cluster has ${live.length} Gardens (${names}); gardener-operator allows one, so whose ranges to admit is unclear` }] };
  }
  const garden = live[0] as Garden;
  const gardenRef = objectRef('Garden', undefined, garden.metadata.name);
  const runtime = new CidrCollector(problems, gardenRef);
  const networking = garden.spec.runtimeCluster.networking;
  (networking.nodes ?? []).forEach((c, i) => runtime.add(c, `spec.runtimeCluster.networking.nodes[${i}]`));
  (networking.pods ?? []).forEach((c, i) => runtime.add(c, `spec.runtimeCluster.networking.pods[${i}]`));
  const addressWarning = clientAddressWarning(garden, gardenRef);
  if (addressWarning) warnings.push(addressWarning);
  const unknown: Problem[] = [];
  const seeds = managedSeedEgress(inv, problems, warnings, unknown);

  const gateway = inv.gateways.find((g) => g.metadata.namespace === VIRTUAL_GARDEN_GATEWAY.namespace && g.metadata.name === VIRTUAL_GARDEN_GATEWAY.name);
  const gatewayRef = objectRef('Gateway', VIRTUAL_GARDEN_GATEWAY.namespace, VIRTUAL_GARDEN_GATEWAY.name);
  const workloads = gardenGatewayWorkloads(inv.deployments);
  let sniChains: SniChain[];
  if (gateway) {
    const workload = resolveGateway(gateway, inv.deployments, workloads);
    if (typeof workload === 'string') problems.push({ severity: 'error', object: gatewayRef, message: workload });
    sniChains = typeof workload === 'string' ? [] : tlsChains(gateway, workload);
    if (typeof workload !== 'string' && sniChains.length === 0) problems.push({ severity: 'error', object: gatewayRef, message: 'has no TLS server with a host name; the virtual garden’s API server chain cannot be found' });
  } else {
    // gardener-operator writes the Gateway after the API server (and after extensions of lifecycle
    // BeforeKubeAPIServer): the filter goes ahead on the garden's gateway for the hosts it will
    // have, so the chain is protected from the moment Istio serves it.
    const hosts = predictedGardenHosts(garden);
    if (workloads.length !== 1 || hosts.length === 0) {
      const missing = workloads.length === 0 ? `no ${GATEWAY_DEPLOYMENT} Deployment with istio-role garden` : hosts.length === 0 ? 'no spec.virtualCluster.dns.domains in the Garden' : `${workloads.length} ${GATEWAY_DEPLOYMENT} Deployments with istio-role garden`;
      return { kind: 'waiting', reason: `the Gateway ${gatewayRef.slice('Gateway '.length)} does not exist yet and its hosts cannot be protected ahead (${missing})` };
    }
    sniChains = hostsOnEveryGateway(hosts, workloads);
  }

  if (problems.length > 0) return { kind: 'problem', configuration: false, problems };
  const acl = { rule: config.rule, alwaysAllowed: normalizeCidrSet([...runtime.cidrs, ...seeds.cidrs, ...operator.additionalAllowedCIDRs]), sniChains };
  if (unknown.length > 0) return { kind: 'egress-unknown', acl, warnings, ahead: !gateway, unknown };
  return { kind: 'acl', acl, warnings, ahead: !gateway };
}

/**
 * The garden inventory from a list of objects (files, or a test's fixture): each kind the garden
 * ACL reads, checked by its schema; an object that does not fit is an error naming it.
 * ManagedSeeds and Shoots count as read when `virtualGardenRead`.
 */
export function gardenInventoryFromObjects(objects: readonly unknown[], virtualGardenRead: boolean, virtualGardenDeployed = true): GardenInventory {
  const gardens: Garden[] = [];
  const gateways: Gateway[] = [];
  const deployments: Deployment[] = [];
  const managedSeeds: ManagedSeed[] = [];
  const gardenShoots: GardenShoot[] = [];
  for (const [index, object] of objects.entries()) {
    const kind = (object as { kind?: unknown } | null)?.kind;
    const take = <T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { message: string } } }, into: T[]): void => {
      const parsed = schema.safeParse(object);
      if (!parsed.success) throw new Error(`object #${index} (${String(kind)}): ${parsed.error.message}`);
      into.push(parsed.data);
    };
    if (kind === 'Garden') take(gardenSchema, gardens);
    else if (kind === 'Gateway') take(gatewaySchema, gateways);
    else if (kind === 'Deployment') take(deploymentSchema, deployments);
    else if (kind === 'ManagedSeed') take(managedSeedSchema, managedSeeds);
    else if (kind === 'Shoot') take(gardenShootSchema, gardenShoots);
  }
  return { gardens, gateways, deployments, virtualGardenDeployed, managedSeeds: virtualGardenRead ? managedSeeds : undefined, gardenShoots: virtualGardenRead ? gardenShoots : undefined };
}
