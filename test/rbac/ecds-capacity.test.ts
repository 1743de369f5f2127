// The capacity docs/operators/ecds-delivery.md states for the default form (48 buckets of 512 KiB), held to the
// planner: for 2, 10 and 50 CIDRs per shoot, that many shoots all fit a bucket and one more leaves
// a shoot out (bench/ecds-capacity.ts finds the figures; same shoots, test/support/capacity-shoots.ts).
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { combinedForm } from '../../src/actuator/combined-forms.js';
import { capacityShoots } from '../support/capacity-shoots.js';

const README_CAPACITY = [
  { cidrs: 2, bytes: 1109, shoots: 20_160 },
  { cidrs: 10, bytes: 1503, shoots: 14_216 },
  { cidrs: 50, bytes: 3479, shoots: 5_801 },
] as const;

describe('the default form holds what the README says', () => {
  const operator = defaultOperatorConfig();
  const form = combinedForm(operator);

  it('is ecds with 48 buckets of 512 KiB', () => {
    expect([operator.combinedForm, operator.ecdsBuckets, operator.maxObjectBytes]).toEqual(['ecds', 48, 512 * 1024]);
  });

  it.each(README_CAPACITY)('$cidrs CIDRs per shoot: $bytes bytes each, $shoots shoots fit and one more leaves one out, with the fix named', ({ cidrs, bytes, shoots }) => {
    const [first] = capacityShoots(1, cidrs);
    expect(first && form.bytes(first.technicalID, form.entry(first))).toBe(bytes);
    expect(form.place(capacityShoots(shoots, cidrs), []).unplaced).toEqual(new Map());
    const over = form.place(capacityShoots(shoots + 1, cidrs), []).unplaced;
    expect(over.size).toBeGreaterThan(0);
    for (const message of over.values()) expect(message).toMatch(/ needs \d+ bytes in ECDS bucket \d+ of 48, which other shoots fill up to the \d+ bytes one object may hold; raise ecdsBuckets or maxObjectBytes in the OperatorConfiguration$/);
  }, 120_000);
});
