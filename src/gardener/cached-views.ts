// What the controller's informer caches keep of each object: the fields the extension reads (the
// schemas in objects.ts), nothing else. A seed's Clusters embed whole Shoots, Seeds and
// CloudProfiles, every object carries managedFields, and Extensions of every other type carry
// their own providerConfig and status; none of that is read, and at hundreds of shoots it is most
// of what a full cache would hold.
import { createHash } from 'node:crypto';
import { isRecord } from '../kube/object-json.js';
import type { KubeObjectJson } from '../kube/object-json.js';
import { FORCE_DELETION_ANNOTATION, type Cluster, type Deployment, type DnsRecord, type Extension, type Infrastructure, type Pod, type Service } from './objects.js';
import { EXTENSION_TYPE } from './seed-acl.js';

type Metadata = Cluster['metadata'];


// Large and never read: the server's field ownership and kubectl's copy of the last applied object.
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

function definedOnly<T extends Record<string, unknown>>(object: T): T {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as T;
}

function slimMetadata<M extends Metadata>(metadata: M): M {
  const { managedFields: _managedFields, annotations, ...rest } = metadata as M & { managedFields?: unknown };
  if (!annotations || !(LAST_APPLIED in annotations)) return (annotations ? { ...rest, annotations } : rest) as M;
  const { [LAST_APPLIED]: _lastApplied, ...kept } = annotations;
  return { ...rest, annotations: kept } as M;
}

/** The embedded Shoot's metadata as read: its name and the force-deletion annotation (a real Shoot carries dozens of labels and annotations). */
function shootMetadata(metadata: Metadata): Metadata {
  const forceDeletion = metadata.annotations?.[FORCE_DELETION_ANNOTATION];
  return definedOnly({
    name: metadata.name,
    namespace: metadata.namespace,
    ...(forceDeletion !== undefined ? { annotations: { [FORCE_DELETION_ANNOTATION]: forceDeletion } } : {}),
  });
}

/** A Cluster as the extension reads it: the shoot's name, force-deletion annotation, networks, workers, hibernation, DNS domain and status; the seed's networks and ingress domain. */
export function cachedCluster(cluster: Cluster): Cluster {
  const { shoot, seed } = cluster.spec;
  const networking = shoot.spec.networking;
  const workers = shoot.spec.provider?.workers;
  const status = shoot.status;
  return {
    apiVersion: cluster.apiVersion,
    kind: cluster.kind,
    metadata: slimMetadata(cluster.metadata),
    spec: {
      shoot: {
        metadata: shootMetadata(shoot.metadata),
        spec: definedOnly({
          networking: networking ? definedOnly({ nodes: networking.nodes, pods: networking.pods }) : networking,
          // Only whether there are workers is read.
          provider: shoot.spec.provider ? { workers: workers ? workers.map(() => ({})) : workers } : shoot.spec.provider,
          hibernation: shoot.spec.hibernation ? definedOnly({ enabled: shoot.spec.hibernation.enabled }) : shoot.spec.hibernation,
          dns: shoot.spec.dns ? definedOnly({ domain: shoot.spec.dns.domain }) : shoot.spec.dns,
        }),
        status: status
          ? definedOnly({
              technicalID: status.technicalID,
              lastOperation: status.lastOperation ? definedOnly({ type: status.lastOperation.type, state: status.lastOperation.state }) : status.lastOperation,
              advertisedAddresses: status.advertisedAddresses?.map((a) => ({ name: a.name, url: a.url })) ?? status.advertisedAddresses,
            })
          : status,
      },
      seed: seed
        ? {
            ...(seed.metadata ? { metadata: definedOnly({ name: seed.metadata.name }) } : {}),
            spec: definedOnly({
              networks: seed.spec.networks ? definedOnly({ nodes: seed.spec.networks.nodes, pods: seed.spec.networks.pods }) : seed.spec.networks,
              ingress: seed.spec.ingress ? definedOnly({ domain: seed.spec.ingress.domain }) : seed.spec.ingress,
            }),
          }
        : seed,
    },
  };
}

/** An acl Extension whole (its status is read and merged), without managedFields; of any other type, only what tells it is not ours. */
export function cachedExtension(extension: Extension): Extension {
  const metadata = slimMetadata(extension.metadata);
  if (extension.spec.type === EXTENSION_TYPE) return { ...extension, metadata };
  return { apiVersion: extension.apiVersion, kind: extension.kind, metadata, spec: definedOnly({ type: extension.spec.type, class: extension.spec.class }) };
}

export function cachedInfrastructure(infrastructure: Infrastructure): Infrastructure {
  const egress = infrastructure.status?.egressCIDRs;
  return {
    apiVersion: infrastructure.apiVersion,
    kind: infrastructure.kind,
    metadata: slimMetadata(infrastructure.metadata),
    ...(infrastructure.status ? { status: definedOnly({ egressCIDRs: egress }) } : {}),
  };
}

/** A gateway pod as read: name, namespace, labels and phase. */
export function cachedPod(pod: Pod): Pod {
  const { name, namespace, labels } = pod.metadata;
  return {
    apiVersion: pod.apiVersion,
    kind: pod.kind,
    metadata: definedOnly({ name, namespace, labels }),
    ...(pod.status ? { status: definedOnly({ phase: pod.status.phase }) } : {}),
  };
}

/**
 * A gateway Deployment as read: name, namespace, deletion, selector and pod template labels. Its
 * status (replicas, readiness, what an HPA or a rollout updates all day) is left out, so such an
 * update leaves the cached object equal and requeues nothing.
 */
export function cachedDeployment(deployment: Deployment): Deployment {
  const { name, namespace, deletionTimestamp } = deployment.metadata;
  const template = deployment.spec.template;
  return {
    apiVersion: deployment.apiVersion,
    kind: deployment.kind,
    metadata: definedOnly({ name, namespace, deletionTimestamp }),
    spec: { selector: { matchLabels: deployment.spec.selector.matchLabels }, ...(template ? { template: { metadata: { labels: template.metadata.labels } } } : {}) },
  };
}

/** A gateway Service as read: name, namespace and its load balancer's ipMode per ingress (whether it hairpins through Proxy mode). */
export function cachedService(service: Service): Service {
  const { name, namespace } = service.metadata;
  const ingress = service.status?.loadBalancer?.ingress;
  return {
    apiVersion: service.apiVersion,
    kind: service.kind,
    metadata: { name, namespace },
    ...(ingress ? { status: { loadBalancer: { ingress: ingress.map((i) => definedOnly({ ipMode: i.ipMode })) } } } : {}),
  };
}

/** A DNSRecord as read: its name and the DNS name it publishes. */
export function cachedDnsRecord(record: DnsRecord): DnsRecord {
  return { apiVersion: record.apiVersion, kind: record.kind, metadata: slimMetadata(record.metadata), spec: { name: record.spec.name } };
}

/**
 * One of the controller's own ManagedResources as the actuator judges it (managed-resource.ts):
 * its generation, labels and annotations, spec, and what the resource manager reports (observed
 * generation, conditions). The Secret's contents are never read.
 */
export function cachedManagedResource(object: KubeObjectJson): KubeObjectJson {
  const { name, namespace, uid, resourceVersion, generation, labels, annotations, deletionTimestamp } = object.metadata as KubeObjectJson['metadata'] & Record<string, unknown>;
  const spec = isRecord(object['spec']) ? object['spec'] : undefined;
  const status = isRecord(object['status']) ? object['status'] : undefined;
  const conditions = Array.isArray(status?.['conditions'])
    ? (status['conditions'] as unknown[]).filter(isRecord).map((c) => definedOnly({ type: c['type'], status: c['status'], reason: c['reason'], message: c['message'] }))
    : undefined;
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: definedOnly({ name, namespace, uid, resourceVersion, generation, labels, annotations, deletionTimestamp }),
    ...(spec ? { spec: definedOnly({ class: spec['class'], secretRefs: spec['secretRefs'], keepObjects: spec['keepObjects'] }) } : {}),
    ...(status ? { status: definedOnly({ observedGeneration: status['observedGeneration'], conditions }) } : {}),
  };
}

/**
 * Only what names the object and its version: for caches whose objects are watched only so that a
 * change brings the shoot back (the controller reads the object itself from the API server).
 */
export function identityOnly(object: KubeObjectJson): KubeObjectJson {
  const { name, namespace, uid, resourceVersion } = object.metadata;
  return { apiVersion: object.apiVersion, kind: object.kind, metadata: definedOnly({ name, namespace, uid, resourceVersion }) };
}

/** Any other cached object: whole, without managedFields and kubectl's last-applied copy. */
export function withoutFieldManagement<T extends { metadata: Metadata }>(object: T): T {
  return { ...object, metadata: slimMetadata(object.metadata) };
}

/**
 * A cache of combined CONNECT filters holds every shoot's policy once per gateway and port; equal
 * policies (same JSON) share one object, so a shoot costs one policy in memory however many
 * gateways and ports carry it. Cached objects are never mutated, so sharing is safe. Only a digest
 * and a weak reference are kept per policy: a policy no cached filter holds any more is collected,
 * and its entry swept.
 */
export class PolicyInterner {
  private readonly byDigest = new Map<string, WeakRef<object>>();
  private calls = 0;

  /** `filter` with each policy of its RBAC rules and shadow rules, and each entry of its matchers, replaced by the shared equal one. */
  intern<T extends { spec: Record<string, unknown> }>(filter: T): T {
    const patches = filter.spec['configPatches'];
    if (!Array.isArray(patches)) return filter;
    const internPolicies = (rules: unknown): unknown => {
      if (!isRecord(rules) || !isRecord(rules['policies'])) return rules;
      const shared = Object.fromEntries(Object.entries(rules['policies']).map(([id, policy]) => [id, this.shared(policy)]));
      return { ...rules, policies: shared };
    };
    const configPatches = patches.map((patch: unknown) => {
      if (!isRecord(patch) || !isRecord(patch['patch']) || !isRecord(patch['patch']['value']) || !isRecord(patch['patch']['value']['typed_config'])) return patch;
      const value = patch['patch']['value'];
      const typedConfig = value['typed_config'] as Record<string, unknown>;
      const rules = 'rules' in typedConfig ? { rules: internPolicies(typedConfig['rules']) } : {};
      const shadow = 'shadow_rules' in typedConfig ? { shadow_rules: internPolicies(typedConfig['shadow_rules']) } : {};
      const matcher = 'matcher' in typedConfig ? { matcher: this.internLeaves(typedConfig['matcher'], 0) } : {};
      const shadowMatcher = 'shadow_matcher' in typedConfig ? { shadow_matcher: this.internLeaves(typedConfig['shadow_matcher'], 0) } : {};
      return { ...patch, patch: { ...patch['patch'], value: { ...value, typed_config: { ...typedConfig, ...rules, ...shadow, ...matcher, ...shadowMatcher } } } };
    });
    return { ...filter, spec: { ...filter.spec, configPatches } };
  }

  /**
   * The matcher forms (the default) hold each shoot's ACL as the entry of an exact-match map keyed
   * by the routed value, in every gateway's and port's object: each entry becomes the shared
   * equal one. At 5,000 shoots of 50 CIDRs the unshared copies were most of the controller's heap.
   */
  private internLeaves(node: unknown, depth: number): unknown {
    // The matchers nest a few levels (hoisted ranges, on_no_match); a deeper tree is not one of ours.
    if (!isRecord(node) || depth > 12) return node;
    const exact = node['exact_match_map'];
    if (isRecord(exact) && isRecord(exact['map'])) {
      const shared = Object.fromEntries(Object.entries(exact['map']).map(([value, onMatch]) => [value, this.shared(onMatch)]));
      return { ...node, exact_match_map: { ...exact, map: shared } };
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, Array.isArray(v) ? v.map((item) => this.internLeaves(item, depth + 1)) : this.internLeaves(v, depth + 1)]));
  }

  private shared(policy: unknown): unknown {
    if (typeof policy !== 'object' || policy === null) return policy;
    if (++this.calls % 10_000 === 0) this.sweep();
    const digest = createHash('sha256').update(JSON.stringify(policy)).digest('base64');
    const existing = this.byDigest.get(digest)?.deref();
    if (existing !== undefined) return existing;
    this.byDigest.set(digest, new WeakRef(policy));
    return policy;
  }

  private sweep(): void {
    for (const [digest, ref] of this.byDigest) if (ref.deref() === undefined) this.byDigest.delete(digest);
  }
}
