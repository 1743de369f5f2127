import type { z } from 'zod';

import { boundedLines, quoteInput } from './quote-input.js';

/** One problem with user input, located by a field path such as `rule.cidrs[2]`. */
export interface FieldError {
  readonly path: string;
  readonly message: string;
}

export function joinPath(prefix: string, segments: readonly PropertyKey[]): string {
  let path = prefix;
  for (const segment of segments) {
    if (typeof segment === 'number') path += `[${segment}]`;
    else path += path === '' ? String(segment) : `.${String(segment)}`;
  }
  return path;
}

export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  const json = JSON.stringify(value);
  return json.length > 80 ? `${json.slice(0, 77)}...` : json;
}

const ARTICLE: Readonly<Record<string, string>> = { object: 'an object', array: 'a list', string: 'a string', number: 'a number', boolean: 'a boolean' };

function describeIssue(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'unrecognized_keys':
      return `unknown field(s) ${boundedLines(issue.keys.map(quoteInput), 5).join(', ')}; remove them or check the spelling`;
    case 'invalid_type': {
      // Messages given in a schema already say what is wanted; zod's generic ones are rephrased.
      if (!issue.message.startsWith('Invalid input')) return issue.message;
      const wanted = `must be ${ARTICLE[issue.expected] ?? issue.expected}`;
      return issue.input === undefined ? `is required (${wanted.replace('must be ', '')})` : `${wanted}, not ${describeValue(issue.input)}`;
    }
    default:
      return issue.message;
  }
}

/** Parse options under which issues carry the offending value. */
export const REPORT_INPUT = { reportInput: true } as const;

/** Flattens zod issues into field errors whose path starts at `prefix`. */
export function fieldErrorsFromZod(error: z.ZodError, prefix: string): FieldError[] {
  return error.issues.map((issue) => ({ path: joinPath(prefix, issue.path), message: describeIssue(issue) }));
}

/** Field errors listed in one message at most; the rest are counted (the message must stay small). */
export const MAX_LISTED_ERRORS = 10;

export function formatFieldErrors(errors: readonly FieldError[]): string {
  return boundedLines(errors.map((e) => (e.path ? `${e.path}: ${e.message}` : e.message)), MAX_LISTED_ERRORS).join('\n');
}
