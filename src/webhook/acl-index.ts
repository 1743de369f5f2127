// What the EnvoyFilter webhook needs to answer without calling the API server: each shoot's
// last applied ACL for Gardener's legacy apiserver-proxy filters, from the cached Extensions.
//
// The source is the ACL the controller recorded in Extension.status.state, not the raw
// providerConfig: an invalid or half-finished change then never removes a shoot's protection
// (docs/design.md section 6), and the legacy filters and the combined filters always agree.
import { isActive } from '../gardener/extension-class.js';
import { appliedFromState, type AppliedAcl } from '../gardener/applied-state.js';
import type { Extension } from '../gardener/objects.js';
import { perObject } from '../json/per-object.js';
import { KEEP_AS_STORED, type LegacyProxyAcl } from '../rbac/legacy-proxy-patch.js';

/** The cached objects; `revision()` changes whenever the list does. */
export interface AdmissionCacheSource {
  extensions(): readonly Extension[];
  revision(): number;
  synced(): boolean;
}

/**
 * The legacy path's ACLs, kept up to date incrementally: the informer cache keeps an unchanged
 * Extension as the same object, so after a change only the changed Extensions' states are read
 * again, and a request never builds any seed-wide filter. (The combined CONNECT filters are not
 * the webhook's to build: it refuses every foreign write of them, and the controller writes them.)
 */
export class AclIndex {
  private revision: number | undefined;
  private legacy: ReadonlyMap<string, LegacyProxyAcl | typeof KEEP_AS_STORED> = new Map();
  /** null: the Extension records no readable ACL. */
  private readonly parsed = perObject((extension: Extension): AppliedAcl | null => appliedFromState(extension.metadata.namespace, extension.status?.['state']) ?? null);

  constructor(private readonly source: AdmissionCacheSource) {}

  synced(): boolean {
    return this.source.synced();
  }

  /**
   * The ACL of an active acl Extension in the shoot's namespace; KEEP_AS_STORED: it is active but
   * its recorded ACL is unreadable (the chain keeps what it has); undefined: leave the shoot open.
   */
  legacyAcl(technicalID: string): LegacyProxyAcl | typeof KEEP_AS_STORED | undefined {
    return this.current().get(technicalID);
  }

  private current(): ReadonlyMap<string, LegacyProxyAcl | typeof KEEP_AS_STORED> {
    const revision = this.source.revision();
    if (this.revision === revision) return this.legacy;
    const next = new Map<string, LegacyProxyAcl | typeof KEEP_AS_STORED>();
    for (const extension of this.source.extensions()) {
      if (!isActive(extension)) continue;
      const acl = this.parsed(extension);
      // A missing input never removes protection: an active shoot without a readable ACL keeps its filter.
      next.set(extension.metadata.namespace, acl ?? KEEP_AS_STORED);
    }
    this.legacy = next;
    this.revision = revision;
    return next;
  }
}

/** Fixed objects, for benchmarks and tests that need no API server. */
export function staticCacheSource(extensions: readonly Extension[]): AdmissionCacheSource {
  return { extensions: () => extensions, revision: () => 0, synced: () => true };
}
