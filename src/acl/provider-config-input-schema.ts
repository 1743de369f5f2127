// The shape a shoot owner may write as the acl extension's providerConfig, as a zod schema that
// z.toJSONSchema can render for editors (schemas/acl-provider-config.schema.json).
//
// It is not the parser's schema (provider-config.ts), because that one cannot be rendered
// faithfully: its transforms (case folding, CIDR parsing) render as bare strings, its strict
// objects as `additionalProperties: false` although parseProviderConfig drops unknown fields
// with a warning before they reach it, and its list bound depends on the seed's maxCIDRs. This
// schema must accept everything the parser accepts (an editor must never flag a config the
// garden admits) and refuse the structural mistakes the parser refuses;
// test/acl/provider-config-json-schema.test.ts holds the two to that.
import { z } from 'zod';
import { CIDR_EXAMPLE } from './cidr-schema.js';
import { operatorSettingsSchema } from './operator-settings.js';
import { ACTIONS, PRINCIPAL_TYPES, RULE_MODES } from './acl-rule.js';

export const PROVIDER_CONFIG_SCHEMA_FILE = 'schemas/acl-provider-config.schema.json';
/** scripts/generate.ts writes it, with the other files rendered from zod (src/config/generated-files.ts). */
export const PROVIDER_CONFIG_SCHEMA_COMMAND = 'npm run generate';
/** Where the file is published: the repository the charts name as `home`, branch main. */
export const PROVIDER_CONFIG_SCHEMA_ID = `https://raw.githubusercontent.com/gardener-acl/gardener-acl/main/${PROVIDER_CONFIG_SCHEMA_FILE}`;

/**
 * What String.prototype.trim removes, as a regex class body. Spelt out rather than `\s`, whose
 * meaning differs between the regex engines editors use (Java's is ASCII only), and as escapes so
 * that the published file stays ASCII.
 */
export const TRIMMED_WHITESPACE_CLASS = '\\t\\n\\u000b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
const WS = `[${TRIMMED_WHITESPACE_CLASS}]*`;

/**
 * The parser trims and case-folds before comparing; a pattern of ASCII case pairs matches exactly
 * the same strings as long as no non-ASCII character folds into one of the values (the test scans
 * every code point for that).
 */
function caseInsensitivePattern(values: readonly string[]): RegExp {
  const words = values.map((value) => {
    if (!/^[A-Za-z_]+$/.test(value)) throw new Error(`${JSON.stringify(value)}: only letters and _ can be turned into a case-insensitive pattern`);
    return [...value].map((c) => (c.toLowerCase() === c.toUpperCase() ? c : `[${c.toLowerCase()}${c.toUpperCase()}]`)).join('');
  });
  return new RegExp(`^${WS}(${words.join('|')})${WS}$`);
}

const OCTETS = '[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}';
/**
 * The shape of what parseCidr accepts, and more: digit counts, not values, so an octet over 255,
 * a prefix over 32/128 or a wrong number of IPv6 groups is left to the parser. A pattern exact
 * for IPv6 (`::` compression, embedded IPv4) would be long and hard to keep in step with
 * parseCidr; a superset can never make an editor flag a range the garden accepts.
 */
export const CIDR_SHAPE = new RegExp(`^${WS}(${OCTETS}|[0-9A-Fa-f]*:[0-9A-Fa-f:]*(${OCTETS})?)(/[0-9]{1,3})?${WS}$`);

function oneOf(values: readonly string[]): string {
  return values.length < 2 ? (values[0] ?? '') : `${values.slice(0, -1).join(', ')} or ${values[values.length - 1]}`;
}

/** Accepted spellings of one of `values`; the plain enum comes first so editors offer and name the values. */
function choice(values: readonly [string, ...string[]], what: string) {
  return z.union([z.enum(values), z.string().regex(caseInsensitivePattern(values)).meta({ patternErrorMessage: `use ${oneOf(values)} (any case)` })]).meta({ description: what });
}

// The parser ignores unknown fields with a warning, so they must validate. `deprecationMessage`
// (a keyword of VS Code's JSON and of yaml-language-server) turns them into a warning on the
// field, the nearest an editor gets to the parser's own.
const UNKNOWN_FIELD = z.unknown().meta({
  deprecationMessage: 'not a field of the acl providerConfig: it is ignored, with a warning when the Shoot is applied; check the spelling (e.g. cidr for cidrs)',
});

const ACTION_DESCRIPTION = [
  'What the rule does with the clients in cidrs.',
  'ALLOW: only clients in cidrs reach the control plane, plus the always-allowed ranges (the seed\'s node and pod ranges, the shoot\'s node range and egress CIDRs, ranges the operator adds).',
  'DENY: clients in cidrs are refused, except the always-allowed ranges.',
  'Any case is accepted (allow, Deny).',
].join(' ');

const TYPE_DESCRIPTION = [
  'Which client address is compared with cidrs.',
  'remote_ip: the original client (from the PROXY-protocol header when the seed\'s load balancer sends one).',
  'direct_remote_ip: the physical peer of the connection.',
  'source_ip: Envoy\'s deprecated PROXY-aware, X-Forwarded-For-unaware address (the same as remote_ip on Gardener\'s gateways).',
  'Any case is accepted.',
].join(' ');

const MODE_DESCRIPTION = [
  'Optional. enforce (the default): refuse what the rule does not admit.',
  'audit: refuse nothing; Envoy counts, per shoot and path, what enforce would refuse (a way to try a rule safely; the garden warns while it is set).',
  'Any case is accepted.',
].join(' ');

function cidrsDescription(defaultMaxCidrs: number): string {
  return [
    'IPv4 and IPv6 ranges the rule applies to, at least one; a bare address means one host.',
    'Host bits are cleared (10.1.2.3/8 means 10.0.0.0/8), repeated entries and ranges inside other listed ranges are dropped, and order does not matter.',
    `The number of distinct ranges is limited by the seed operator's maxCIDRs (${defaultMaxCidrs} unless the operator changed it); this schema cannot know the seed's value, so only gardener-acl checks it when the Shoot is applied, as it checks that each address and prefix length is in range.`,
  ].join(' ');
}

/** The input shape of providerConfig, for rendering as JSON Schema (see the file comment). */
export function providerConfigInputSchema() {
  const rule = z
    .object({
      action: choice(ACTIONS, ACTION_DESCRIPTION),
      type: choice(PRINCIPAL_TYPES, TYPE_DESCRIPTION),
      cidrs: z
        .array(z.string().regex(CIDR_SHAPE).meta({ description: 'An IPv4 or IPv6 range (address/prefix length) or a single address.', patternErrorMessage: `not a CIDR; ${CIDR_EXAMPLE}` }))
        .min(1)
        .meta({ description: cidrsDescription(operatorSettingsSchema.parse({}).maxCIDRs) }),
      mode: choice(RULE_MODES, MODE_DESCRIPTION).meta({ default: 'enforce' }).optional(),
    })
    .catchall(UNKNOWN_FIELD)
    .meta({ description: 'The one access rule of this shoot. Fields other than action, type, cidrs and mode are ignored with a warning.' });
  return z
    .object({
      apiVersion: z.string().meta({ description: 'Optional and ignored (Gardener convention for providerConfig objects); any string is accepted.' }).optional(),
      kind: z.string().meta({ description: 'Optional and ignored (Gardener convention for providerConfig objects); any string is accepted.' }).optional(),
      rule,
    })
    .catchall(UNKNOWN_FIELD)
    .meta({
      $id: PROVIDER_CONFIG_SCHEMA_ID,
      title: 'gardener-acl providerConfig',
      description: [
        'providerConfig of the Shoot extension of type acl (spec.extensions[].providerConfig; Gardener copies it into the Extension\'s spec.providerConfig):',
        'which client IP ranges may reach the shoot\'s control plane through the seed\'s Istio ingress gateways.',
        'When the Shoot is applied, gardener-acl also checks what this schema cannot: that each CIDR\'s address and prefix length are in range, and the seed operator\'s limit on the number of ranges (maxCIDRs).',
      ].join(' '),
    });
}

/**
 * Keyword order in the published file, so a zod upgrade that emits keys in another order does not
 * change it. Property names keep the schema's order (the order editors offer them in).
 */
const KEYWORD_ORDER = [
  '$schema',
  '$id',
  'title',
  'description',
  'deprecationMessage',
  'default',
  'type',
  'enum',
  'pattern',
  'patternErrorMessage',
  'anyOf',
  'minItems',
  'items',
  'required',
  'properties',
  'additionalProperties',
];

function canonical(schema: unknown, at: string): unknown {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw new Error(`${at}: a schema must be an object`);
  const entries = Object.entries(schema);
  const unknown = entries.map(([key]) => key).filter((key) => !KEYWORD_ORDER.includes(key));
  // A keyword this ordering does not know is one the test's validator does not know either.
  if (unknown.length > 0) throw new Error(`${at}: keyword(s) ${unknown.join(', ')} not in KEYWORD_ORDER; add them there and to test/support/json-schema-check.ts`);
  entries.sort(([a], [b]) => KEYWORD_ORDER.indexOf(a) - KEYWORD_ORDER.indexOf(b));
  return Object.fromEntries(
    entries.map(([key, value]) => {
      if (key === 'properties') return [key, Object.fromEntries(Object.entries(value as object).map(([name, sub]) => [name, canonical(sub, `${at}/properties/${name}`)]))];
      if (key === 'anyOf') return [key, (value as unknown[]).map((sub, i) => canonical(sub, `${at}/anyOf/${i}`))];
      if (key === 'items' || key === 'additionalProperties') return [key, typeof value === 'boolean' ? value : canonical(value, `${at}/${key}`)];
      return [key, value];
    }),
  );
}

/**
 * Draft-07: the newest draft yaml-language-server (VS Code's YAML extension) supports, and every
 * keyword used here means the same in later drafts.
 */
export function providerConfigJsonSchema(): Record<string, unknown> {
  return canonical(z.toJSONSchema(providerConfigInputSchema(), { target: 'draft-07', io: 'input' }), '#') as Record<string, unknown>;
}

/** The published file's exact text. */
export function providerConfigJsonSchemaText(): string {
  return `${JSON.stringify(providerConfigJsonSchema(), null, 2)}\n`;
}
