import { z } from 'zod';
import { parseCidr, type Cidr } from './cidr.js';
import { quoteInput } from './quote-input.js';

export const CIDR_EXAMPLE = 'write a range like 203.0.113.0/24 or 2001:db8::/48';

/** A CIDR string that parses into a {@link Cidr}; the error names the value and the fix. */
export const cidrStringSchema = z.string({ error: `must be a CIDR string; ${CIDR_EXAMPLE}` }).transform((text, ctx): Cidr => {
  const parsed = parseCidr(text);
  if (!parsed.ok) {
    ctx.addIssue({ code: 'custom', message: `${quoteInput(text)} is not a valid CIDR (${parsed.reason}); ${CIDR_EXAMPLE}` });
    return z.NEVER;
  }
  return parsed.cidr;
});
