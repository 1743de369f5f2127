import type { SeedAcl, ShootPolicy } from '../acl/model.js';
import type { Policy } from './envoy-rbac-types.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  ROLE_LABEL,
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

function shardSuffix(port: number, shard: number): string {
  return `${port}-${String(shard).padStart(3, '0')}`;
}

export function connectFilterName(port: number, shard: number): string {
  return `${CONNECT_FILTER_PREFIX}${shardSuffix(port, shard)}`;
}

function connectPatch(port: number, filterName: string, policies: Record<string, Policy>): ConfigPatch {
  return {
    applyTo: 'HTTP_FILTER',
    match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { filter: { name: HCM } } } },
    patch: { operation: 'INSERT_FIRST', value: httpDenyFilter(filterName, policies) },
  };
}

/** The policy one shoot has in the combined filters: "mentions S and S does not admit the client". */
export function combinedConnectPolicy(shoot: ShootPolicy, operator: SeedAcl['operator']): Policy {
  return {
    permissions: mentionsShoot(shoot.technicalID, operator.protectedHeaders),
    principals: [notAdmittedPrincipal(shoot.rule, shoot.alwaysAllowed)],
  };
}

/**
 * The combined HTTP-CONNECT filters: for every ACL shoot of the seed a policy "the request
 * mentions S in a protected header and S does not admit the client", sharded by size into one
 * object per protected port and shard, first in the HTTP chain of that port, on every gateway
 * of the seed (before Gardener 1.143 every gateway could route to every shoot).
 */
export function buildCombinedConnectFilters(seed: Pick<SeedAcl, 'operator' | 'gateways'> & { readonly shoots: readonly ShootPolicy[] }): GeneratedEnvoyFilter[] {
  const { operator } = seed;
  const items: Sized<Policy>[] = seed.shoots.map((shoot) => {
    const policy = combinedConnectPolicy(shoot, operator);
    return { key: shoot.technicalID, bytes: JSON.stringify(policy).length + shoot.technicalID.length + 4, item: policy };
  });
  const shards = shardByHash(items, operator.maxObjectBytes - OBJECT_OVERHEAD_BYTES)
    .map((shard, index) => ({ shard, index }))
    // Empty buckets get no object; names stay tied to the bucket index so other shards keep theirs.
    .filter(({ shard }) => shard.length > 0);
  const gateways = [...seed.gateways].sort((a, b) => a.namespace.localeCompare(b.namespace));
  return gateways.flatMap((gateway) =>
    operator.protectedPorts.flatMap((port) =>
      shards.map(({ shard, index }): GeneratedEnvoyFilter => {
        const policies: Record<string, Policy> = {};
        for (const { key, item } of shard) policies[key] = item;
        const name = connectFilterName(port, index);
        return {
          apiVersion: 'networking.istio.io/v1alpha3',
          kind: 'EnvoyFilter',
          metadata: {
            name,
            namespace: gateway.namespace,
            labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [ROLE_LABEL]: 'connect' },
          },
          spec: { workloadSelector: { labels: gateway.selector }, configPatches: [connectPatch(port, `${FILTER_NAMES.connect}-${shardSuffix(port, index)}`, policies)] },
        };
      }),
    ),
  );
}
