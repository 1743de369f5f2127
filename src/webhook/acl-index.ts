// What the EnvoyFilter webhook needs to answer without calling the API server: each shoot's
// last applied ACL (legacy path) and the authoritative combined CONNECT filters, derived from
// cached Extensions and gateway Deployments and rebuilt only when the caches changed.
//
// The source is the ACL the controller recorded in Extension.status.state, not the raw
// providerConfig: an invalid or half-finished change then never removes a shoot's protection
// (DESIGN section 6), and the legacy filters and the combined filters always agree.
import type { GatewayWorkload, ShootPolicy } from '../acl/model.js';
import type { OperatorConfig } from '../acl/operator-config.js';
import { appliedAcls } from '../actuator/combined-syncer.js';
import type { Deployment, Extension } from '../gardener/objects.js';
import { seedGatewayWorkloads } from '../gardener/seed-acl.js';
import { planCombinedConnectFilters } from '../rbac/combined-connect-filters.js';
import type { GeneratedEnvoyFilter } from '../rbac/envoy-filter-types.js';
import type { LegacyProxyAcl } from '../rbac/legacy-proxy-patch.js';

/** The cached objects; `revision()` changes whenever either list does. */
export interface AdmissionCacheSource {
  extensions(): readonly Extension[];
  deployments(): readonly Deployment[];
  revision(): number;
  synced(): boolean;
}

interface Derived {
  readonly revision: number;
  readonly legacy: ReadonlyMap<string, LegacyProxyAcl>;
  /** An error when the combined filters cannot be built: only combined-filter requests fail then. */
  readonly combined: ReadonlyMap<string, GeneratedEnvoyFilter> | Error;
}

const filterKey = (namespace: string, name: string): string => `${namespace}/${name}`;

export class AclIndex {
  private derived: Derived | undefined;

  constructor(
    private readonly source: AdmissionCacheSource,
    private readonly operator: OperatorConfig,
  ) {}

  synced(): boolean {
    return this.source.synced();
  }

  /** The ACL of an active acl Extension in the shoot's namespace; undefined: leave the shoot open. */
  legacyAcl(technicalID: string): LegacyProxyAcl | undefined {
    return this.current().legacy.get(technicalID);
  }

  /**
   * The combined filter the controller would write under this name, if it writes one. A shoot too
   * large for a shard is simply in no filter (the controller reports it on that shoot).
   */
  combinedFilter(namespace: string, name: string): GeneratedEnvoyFilter | undefined {
    const { combined } = this.current();
    if (combined instanceof Error) throw combined;
    return combined.get(filterKey(namespace, name));
  }

  private current(): Derived {
    const revision = this.source.revision();
    if (this.derived?.revision === revision) return this.derived;
    const shoots = appliedAcls(this.source.extensions());
    this.derived = {
      revision,
      legacy: new Map(shoots.map((s) => [s.technicalID, s])),
      combined: combinedByName(this.operator, seedGatewayWorkloads(this.source.deployments()), shoots),
    };
    return this.derived;
  }
}

/** Derived separately so that a failure here never takes the legacy answers down with it. */
function combinedByName(operator: OperatorConfig, gateways: readonly GatewayWorkload[], shoots: readonly ShootPolicy[]): ReadonlyMap<string, GeneratedEnvoyFilter> | Error {
  try {
    const { filters } = planCombinedConnectFilters({ operator, gateways, shoots });
    return new Map(filters.map((f) => [filterKey(f.metadata.namespace, f.metadata.name), f]));
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/** Fixed objects, for benchmarks and tests that need no API server. */
export function staticCacheSource(extensions: readonly Extension[], deployments: readonly Deployment[]): AdmissionCacheSource {
  return { extensions: () => extensions, deployments: () => deployments, revision: () => 0, synced: () => true };
}
