// What the EnvoyFilter webhook needs to answer without calling the API server: each shoot's
// last applied ACL (legacy path) and the authoritative combined CONNECT filters, derived from
// cached Extensions and gateway Deployments and rebuilt only when the caches changed.
//
// The source is the ACL the controller recorded in Extension.status.state, not the raw
// providerConfig: an invalid or half-finished change then never removes a shoot's protection
// (DESIGN section 6), and the legacy filters and the combined filters always agree.
import type { OperatorConfig } from '../acl/operator-config.js';
import { appliedAcls } from '../actuator/combined-syncer.js';
import type { Deployment, Extension } from '../gardener/objects.js';
import { seedGatewayWorkloads } from '../gardener/seed-acl.js';
import { buildCombinedConnectFilters } from '../rbac/combined-connect-filters.js';
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
  readonly combined: ReadonlyMap<string, GeneratedEnvoyFilter>;
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

  /** The combined filter the controller would write under this name, if it writes one. */
  combinedFilter(namespace: string, name: string): GeneratedEnvoyFilter | undefined {
    return this.current().combined.get(filterKey(namespace, name));
  }

  private current(): Derived {
    const revision = this.source.revision();
    if (this.derived?.revision === revision) return this.derived;
    const shoots = appliedAcls(this.source.extensions());
    const combined = buildCombinedConnectFilters({ operator: this.operator, gateways: seedGatewayWorkloads(this.source.deployments()), shoots });
    this.derived = {
      revision,
      legacy: new Map(shoots.map((s) => [s.technicalID, s])),
      combined: new Map(combined.map((f) => [filterKey(f.metadata.namespace, f.metadata.name), f])),
    };
    return this.derived;
  }
}

/** Fixed objects, for benchmarks and tests that need no API server. */
export function staticCacheSource(extensions: readonly Extension[], deployments: readonly Deployment[]): AdmissionCacheSource {
  return { extensions: () => extensions, deployments: () => deployments, revision: () => 0, synced: () => true };
}
