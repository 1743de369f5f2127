// Keeps the combined HTTP-CONNECT filters of every gateway in line with the recorded ACLs of all
// active `acl` Extensions of the seed: server-side applies what differs, deletes what is no
// longer wanted, writes nothing when nothing changed.
import type { Logger } from 'pino';
import type { GatewayWorkload } from '../acl/model.js';
import type { OperatorConfig } from '../acl/operator-config.js';
import type { EnvoyFilterObject, Extension } from '../gardener/objects.js';
import { EXTENSION_TYPE } from '../gardener/seed-acl.js';
import { buildCombinedConnectFilters } from '../rbac/combined-connect-filters.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { appliedFromState, type AppliedAcl } from './applied-state.js';
import { refOf, type ClusterClient } from './cluster-client.js';
import { OPERATION_ANNOTATION, Operation } from './extension-contract.js';

export interface CombinedSyncerDeps {
  readonly client: ClusterClient;
  readonly operator: OperatorConfig;
  readonly extensions: () => readonly Extension[];
  readonly gateways: () => readonly GatewayWorkload[];
  /** Our combined EnvoyFilters as the cache has them (label acl.gardener.cloud/role=connect). */
  readonly existing: () => readonly EnvoyFilterObject[];
  readonly logger: Logger;
}

/** An Extension whose shoot is served by this seed: not deleted, migrated or awaiting restore. */
export function isActive(ext: Extension): boolean {
  if (ext.spec.type !== EXTENSION_TYPE || (ext.spec.class ?? 'shoot') !== 'shoot' || ext.metadata.deletionTimestamp) return false;
  const annotation = ext.metadata.annotations?.[OPERATION_ANNOTATION];
  if (annotation === Operation.migrate || annotation === Operation.waitForState) return false;
  const last = ext.status?.['lastOperation'] as { type?: string; state?: string } | undefined;
  return !(last?.type === 'Migrate' && last.state === 'Succeeded');
}

export function appliedAcls(extensions: readonly Extension[]): AppliedAcl[] {
  return extensions.filter(isActive).flatMap((ext) => appliedFromState(ext.metadata.namespace, ext.status?.['state']) ?? []);
}

const key = (o: { metadata: { namespace?: string | undefined; name: string } }): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

export async function syncCombinedFilters(deps: CombinedSyncerDeps): Promise<{ applied: number; deleted: number }> {
  const desired = buildCombinedConnectFilters({ operator: deps.operator, gateways: deps.gateways(), shoots: appliedAcls(deps.extensions()) });
  const existing = new Map(deps.existing().map((f) => [key(f), f]));
  let applied = 0;
  let deleted = 0;
  for (const filter of desired) {
    const current = existing.get(key(filter));
    existing.delete(key(filter));
    const labelsMatch = current && Object.entries(filter.metadata.labels).every(([k, v]) => current.metadata.labels?.[k] === v);
    if (current && labelsMatch && jsonEqual(current.spec, filter.spec)) continue;
    await deps.client.apply(filter);
    applied++;
  }
  for (const stale of existing.values()) {
    await deps.client.delete(refOf(stale));
    deleted++;
  }
  if (applied + deleted > 0) deps.logger.info({ applied, deleted, objects: desired.length }, 'combined CONNECT filters updated');
  return { applied, deleted };
}
