import type { Cidr } from '../acl/cidr.js';
import { cidrStringSchema } from '../acl/cidr-schema.js';
import type { Problem } from './problems.js';

/** CIDRs read from one object's fields; an invalid one is an error naming the field (and `ok` turns false). */
export class CidrCollector {
  readonly cidrs: Cidr[] = [];
  constructor(
    private readonly problems: Problem[],
    private readonly object: string,
  ) {}
  ok = true;
  add(value: string | null | undefined, path: string): void {
    if (value === undefined || value === null || value === '') return;
    const parsed = cidrStringSchema.safeParse(value);
    if (parsed.success) this.cidrs.push(parsed.data);
    else {
      this.ok = false;
      this.problems.push({ severity: 'error', object: this.object, message: `${path}: ${parsed.error.issues[0]?.message ?? 'invalid'}` });
    }
  }
}
