// ECDS delivery of the matcher form. An ACL change must not change a listener: Envoy drains every
// connection of a changed filter chain, which on the CONNECT listeners is every tunnel of every
// shoot (docs/envoy-listener-updates.md). So the listeners carry only fixed content: per port the
// extraction and, for a fixed number of buckets, one HTTP filter per protected header whose config
// Envoy fetches by name through ECDS. The shoots' leaves travel in the bucket objects
// (EnvoyFilter EXTENSION_CONFIG patches); changing one rewrites one bucket's resources and no
// listener. Both ports name the same resources: Envoy fetches each once (and still builds the
// filter per listener).
import type { GatewayWorkload, SeedAcl, ShootPolicy } from '../acl/model.js';
import { CONNECT_FILTER_PREFIX, shardBudget } from './combined-connect-filters.js';
import { EXTRACTION_PRIORITY, extractionFilter, headerRbacFilter, matcherEntryBytes, matcherFormObject, shootAclLeaf, targetHeaderFilter, type MatcherEntry } from './connect-matcher.js';
import { HTTP_RBAC_TYPE } from './envoy-rbac-types.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL, type DiscoveredFilter, type ExtensionConfigPatch, type GeneratedEnvoyFilter, type MatcherFormPatch } from './envoy-filter-types.js';
import { FILTER_NAMES } from './filter-values.js';
import { fnv1a64, jumpHash } from './sharding.js';

const pad = (n: number): string => String(n).padStart(3, '0');

/**
 * The ECDS resource (and HTTP filter) name of one bucket and protected header: fixed, whatever the
 * shoots. Named by the header itself, so a changed header list can never leave a listener naming a
 * resource that checks another header.
 */
export function ecdsResourceName(bucket: number, header: string): string {
  return `${FILTER_NAMES.connect}-b${pad(bucket)}-${header.toLowerCase()}`;
}

/** The per-port object with the listener's fixed part. */
export function ecdsListenerObjectName(port: number): string {
  return `${CONNECT_FILTER_PREFIX}${port}-ecds`;
}

export function ecdsBucketObjectName(bucket: number): string {
  return `${CONNECT_FILTER_PREFIX}ecds-b${pad(bucket)}`;
}

/**
 * Envoy waits for every discovered config before the listener serves (no timeout, no default):
 * a missing resource keeps the listener from warming, it never runs without the RBAC filter.
 */
function discovered(name: string): DiscoveredFilter {
  return { name, config_discovery: { config_source: { ads: {}, initial_fetch_timeout: '0s' }, type_urls: [HTTP_RBAC_TYPE] } };
}

/** The listener's fixed part on `port`: extraction, target headers, then every bucket's filter per header. */
export function ecdsListenerObject(gateway: GatewayWorkload, port: number, headers: readonly string[], buckets: number): GeneratedEnvoyFilter<MatcherFormPatch> {
  const references = Array.from({ length: buckets }, (_, bucket) => headers.map((header) => discovered(ecdsResourceName(bucket, header)))).flat();
  return matcherFormObject(
    gateway,
    ecdsListenerObjectName(port),
    port,
    [extractionFilter(`${FILTER_NAMES.connect}-extract-${port}`, headers), targetHeaderFilter(`${FILTER_NAMES.connect}-target-${port}`, headers), ...references],
    EXTRACTION_PRIORITY,
  );
}

/** One bucket's ECDS resources (one RBAC config per protected header) for exactly `entries`. */
export function ecdsBucketObject(gateway: GatewayWorkload, bucket: number, headers: readonly string[], entries: ReadonlyMap<string, MatcherEntry>): GeneratedEnvoyFilter<ExtensionConfigPatch> {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name: ecdsBucketObjectName(bucket), namespace: gateway.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' } },
    spec: {
      workloadSelector: { labels: gateway.selector },
      configPatches: headers.map((header) => ({ applyTo: 'EXTENSION_CONFIG', patch: { operation: 'ADD', value: headerRbacFilter(ecdsResourceName(bucket, header), header, entries) } })),
    },
  };
}

/** The bucket of a shoot: jump consistent hashing, so a change of the bucket count moves few shoots. */
export function ecdsBucketOf(technicalID: string, buckets: number): number {
  return jumpHash(fnv1a64(technicalID), buckets);
}

/**
 * Every object of the ECDS delivery for the seed: per gateway the listener parts of every port and
 * all `buckets` bucket objects (empty ones too: the listeners name them). A bucket over the object
 * size budget is an error naming the fix.
 */
export function buildEcdsConnectObjects(
  seed: Pick<SeedAcl, 'operator' | 'gateways'> & { readonly shoots: readonly ShootPolicy[] },
  buckets: number,
): (GeneratedEnvoyFilter<MatcherFormPatch> | GeneratedEnvoyFilter<ExtensionConfigPatch>)[] {
  const { operator } = seed;
  if (!Number.isInteger(buckets) || buckets < 1) throw new Error(`ECDS bucket count ${buckets}: must be a whole number of at least 1`);
  const headers = operator.protectedHeaders;
  const contents = Array.from({ length: buckets }, () => new Map<string, MatcherEntry>());
  const sizes = new Array<number>(buckets).fill(0);
  for (const shoot of [...seed.shoots].sort((a, b) => (a.technicalID < b.technicalID ? -1 : 1))) {
    const leaf = shootAclLeaf(shoot);
    const bucket = ecdsBucketOf(shoot.technicalID, buckets);
    const content = contents[bucket];
    if (content === undefined) throw new Error(`ECDS bucket ${bucket} of ${shoot.technicalID} is not one of the ${buckets} buckets`);
    content.set(shoot.technicalID, { mode: shoot.rule.mode, policy: leaf });
    sizes[bucket] = (sizes[bucket] ?? 0) + matcherEntryBytes(shoot.technicalID, leaf, headers.length);
  }
  const budget = shardBudget(operator.maxObjectBytes);
  const full = sizes.findIndex((bytes) => bytes > budget);
  if (full >= 0) {
    throw new Error(`ECDS bucket ${full} needs ${sizes[full]} bytes, more than the ${budget} one object may hold; raise the bucket count or maxObjectBytes`);
  }
  const gateways = [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  return gateways.flatMap((gateway) => [
    ...operator.protectedPorts.map((port) => ecdsListenerObject(gateway, port, headers, buckets)),
    ...contents.map((entries, bucket) => ecdsBucketObject(gateway, bucket, headers, entries)),
  ]);
}
