// How many shoots the ECDS buckets hold before the first one fits no bucket, for 2, 10 and 50
// CIDRs per shoot (test/support/capacity-shoots.ts), with the operator's defaults or the given
// bucket count and object size. Jump hashing fills buckets unevenly, so this is found by placing
// the shoots with the controller's own planner (a binary search over the shoot count).
//
// usage: npx tsx bench/ecds-capacity.ts [ecdsBuckets] [maxObjectBytes]
import { defaultOperatorConfig, type OperatorConfig } from '../src/config/operator-config.js';
import { combinedForm } from '../src/actuator/combined-forms.js';
import { capacityShoots } from '../test/support/capacity-shoots.js';

const defaults = defaultOperatorConfig();
const operator: OperatorConfig = {
  ...defaults,
  combinedForm: 'ecds',
  ecdsBuckets: Number(process.argv[2] ?? defaults.ecdsBuckets),
  maxObjectBytes: Number(process.argv[3] ?? defaults.maxObjectBytes),
};
const form = combinedForm(operator);
const fits = (count: number, cidrs: number): boolean => form.place(capacityShoots(count, cidrs), []).unplaced.size === 0;

console.log(`ECDS capacity with ${operator.ecdsBuckets} buckets of ${operator.maxObjectBytes} bytes (${operator.protectedHeaders.length} protected headers)`);
console.log('CIDRs per shoot | bytes per shoot | shoots that all fit');
for (const cidrs of [2, 10, 50]) {
  let lo = 1;
  let hi = 100_000;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid, cidrs)) lo = mid;
    else hi = mid - 1;
  }
  const [first] = capacityShoots(1, cidrs);
  const bytes = first ? form.bytes(first.technicalID, form.entry(first)) : 0;
  console.log(`${String(cidrs).padStart(15)} | ${String(bytes).padStart(15)} | ${String(lo).padStart(19)}`);
}
