// When a shoot waiting on the seed-wide combined CONNECT filters may look again: its reconcile
// parks until then, and the controller wakes it on the combined filters' events.
import { appliedFromState, type AppliedAcl } from '../gardener/applied-state.js';
import { isActive } from '../gardener/extension-class.js';
import type { Extension } from '../gardener/objects.js';
import { recordedTunnelGeneration } from './tunnel-generation.js';
import type { CombinedProtection } from './combined-syncer.js';

/** What the stored combined filters say, as the combined syncer reads them. */
export interface CombinedReading {
  holds(technicalID: string): boolean;
  protection(shoot: AppliedAcl): CombinedProtection;
  tunnelHopMissing(technicalID: string, generation: number): readonly string[];
}

/**
 * Whether what `ext` waits for has come. A shoot that is going (deleted, migrated away) waits for
 * the stored filters to drop it: asked whether they protect it, it would wait for ever, and only
 * its retry backoff (doubling to minutes) would bring it back. Any other waits for them to protect
 * it as recorded, or for a problem to report.
 */
export function combinedWaitOver(ext: Extension | undefined, combined: CombinedReading): boolean {
  if (!ext) return true;
  if (!isActive(ext)) return !combined.holds(ext.metadata.namespace);
  const applied = appliedFromState(ext.metadata.namespace, ext.status?.['state']);
  if (!applied) return true;
  const protection = combined.protection(applied);
  if (protection.uncovered.length > 0) return protection.problem !== undefined;
  const generation = recordedTunnelGeneration(ext)?.generation;
  return generation === undefined || combined.tunnelHopMissing(ext.metadata.namespace, generation).length === 0;
}
