import type { SeedAcl } from '../acl/model.js';
import type { Policy } from './envoy-rbac-types.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  ROLE_LABEL,
  SHARD_ANNOTATION,
  type ConfigPatch,
  type GeneratedEnvoyFilter,
} from './envoy-filter-types.js';
import { FILTER_NAMES, httpDenyFilter } from './filter-values.js';
import { mentionsShoot } from './permissions.js';
import { notAdmittedPrincipal } from './principals.js';
import { shardByHash, type Sized } from './sharding.js';

export const CONNECT_FILTER_PREFIX = 'acl-connect-';
const HCM = 'envoy.filters.network.http_connection_manager';
// Room for metadata, selector and patch scaffolding around the policies of one shard.
const OBJECT_OVERHEAD_BYTES = 4096;

export function connectFilterName(shard: number): string {
  return `${CONNECT_FILTER_PREFIX}${String(shard).padStart(3, '0')}`;
}

function connectPatch(port: number, shardIndex: number, policies: Record<string, Policy>): ConfigPatch {
  return {
    applyTo: 'HTTP_FILTER',
    match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { filter: { name: HCM } } } },
    patch: { operation: 'INSERT_FIRST', value: httpDenyFilter(`${FILTER_NAMES.connect}-${String(shardIndex).padStart(3, '0')}`, policies) },
  };
}

/**
 * The combined HTTP-CONNECT filters: for every ACL shoot of the seed a policy "the request
 * mentions S in a protected header and S does not admit the client", sharded by size, first
 * in the HTTP chain of every protected port, on every gateway of the seed (before Gardener
 * 1.143 every gateway could route to every shoot).
 */
export function buildCombinedConnectFilters(seed: SeedAcl): GeneratedEnvoyFilter[] {
  const { operator } = seed;
  const items: Sized<Policy>[] = [...seed.shoots]
    .map((shoot) => {
      const policy: Policy = {
        permissions: mentionsShoot(shoot.technicalID, operator.protectedHeaders),
        principals: [notAdmittedPrincipal(shoot.rule, shoot.alwaysAllowed)],
      };
      return { key: shoot.technicalID, bytes: JSON.stringify(policy).length + shoot.technicalID.length + 4, item: policy };
    });
  const ports = operator.protectedPorts.length;
  const shards = shardByHash(items, (bytes) => OBJECT_OVERHEAD_BYTES + bytes * ports <= operator.maxObjectBytes);
  const gateways = [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  // Empty buckets get no object; names stay tied to the bucket index so other shards keep theirs.
  const filled = shards.map((shard, index) => ({ shard, index })).filter(({ shard }) => shard.length > 0);
  return gateways.flatMap((gateway) =>
    filled.map(({ shard, index }): GeneratedEnvoyFilter => {
      const policies: Record<string, Policy> = {};
      for (const { key, item } of shard) policies[key] = item;
      return {
        apiVersion: 'networking.istio.io/v1alpha3',
        kind: 'EnvoyFilter',
        metadata: {
          name: connectFilterName(index),
          namespace: gateway.namespace,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' },
          annotations: { [SHARD_ANNOTATION]: `${index}/${shards.length}` },
        },
        spec: {
          workloadSelector: { labels: gateway.selector },
          configPatches: operator.protectedPorts.map((port) => connectPatch(port, index, policies)),
        },
      };
    }),
  );
}
