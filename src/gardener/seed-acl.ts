import { normalizeCidrSet, type Cidr } from '../acl/cidr.js';
import { formatFieldErrors } from '../acl/field-errors.js';
import type { GatewayWorkload, Labels, ObservabilityWildcard, SeedAcl, ShootAcl, SniChain } from '../acl/model.js';
import type { OperatorConfig } from '../acl/operator-settings.js';
import { parseProviderConfig, type ProviderConfigResult } from '../acl/provider-config.js';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import type { Cluster, ConfigMap, Deployment, DnsRecord, Extension, Gateway, Infrastructure, Pod, Service } from './objects.js';
import { hostsOnEveryGateway, predictedApiHosts } from './predicted-api-hosts.js';
import { objectRef, type Problem } from './problems.js';
import { EXTENSION_TYPE, hasShootClass } from './extension-class.js';
import { perObject } from '../json/per-object.js';
import { CidrCollector } from './cidr-collector.js';
import { GATEWAY_DEPLOYMENT, isSubset, isTlsServer, podLabels, resolveGateway, serverHosts, sortedLabels, tlsChains } from './gateway-workloads.js';

export { EXTENSION_TYPE };
const OBSERVABILITY_GATEWAY = { namespace: 'garden', name: 'nginx-ingress-controller' };
const SHOOT_INFO = { namespace: 'kube-system', name: 'shoot-info' };

/**
 * The namespaces whose Infrastructures, Gateways and DNSRecords one shoot's ACL reads: its own and the
 * observability gateway's. With the Cluster named like the namespace and every Deployment, Service
 * and ConfigMap, they make an inventory that computes the shoot's ACL (shootAclFromInventory) as
 * the whole seed's would; checks across shoots (seedAclFromInventory's one acl Extension per
 * namespace) need the whole seed.
 */
export function shootInventoryNamespaces(namespace: string): string[] {
  return namespace === OBSERVABILITY_GATEWAY.namespace ? [namespace] : [namespace, OBSERVABILITY_GATEWAY.namespace];
}

/** The seed objects the ACL depends on, from files (render) or informer caches (controller). */
export interface SeedInventory {
  readonly extensions: readonly Extension[];
  readonly clusters: readonly Cluster[];
  readonly infrastructures: readonly Infrastructure[];
  readonly dnsRecords: readonly DnsRecord[];
  readonly gateways: readonly Gateway[];
  readonly deployments: readonly Deployment[];
  readonly services: readonly Service[];
  readonly configMaps: readonly ConfigMap[];
  /** Gateway pods (label app=istio-ingressgateway); absent where unknown (files), then each Deployment's selector is used as it is. */
  readonly gatewayPods?: readonly Pod[];
}

export interface SeedAclResult {
  readonly seed: SeedAcl;
  readonly problems: readonly Problem[];
}




/**
 * Whether a change of gateway Deployments (`changed`: each as it was and as it is) can change what
 * a shoot's ACL writes: its recorded gateways include one of their namespaces, a Gateway it reads
 * (`gateways`: its own and the observability gateway's) selects one of them before or after, or it
 * has no Gateway of its own yet (its filter is then written ahead on every gateway).
 */
export function gatewayChangeAffects(changed: readonly Deployment[], gateways: readonly Gateway[], hasOwnGateway: boolean, recordedGatewayNamespaces: readonly string[]): boolean {
  if (!hasOwnGateway) return true;
  if (changed.some((d) => recordedGatewayNamespaces.includes(d.metadata.namespace))) return true;
  return gateways.some((g) => changed.some((d) => isSubset(g.spec.selector, podLabels(d))));
}

/** Seed ingress gateways: every `istio-ingressgateway` except the virtual garden's. */
export function seedGatewayWorkloads(deployments: readonly Deployment[], pods: readonly Pod[] = []): GatewayWorkload[] {
  return deployments
    .filter((d) => d.metadata.name === GATEWAY_DEPLOYMENT && !d.metadata.deletionTimestamp)
    .filter((d) => podLabels(d)['istio-role'] !== 'garden' && !d.metadata.namespace.startsWith('virtual-garden-'))
    .map((d) => ({ namespace: d.metadata.namespace, selector: sortedLabels(selectingServingPods(d.spec.selector.matchLabels, pods.filter((p) => p.metadata.namespace === d.metadata.namespace))) }))
    .sort((a, b) => a.namespace.localeCompare(b.namespace));
}

/**
 * The Deployment's selector without the labels a gateway pod that may still serve lacks: a
 * Deployment recreated with another selector leaves the previous pods serving (and draining) while
 * the new ones start, and a filter selecting only the new ones would leave those unprotected. Once
 * they are gone the selector is the Deployment's again. (An empty selector selects every workload
 * of the gateway's namespace.)
 */
function selectingServingPods(selector: Labels, pods: readonly Pod[]): Labels {
  const serving = pods.filter((p) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed');
  return Object.fromEntries(Object.entries(selector).filter(([key, value]) => serving.every((p) => p.metadata.labels?.[key] === value)));
}





function managedSeedEgress(inv: SeedInventory, gateways: readonly GatewayWorkload[], problems: Problem[]): { cidrs: Cidr[]; ok: boolean } {
  // A Proxy-mode load balancer hairpins the seed's own traffic through its egress addresses.
  const proxyMode = inv.services.some(
    (s) =>
      s.metadata.name === GATEWAY_DEPLOYMENT &&
      gateways.some((g) => g.namespace === s.metadata.namespace) &&
      (s.status?.loadBalancer?.ingress ?? []).some((i) => i.ipMode === 'Proxy'),
  );
  if (!proxyMode) return { cidrs: [], ok: true };
  const shootInfo = inv.configMaps.find((c) => c.metadata.namespace === SHOOT_INFO.namespace && c.metadata.name === SHOOT_INFO.name);
  if (!shootInfo) return { cidrs: [], ok: true };
  const ref = objectRef('ConfigMap', SHOOT_INFO.namespace, SHOOT_INFO.name);
  const value = shootInfo.data?.egressCIDRs;
  if (value === undefined) {
    problems.push({ severity: 'error', object: ref, message: 'data.egressCIDRs is missing; a managed seed behind a Proxy-mode load balancer needs it to keep its own traffic admitted' });
    return { cidrs: [], ok: false };
  }
  const collector = new CidrCollector(problems, ref);
  value.split(',').forEach((entry, i) => collector.add(entry.trim(), `data.egressCIDRs[${i}]`));
  return { cidrs: collector.cidrs, ok: collector.ok };
}

/**
 * The cached Extensions keep the same providerConfig object until it changes, and the served
 * check and every combined sync read all of them: parsed once per object (a third of a 2,000-shoot
 * pass was zod), per CIDR limit.
 */
const parsedConfigs = perObject((_raw: object) => new Map<number, ProviderConfigResult>());

export function parsedProviderConfig(raw: unknown, maxCidrs: number): ProviderConfigResult {
  if (typeof raw !== 'object' || raw === null) return parseProviderConfig(raw, maxCidrs, 'spec.providerConfig');
  const byLimit = parsedConfigs(raw);
  const known = byLimit.get(maxCidrs);
  if (known !== undefined) return known;
  const result = parseProviderConfig(raw, maxCidrs, 'spec.providerConfig');
  byLimit.set(maxCidrs, result);
  return result;
}

function byNamespaceName<T extends { metadata: { name: string; namespace?: string | undefined } }>(items: readonly T[], namespace: string, name: string): T | undefined {
  return items.find((i) => i.metadata.namespace === namespace && i.metadata.name === name);
}

/** The namespaced objects of the inventory by namespace: a whole-seed pass looked each shoot's up in every list (2,000 shoots: seconds). */
interface InventoryIndex {
  readonly clusters: ReadonlyMap<string, SeedInventory['clusters'][number]>;
  readonly infrastructures: ReadonlyMap<string, readonly SeedInventory['infrastructures'][number][]>;
  readonly gateways: ReadonlyMap<string, readonly SeedInventory['gateways'][number][]>;
  readonly dnsRecords: ReadonlyMap<string, readonly SeedInventory['dnsRecords'][number][]>;
}

function groupByNamespace<T extends { metadata: { namespace?: string | undefined } }>(items: readonly T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const namespace = item.metadata.namespace ?? '';
    const group = groups.get(namespace);
    if (group) group.push(item);
    else groups.set(namespace, [item]);
  }
  return groups;
}

function indexInventory(inv: SeedInventory): InventoryIndex {
  const clusters = new Map<string, SeedInventory['clusters'][number]>();
  // The first of a name wins, as a search of the list would find it.
  for (const cluster of inv.clusters) if (!clusters.has(cluster.metadata.name)) clusters.set(cluster.metadata.name, cluster);
  return { clusters, infrastructures: groupByNamespace(inv.infrastructures), gateways: groupByNamespace(inv.gateways), dnsRecords: groupByNamespace(inv.dnsRecords) };
}

/** What every shoot of the seed shares: its gateways and the seed-wide always-allowed ranges. */
export interface SeedContext {
  readonly inv: SeedInventory;
  readonly index: InventoryIndex;
  readonly operator: OperatorConfig;
  readonly gateways: readonly GatewayWorkload[];
  readonly observabilityWildcards: readonly ObservabilityWildcard[];
  readonly seedWideAllowed: readonly Cidr[];
  /** false when a seed-wide input is broken; then no shoot's ACL may change. */
  readonly seedInputsOk: boolean;
  readonly problems: readonly Problem[];
}

export function seedContext(inv: SeedInventory, operator: OperatorConfig): SeedContext {
  const problems: Problem[] = [];
  const gateways = seedGatewayWorkloads(inv.deployments, inv.gatewayPods);
  const egress = managedSeedEgress(inv, gateways, problems);
  const wildcards = observabilityWildcards(inv, gateways, problems);
  return {
    inv,
    index: indexInventory(inv),
    operator,
    gateways,
    observabilityWildcards: wildcards,
    seedWideAllowed: [...operator.additionalAllowedCIDRs, ...egress.cidrs],
    seedInputsOk: egress.ok,
    problems,
  };
}

export interface ShootAclResult {
  /** undefined when an error below keeps the shoot's ACL from being (re)computed. */
  readonly acl?: ShootAcl | undefined;
  readonly problems: readonly Problem[];
  /** The problems include an invalid providerConfig: retrying without a spec change cannot help. */
  readonly configurationProblem: boolean;
  /**
   * No Gateway in the shoot namespace (not yet deployed, or being deleted): the SNI chains are
   * the predicted hosts on every gateway of the seed (predicted-api-hosts.ts).
   */
  readonly noGateways: boolean;
}

/** One shoot's ACL model from its Extension and the seed's objects. */
export function shootAclFromInventory(extension: Extension, ctx: SeedContext): ShootAclResult {
  const problems: Problem[] = [];
  let configurationProblem = false;
  let noGateways = false;
  const acl = computeShootAcl(extension, ctx, problems, {
    configurationProblem: () => (configurationProblem = true),
    noGateways: () => (noGateways = true),
  });
  return { acl, problems, configurationProblem, noGateways };
}

function computeShootAcl(
  extension: Extension,
  ctx: SeedContext,
  problems: Problem[],
  flag: { configurationProblem: () => void; noGateways: () => void },
): ShootAcl | undefined {
  const { inv, operator } = ctx;
  const namespace = extension.metadata.namespace;
  const extRef = objectRef('Extension', namespace, extension.metadata.name);
  const fail = (object: string, message: string): undefined => {
    problems.push({ severity: 'error', object, message });
    return undefined;
  };

  const config = parsedProviderConfig(extension.spec.providerConfig, operator.maxCIDRs);
  if (!config.ok) {
    flag.configurationProblem();
    return fail(extRef, formatFieldErrors(config.errors));
  }
  for (const warning of config.warnings) problems.push({ severity: 'warning', object: extRef, message: `${warning.path}: ${warning.message}` });
  if (!ctx.seedInputsOk) return fail(extRef, 'a seed-wide input is invalid (see the seed problems); the ACL is left as it was');

  const cluster = ctx.index.clusters.get(namespace);
  if (!cluster) return fail(extRef, `Cluster "${namespace}" not found; Gardener writes it before the Extension, so the seed inputs are incomplete`);
  const clusterRef = objectRef('Cluster', undefined, namespace);
  const shoot = cluster.spec.shoot;
  const technicalID = shoot.status?.technicalID ?? namespace;
  if (technicalID !== namespace) return fail(clusterRef, `spec.shoot.status.technicalID "${technicalID}" differs from the Extension's namespace "${namespace}"`);
  if (!parseTechnicalID(technicalID)) return fail(extRef, `namespace "${namespace}" is not a shoot technical ID (shoot--<project>--<name> or shoot-<project>--<name>)`);

  const always = new CidrCollector(problems, clusterRef);
  const seedNetworks = cluster.spec.seed?.spec.networks;
  always.add(seedNetworks?.nodes, 'spec.seed.spec.networks.nodes');
  always.add(seedNetworks?.pods, 'spec.seed.spec.networks.pods');
  const workerless = (shoot.spec.provider?.workers ?? []).length === 0;
  const legacy = new CidrCollector(problems, clusterRef);
  if (!workerless) {
    always.add(shoot.spec.networking?.nodes, 'spec.shoot.spec.networking.nodes');
    legacy.add(shoot.spec.networking?.pods, 'spec.shoot.spec.networking.pods');
    const infra = byNamespaceName(ctx.index.infrastructures.get(namespace) ?? [], namespace, shoot.metadata.name);
    const infraRef = objectRef('Infrastructure', namespace, shoot.metadata.name);
    if (!infra) {
      problems.push({ severity: 'error', object: infraRef, message: 'not found; a shoot with workers needs it for status.egressCIDRs (its nodes would be cut off otherwise)' });
    } else {
      const egress = new CidrCollector(problems, infraRef);
      (infra.status?.egressCIDRs ?? []).forEach((c, i) => egress.add(c, `status.egressCIDRs[${i}]`));
      always.cidrs.push(...egress.cidrs);
    }
  }

  const sniChains: SniChain[] = [];
  const shootGateways = [...(ctx.index.gateways.get(namespace) ?? [])].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  for (const gateway of shootGateways) {
    if (!gateway.spec.servers.some(isTlsServer)) continue;
    const workload = resolveGateway(gateway, inv.deployments, ctx.gateways);
    if (typeof workload === 'string') {
      problems.push({ severity: 'error', object: objectRef('Gateway', namespace, gateway.metadata.name), message: workload });
      continue;
    }
    sniChains.push(...tlsChains(gateway, workload));
  }
  if (shootGateways.length === 0) {
    flag.noGateways();
    const shortID = parseTechnicalID(technicalID)?.shortID ?? technicalID;
    const hosts = predictedApiHosts(cluster, shortID, ctx.index.dnsRecords.get(namespace) ?? []);
    sniChains.push(...hostsOnEveryGateway(hosts, ctx.gateways));
    if (hosts.length === 0) {
      problems.push({
        severity: 'warning',
        object: extRef,
        message: `no Gateway in namespace ${namespace} and no API server host known ahead (no spec.shoot.spec.dns.domain, DNSRecord or seed ingress domain); its API server SNI chains get no filter until the Gateway exists`,
      });
    }
  }

  if (problems.some((p) => p.severity === 'error')) return undefined;
  return {
    technicalID,
    rule: config.rule,
    alwaysAllowed: normalizeCidrSet([...always.cidrs, ...ctx.seedWideAllowed]),
    legacyProxyAllowed: normalizeCidrSet(legacy.cidrs),
    sniChains,
  };
}

function observabilityWildcards(inv: SeedInventory, gateways: readonly GatewayWorkload[], problems: Problem[]): ObservabilityWildcard[] {
  const gateway = byNamespaceName(inv.gateways, OBSERVABILITY_GATEWAY.namespace, OBSERVABILITY_GATEWAY.name);
  if (!gateway) return [];
  const workload = resolveGateway(gateway, inv.deployments, gateways);
  if (typeof workload === 'string') {
    problems.push({ severity: 'error', object: objectRef('Gateway', OBSERVABILITY_GATEWAY.namespace, OBSERVABILITY_GATEWAY.name), message: workload });
    return [];
  }
  const domains = new Set(
    gateway.spec.servers
      .filter(isTlsServer)
      .flatMap(serverHosts)
      .filter((h) => h.startsWith('*.'))
      .map((h) => h.slice(2)),
  );
  return [...domains].sort().map((domain) => ({ gateway: workload, domain }));
}

/**
 * The seed's ACL model from its objects. Shoots whose inputs are invalid or incomplete are left
 * out and reported as errors: the caller decides whether to keep their previous protection.
 */
export function seedAclFromInventory(inv: SeedInventory, operator: OperatorConfig): SeedAclResult {
  const ctx = seedContext(inv, operator);
  const problems: Problem[] = [...ctx.problems];
  const extensions = inv.extensions
    .filter((e) => e.spec.type === EXTENSION_TYPE && hasShootClass(e) && !e.metadata.deletionTimestamp)
    .sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace));
  const shoots: ShootAcl[] = [];
  const seen = new Set<string>();
  for (const extension of extensions) {
    if (seen.has(extension.metadata.namespace)) {
      problems.push({ severity: 'error', object: objectRef('Extension', extension.metadata.namespace, extension.metadata.name), message: 'a second Extension of type acl in this namespace; only one is allowed' });
      continue;
    }
    seen.add(extension.metadata.namespace);
    const result = shootAclFromInventory(extension, ctx);
    problems.push(...result.problems);
    if (result.acl) shoots.push(result.acl);
  }
  if (shoots.length > 0 && ctx.gateways.length === 0) {
    problems.push({ severity: 'error', object: 'seed', message: `no ${GATEWAY_DEPLOYMENT} Deployment found; the HTTP-CONNECT paths cannot be protected` });
  }
  return { seed: { operator, gateways: ctx.gateways, observabilityWildcards: ctx.observabilityWildcards, shoots }, problems };
}
