// Replays a combined-filter write plan against a simulated store, one write or delete at a time,
// collecting what `gapsNow` reports after each step (the add-before-remove checks).
import type { CombinedWrite } from '../../src/actuator/combined-forms.js';
import type { CombinedWritePlan } from '../../src/actuator/combined-syncer.js';
import type { EnvoyFilterObject } from '../../src/gardener/objects.js';

export type Store = Map<string, EnvoyFilterObject>;
export const keyOf = (f: { metadata: { namespace: string; name: string } }): string => `${f.metadata.namespace}/${f.metadata.name}`;
const asStored = (w: CombinedWrite): EnvoyFilterObject => JSON.parse(JSON.stringify(w)) as EnvoyFilterObject;

export function replayPlan(store: Store, plan: CombinedWritePlan, gapsNow: () => readonly string[]): { gaps: string[]; steps: number } {
  const gaps: string[] = [];
  let steps = 0;
  const check = (what: string) => {
    steps++;
    for (const gap of gapsNow()) gaps.push(`${what}: ${gap}`);
  };
  for (const w of [...plan.grow, ...plan.settle]) {
    store.set(keyOf(w), asStored(w));
    check(`write ${keyOf(w)}`);
  }
  for (const d of plan.deletions) {
    store.delete(keyOf(d));
    check(`delete ${keyOf(d)}`);
  }
  return { gaps, steps };
}
