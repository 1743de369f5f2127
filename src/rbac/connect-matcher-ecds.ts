// ECDS delivery of the matcher form. An ACL change must not change a listener: Envoy drains every
// connection of a changed filter chain, which on the CONNECT listeners is every tunnel of every
// shoot (docs/developers/envoy-listener-updates.md). So the listeners carry only fixed content: per port the
// extraction and, for a fixed number of buckets, HTTP filters whose config Envoy fetches by name
// through ECDS. The shoots' leaves travel in the bucket objects (EnvoyFilter EXTENSION_CONFIG
// patches); changing one rewrites one bucket's resource and no listener.
//
// One resource per bucket serves every protected header: it looks the shoot up in one target
// header, and the listener checks each header in turn, setting the target to that header's ID
// and naming every bucket again. Envoy keeps each resource's config once and builds it once per
// filter that names it, so a resource per header would hold every leaf once more.
import type { GatewayWorkload, SeedAcl, ShootPolicy } from '../acl/model.js';
import { CONNECT_FILTER_PREFIX, shardBudget, sizedForShards } from './combined-connect-filters.js';
import {
  EXTRACTION_PRIORITY,
  extractedHeaders,
  extractedValue,
  extractionFilters,
  failClosedRules,
  lookupRbacFilter,
  matcherEntryBytes,
  matcherFormObject,
  metadataKey,
  SCAFFOLD_GATEWAY,
  scaffoldingBytes,
  setHeadersFilter,
  shootAclLeaf,
  type MatcherEntry,
  type OnMatch,
} from './connect-matcher.js';
import { isRecord } from '../json/record.js';
import { HTTP_RBAC_TYPE } from './envoy-rbac-types.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL, type DiscoveredFilter, type ExtensionConfigPatch, type GeneratedEnvoyFilter, type MatcherFormPatch } from './envoy-filter-types.js';
import { FILTER_NAMES } from './filter-values.js';
import { fixedBuckets, fnv1a64, jumpHash, type Sized, type StoredPlace } from './sharding.js';

const pad = (n: number): string => String(n).padStart(3, '0');

/** The ECDS resource (and HTTP filter) name of one bucket: fixed, whatever the shoots and headers. */
export function ecdsResourceName(bucket: number): string {
  return `${FILTER_NAMES.connect}-bucket-${pad(bucket)}`;
}

/** The header the bucket resources look the shoot up in: set, before each header's turn, to the ID that header names. */
export const ECDS_TARGET_HEADER = 'x-gardener-acl-target';

/** Bytes one shoot takes in a bucket: its leaf once, whatever the headers. */
export function ecdsEntryBytes(technicalID: string, leaf: OnMatch): number {
  return matcherEntryBytes(technicalID, leaf, 1);
}

/** The per-port object with the listener's fixed part. */
export function ecdsListenerObjectName(port: number): string {
  return `${CONNECT_FILTER_PREFIX}${port}-ecds`;
}

export function ecdsBucketObjectName(bucket: number): string {
  return `${CONNECT_FILTER_PREFIX}ecds-b${pad(bucket)}`;
}

/** Policy of a missing bucket's default config (see discovered). */
export const BUCKET_MISSING_POLICY = 'gardener-acl-bucket-missing';

/**
 * How long a gateway Envoy waits for a bucket before its listener serves without it. Istio sends
 * the resources right after the listeners, and the controller writes a deleted bucket again within
 * seconds, so a new gateway pod normally becomes ready with every bucket; only a bucket missing for
 * longer (the controller down) keeps it waiting this long.
 */
export const ECDS_FETCH_TIMEOUT = '30s';

/**
 * A bucket's filter, configured through ECDS. Until its resource arrives (and were it ever
 * removed) the default config decides: it refuses every request that names a shoot, so a missing
 * bucket never admits a client some ACL refuses, and never keeps a new gateway pod from becoming
 * ready for longer than ECDS_FETCH_TIMEOUT. (It needs no guard against a missing extraction: the
 * extraction is in the same object as the references.)
 */
function discovered(name: string): DiscoveredFilter {
  return {
    name,
    config_discovery: {
      config_source: { ads: {}, initial_fetch_timeout: ECDS_FETCH_TIMEOUT },
      default_config: { '@type': HTTP_RBAC_TYPE, rules: failClosedRules(BUCKET_MISSING_POLICY, [], ECDS_TARGET_HEADER) },
      type_urls: [HTTP_RBAC_TYPE],
    },
  };
}

/** The listener's fixed part on `port`: extraction, then per protected header its ID as the target and every bucket's filter. */
export function ecdsListenerObject(gateway: GatewayWorkload, port: number, headers: readonly string[], buckets: number): GeneratedEnvoyFilter<MatcherFormPatch> {
  const references = Array.from({ length: buckets }, (_, bucket) => discovered(ecdsResourceName(bucket)));
  const turns = headers.flatMap((header) => [
    setHeadersFilter(`${FILTER_NAMES.connect}-target-${port}-${header.toLowerCase()}`, [{ key: ECDS_TARGET_HEADER, value: extractedValue(metadataKey(header)) }]),
    ...references,
  ]);
  return matcherFormObject(gateway, ecdsListenerObjectName(port), port, [...extractionFilters(port, headers, []), ...turns], EXTRACTION_PRIORITY);
}

/** One bucket's ECDS resource for exactly `entries`; it refuses requests whose `headers` the extraction did not read. */
export function ecdsBucketObject(gateway: GatewayWorkload, bucket: number, headers: readonly string[], entries: ReadonlyMap<string, MatcherEntry>): GeneratedEnvoyFilter<ExtensionConfigPatch> {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name: ecdsBucketObjectName(bucket), namespace: gateway.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' } },
    spec: {
      workloadSelector: { labels: gateway.selector },
      configPatches: [{ applyTo: 'EXTENSION_CONFIG', patch: { operation: 'ADD', value: lookupRbacFilter(ecdsResourceName(bucket), headers, ECDS_TARGET_HEADER, entries) } }],
    },
  };
}

/** A bucket object's scaffolding for `headers` (see scaffoldingBytes). */
export function ecdsScaffoldingBytes(headers: readonly string[]): number {
  return scaffoldingBytes('ecds', headers, (entries) => ecdsBucketObject(SCAFFOLD_GATEWAY, 999, headers, entries), ecdsEntryBytes);
}

/** The bucket of a shoot: jump consistent hashing, so a change of the bucket count moves few shoots. */
export function ecdsBucketOf(technicalID: string, buckets: number): number {
  return jumpHash(fnv1a64(technicalID), buckets);
}

/** The bucket of a bucket object's name; undefined for any other name. */
export function parseEcdsBucketObjectName(name: string): number | undefined {
  const match = /^ecds-b(\d{3})$/.exec(name.startsWith(CONNECT_FILTER_PREFIX) ? name.slice(CONNECT_FILTER_PREFIX.length) : '');
  return match ? Number(match[1]) : undefined;
}

/** The port of a listener part's name; undefined for any other name. */
export function parseEcdsListenerObjectName(name: string): number | undefined {
  const match = /^(\d{1,5})-ecds$/.exec(name.startsWith(CONNECT_FILTER_PREFIX) ? name.slice(CONNECT_FILTER_PREFIX.length) : '');
  return match ? Number(match[1]) : undefined;
}

/** Shoots sized for the buckets: each shoot's entry in its bucket, and those that fit no bucket (why). */
export function ecdsBucketPlan<T>(
  items: readonly Sized<T>[],
  buckets: number,
  maxObjectBytes: number,
  headers: readonly string[],
  stored?: ReadonlyMap<string, StoredPlace>,
): { readonly buckets: Sized<T>[][]; readonly overflow: Map<string, string> } {
  const budget = shardBudget(maxObjectBytes, ecdsScaffoldingBytes(headers));
  const planned = fixedBuckets(items, buckets, budget, stored);
  const overflow = new Map(
    planned.overflow.map(({ item, bucket }) => [
      item.key,
      `${item.key} needs ${item.bytes} bytes in ECDS bucket ${bucket} of ${buckets}, which other shoots fill up to the ${budget} bytes one object may hold; raise ecdsBuckets or maxObjectBytes in the OperatorConfiguration`,
    ]),
  );
  return { buckets: planned.buckets, overflow };
}

/**
 * Every object of the ECDS delivery for the seed: per gateway the listener parts of every port and
 * all `buckets` bucket objects (empty ones too: the listeners name them). A shoot that fits no
 * bucket is an error naming the fix.
 */
export function buildEcdsConnectObjects(
  seed: Pick<SeedAcl, 'operator' | 'gateways'> & { readonly shoots: readonly ShootPolicy[] },
  buckets: number = seed.operator.ecdsBuckets,
): (GeneratedEnvoyFilter<MatcherFormPatch> | GeneratedEnvoyFilter<ExtensionConfigPatch>)[] {
  const { operator } = seed;
  const headers = operator.protectedHeaders;
  const { items, unplaced } = sizedForShards(
    seed.shoots,
    operator.maxObjectBytes,
    (shoot) => {
      const leaf = shootAclLeaf(shoot);
      return { bytes: ecdsEntryBytes(shoot.technicalID, leaf), item: { mode: shoot.rule.mode, policy: leaf } satisfies MatcherEntry };
    },
    ecdsScaffoldingBytes(headers),
  );
  const plan = ecdsBucketPlan(items, buckets, operator.maxObjectBytes, headers);
  const problem = [...unplaced.values(), ...plan.overflow.values()][0];
  if (problem !== undefined) throw new Error(problem);
  const gateways = [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  return gateways.flatMap((gateway) => [
    ...operator.protectedPorts.map((port) => ecdsListenerObject(gateway, port, headers, buckets)),
    ...plan.buckets.map((content, bucket) => ecdsBucketObject(gateway, bucket, headers, new Map(content.map(({ key, item }) => [key, item])))),
  ]);
}

/** How many buckets a stored listener part names (its discovered filters per extracted header); undefined when unreadable. */
export function storedBucketCount(spec: unknown): number | undefined {
  const headers = extractedHeaders(spec).length;
  const references = discoveredResourceNames(spec).length;
  if (headers === 0 || references === 0 || references % headers !== 0) return undefined;
  return references / headers;
}

const storedPatchValues = (spec: unknown): { readonly patch: Record<string, unknown>; readonly value: Record<string, unknown> }[] => {
  const patches: unknown[] = isRecord(spec) && Array.isArray(spec['configPatches']) ? spec['configPatches'] : [];
  return patches.flatMap((patch) => (isRecord(patch) && isRecord(patch['patch']) && isRecord(patch['patch']['value']) ? [{ patch, value: patch['patch']['value'] }] : []));
};

/** The ECDS resources a stored listener part names. */
export function discoveredResourceNames(spec: unknown): string[] {
  return storedPatchValues(spec).flatMap(({ value }) => ('config_discovery' in value && typeof value['name'] === 'string' ? [value['name']] : []));
}

/** The ECDS resources a stored bucket object defines. */
export function definedResourceNames(spec: unknown): string[] {
  return storedPatchValues(spec).flatMap(({ patch, value }) => (patch['applyTo'] === 'EXTENSION_CONFIG' && typeof value['name'] === 'string' ? [value['name']] : []));
}

/**
 * A stored bucket's resources other than `except`, verbatim: an earlier version's resources
 * (one per bucket and header) that stored listener parts may still name.
 */
export function otherStoredResources(spec: unknown, except: string): ExtensionConfigPatch[] {
  return storedPatchValues(spec).flatMap(({ patch, value }) =>
    patch['applyTo'] === 'EXTENSION_CONFIG' && typeof value['name'] === 'string' && value['name'] !== except ? [patch as unknown as ExtensionConfigPatch] : [],
  );
}
