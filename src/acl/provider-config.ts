import { z } from 'zod';
import { normalizeCidrSet } from './cidr.js';
import { cidrStringSchema } from './cidr-schema.js';
import { exposureWarnings, hostBitWarnings } from './exposure-warnings.js';
import { fieldErrorsFromZod, REPORT_INPUT, type FieldError } from './field-errors.js';
import { boundedLines, quoteInput } from './quote-input.js';
import { ACTIONS, PRINCIPAL_TYPES, RULE_MODES, type AclRule } from './acl-rule.js';

function oneOf(values: readonly string[]): string {
  return values.length < 2 ? (values[0] ?? '') : `${values.slice(0, -1).join(', ')} or ${values[values.length - 1]}`;
}

function caseInsensitiveEnum<const T extends readonly string[]>(values: T, normalise: (s: string) => string, field: string) {
  return z.string({ error: `must be a string, one of ${values.join(', ')}` }).transform((text, ctx): T[number] => {
    const value = normalise(text.trim());
    if ((values as readonly string[]).includes(value)) return value as T[number];
    ctx.addIssue({ code: 'custom', message: `${quoteInput(text)} is not a valid ${field}; use ${oneOf(values)}` });
    return z.NEVER;
  });
}

/** How many written entries a rule may have per distinct range allowed (maxCIDRs). */
const RAW_CIDR_FACTOR = 10;

export function providerConfigSchema(maxCidrs: number) {
  const rule = z.strictObject(
    {
      action: caseInsensitiveEnum(ACTIONS, (s) => s.toUpperCase(), 'action'),
      type: caseInsensitiveEnum(PRINCIPAL_TYPES, (s) => s.toLowerCase(), 'type'),
      mode: caseInsensitiveEnum(RULE_MODES, (s) => s.toLowerCase(), 'mode').optional(),
      // maxCIDRs bounds what is enforced (the canonical set, which sizes the combined filters);
      // the written list may repeat entries, up to ten times as many (parsing stays bounded).
      cidrs: z
        .array(cidrStringSchema, { error: 'must be a list of CIDR strings' })
        .min(1, { error: 'must list at least one CIDR; an empty list would admit nobody (ALLOW) or nothing (DENY)' })
        .max(RAW_CIDR_FACTOR * maxCidrs, {
          error: (issue) =>
            `has ${Array.isArray(issue.input) ? issue.input.length : '?'} entries, more than ${RAW_CIDR_FACTOR} times the maximum of ${maxCidrs} distinct ranges set by the operator; remove the repeated entries`,
        })
        .superRefine((cidrs, ctx) => {
          const distinct = normalizeCidrSet(cidrs).length;
          if (distinct <= maxCidrs) return;
          ctx.addIssue({
            code: 'custom',
            message: `has ${distinct} distinct ranges (repeated entries and ranges inside others not counted), more than the maximum of ${maxCidrs} set by the operator; merge ranges or ask the operator to raise maxCIDRs`,
          });
        }),
    },
    { error: (issue) => (issue.input === undefined ? 'is required: add rule with action, type and cidrs' : 'must be an object with action, type, cidrs and optionally mode') },
  );
  return z
    .strictObject(
      {
        // Gardener convention for providerConfig; accepted and ignored.
        apiVersion: z.string().optional(),
        kind: z.string().optional(),
        rule,
      },
      { error: 'must be an object with a rule' },
    )
    .transform(({ rule: r }): AclRule => ({ action: r.action, type: r.type, cidrs: normalizeCidrSet(r.cidrs), mode: r.mode ?? 'enforce' }));
}

export type ProviderConfigResult =
  | { readonly ok: true; readonly rule: AclRule; readonly warnings: readonly FieldError[] }
  | { readonly ok: false; readonly errors: readonly FieldError[] };

const KNOWN_FIELDS = ['apiVersion', 'kind', 'rule'];
const KNOWN_RULE_FIELDS = ['action', 'type', 'cidrs', 'mode'];

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Fields the rule does not know are ignored with a warning, not refused: the reference extension
 * decoded providerConfig leniently, and a shoot that worked there must keep working here. A
 * misspelt required field still fails (it is then missing).
 */
function withoutUnknownFields(raw: unknown, pathPrefix: string): { readonly config: unknown; readonly warnings: FieldError[] } {
  if (!isPlainObject(raw)) return { config: raw, warnings: [] };
  const warnings: FieldError[] = [];
  const keep = (object: Record<string, unknown>, known: readonly string[], path: string): Record<string, unknown> => {
    const unknown = Object.keys(object).filter((key) => !known.includes(key));
    if (unknown.length > 0) {
      warnings.push({ path, message: `unknown field(s) ${boundedLines(unknown.map(quoteInput), 5).join(', ')} ignored; remove them or check the spelling` });
    }
    return Object.fromEntries(Object.entries(object).filter(([key]) => known.includes(key)));
  };
  const config = keep(raw, KNOWN_FIELDS, pathPrefix);
  if (isPlainObject(config['rule'])) config['rule'] = keep(config['rule'], KNOWN_RULE_FIELDS, `${pathPrefix}.rule`);
  return { config, warnings };
}

/**
 * Validates a shoot's `providerConfig`. `pathPrefix` places errors in the caller's object,
 * e.g. `spec.extensions[0].providerConfig` for a Shoot or `spec.providerConfig` for an Extension.
 */
export function parseProviderConfig(raw: unknown, maxCidrs: number, pathPrefix: string): ProviderConfigResult {
  if (raw === undefined || raw === null) {
    return { ok: false, errors: [{ path: pathPrefix, message: 'is required: add rule with action, type and cidrs' }] };
  }
  const { config, warnings } = withoutUnknownFields(raw, pathPrefix);
  const result = providerConfigSchema(maxCidrs).safeParse(config, REPORT_INPUT);
  if (result.success) {
    const rawCidrs = (config as { rule?: { cidrs?: unknown } }).rule?.cidrs;
    const hostBits = Array.isArray(rawCidrs) ? hostBitWarnings(rawCidrs, result.data.action, pathPrefix) : [];
    return { ok: true, rule: result.data, warnings: [...warnings, ...hostBits, ...exposureWarnings(result.data, pathPrefix)] };
  }
  return { ok: false, errors: withMissingFieldHints(fieldErrorsFromZod(result.error, pathPrefix), raw, pathPrefix) };
}

/** The same word, give or take case, punctuation and a plural s: `cidr`, `CIDRs`, `cidr_s` for `cidrs`. */
function sameWord(a: string, b: string): boolean {
  const norm = (s: string) => s.toLowerCase().replace(/[^a-z]/g, '').replace(/s$/, '');
  return norm(a) === norm(b);
}

/**
 * A rule field that is missing while the rule has an unknown field of nearly the same name is a
 * typo: the error says which, instead of only that the field is not a list or a string.
 */
function withMissingFieldHints(errors: readonly FieldError[], raw: unknown, pathPrefix: string): FieldError[] {
  const rule = isPlainObject(raw) && isPlainObject(raw['rule']) ? raw['rule'] : undefined;
  if (!rule) return [...errors];
  return errors.map((error) => {
    const field = error.path.slice(`${pathPrefix}.rule.`.length);
    if (error.path !== `${pathPrefix}.rule.${field}` || !KNOWN_RULE_FIELDS.includes(field) || field in rule) return error;
    const typo = Object.keys(rule).find((key) => !KNOWN_RULE_FIELDS.includes(key) && sameWord(key, field));
    return typo === undefined ? { ...error, message: `is required; ${error.message}` } : { ...error, message: `is required; the rule has ${quoteInput(typo)} instead: rename it to ${field}` };
  });
}
