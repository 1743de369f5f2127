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
import { OPERATION_ANNOTATION, Operation, isMigrated } from './extension-contract.js';

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
/** What one sync did. */
export interface CombinedSyncOutcome {
  readonly applied: number;
  readonly deleted: number;
  /** Shoots (technical ID) left out of the combined filters, with the reason, e.g. a policy larger than one shard. */
  readonly unplaced: ReadonlyMap<string, string>;
}

export function isActive(ext: Extension): boolean {
  if (ext.spec.type !== EXTENSION_TYPE || (ext.spec.class ?? 'shoot') !== 'shoot' || ext.metadata.deletionTimestamp) return false;
  const annotation = ext.metadata.annotations?.[OPERATION_ANNOTATION];
  if (annotation === Operation.migrate || annotation === Operation.waitForState) return false;
  return !isMigrated(ext);
}

export function appliedAcls(extensions: readonly Extension[]): AppliedAcl[] {
  return extensions.filter(isActive).flatMap((ext) => appliedFromState(ext.metadata.namespace, ext.status?.['state']) ?? []);
}

const key = (o: { metadata: { namespace?: string | undefined; name: string } }): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * resourceVersions are etcd revisions: increasing integers in practice (the API calls them
 * opaque, so anything else is treated as unknown, which only costs a redundant write).
 */
function olderThan(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && /^\d+$/.test(a) && /^\d+$/.test(b) && BigInt(a) < BigInt(b);
}

/**
 * Syncs the combined filters. It remembers what it applied, so that a cache which has not yet
 * seen its own last write does not cause the same write again.
 */
export class CombinedSyncer {
  private readonly applied = new Map<string, { spec: string; resourceVersion: string | undefined }>();
  /** Objects this syncer deleted, with the resourceVersion they had then. */
  private readonly deletedAt = new Map<string, string | undefined>();

  constructor(private readonly deps: CombinedSyncerDeps) {}

  async sync(): Promise<CombinedSyncOutcome> {
    const { deps } = this;
    const desired = buildCombinedConnectFilters({ operator: deps.operator, gateways: deps.gateways(), shoots: appliedAcls(deps.extensions()) });
    const existing = new Map(deps.existing().map((f) => [key(f), f]));
    let applied = 0;
    let deleted = 0;
    for (const filter of desired) {
      const k = key(filter);
      const current = existing.get(k);
      existing.delete(k);
      const spec = JSON.stringify(filter.spec);
      const mine = this.applied.get(k);
      if (mine?.spec === spec && (!current || olderThan(current.metadata.resourceVersion, mine.resourceVersion))) continue;
      const labelsMatch = current && Object.entries(filter.metadata.labels).every(([l, v]) => current.metadata.labels?.[l] === v);
      if (current && labelsMatch && jsonEqual(current.spec, filter.spec)) continue;
      const result = await deps.client.apply(filter);
      this.applied.set(k, { spec, resourceVersion: result.resourceVersion });
      this.deletedAt.delete(k);
      applied++;
    }
    for (const stale of existing.values()) {
      const k = key(stale);
      if (this.deletedAt.has(k) && this.deletedAt.get(k) === stale.metadata.resourceVersion) continue;
      await deps.client.delete(refOf(stale));
      this.applied.delete(k);
      this.deletedAt.set(k, stale.metadata.resourceVersion);
      deleted++;
    }
    if (applied + deleted > 0) deps.logger.info({ applied, deleted, objects: desired.length }, 'combined CONNECT filters updated');
    return { applied, deleted, unplaced: new Map() };
  }
}
