// What the OperatorConfiguration's zod schema renders into other files: the charts' schema of
// their config values and the operators' configuration reference. scripts/generated-files.ts
// lists every generated file; `npm run generate` writes them, and CI fails while a committed one
// differs, so a setting changed in zod cannot drift from what Helm checks and operators read.
import { z } from 'zod';
import { compactJson } from '../json/compact-json.js';
import { isRecord } from '../json/record.js';
import { stringify as stringifyYaml } from 'yaml';
import { operatorSettingsSchema } from '../acl/operator-settings.js';

export const GENERATE_COMMAND = 'npm run generate';

type JsonObject = Record<string, unknown>;

// Reviewers read a setting's shape before its prose; zod emits keywords in its own order.
const KEYWORD_ORDER = ['$ref', 'type', 'const', 'enum', 'minimum', 'maximum', 'minLength', 'maxLength', 'minItems', 'maxItems', 'pattern', 'items', 'default', 'description'];

function ordered(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(ordered);
  if (!isRecord(schema)) return schema;
  const rank = (key: string) => (KEYWORD_ORDER.includes(key) ? KEYWORD_ORDER.indexOf(key) : KEYWORD_ORDER.length);
  const keys = Object.keys(schema).sort((a, b) => rank(a) - rank(b));
  return Object.fromEntries(keys.map((key) => [key, key === 'properties' && isRecord(schema[key]) ? Object.fromEntries(Object.entries(schema[key]).map(([k, v]) => [k, ordered(v)])) : ordered(schema[key])]));
}

/** Each OperatorConfiguration field as JSON Schema (draft-07, what an operator writes: defaults applied later). */
export function operatorFieldSchemas(): Record<string, JsonObject> {
  const schema = z.toJSONSchema(operatorSettingsSchema, { target: 'draft-07', io: 'input' });
  const properties = schema.properties ?? {};
  return Object.fromEntries(Object.entries(properties).map(([name, field]) => [name, ordered(field) as JsonObject]));
}

/** Which fields of the OperatorConfiguration a chart takes as its `config` value. */
export interface ChartConfigFields {
  readonly chart: string;
  /** undefined: every field. */
  readonly fields?: readonly string[];
}

export const SEED_CHART_CONFIG: ChartConfigFields = { chart: 'charts/gardener-acl' };
/** The admission server validates Shoots only, which needs the CIDR bound alone. */
export const ADMISSION_CHART_CONFIG: ChartConfigFields = { chart: 'charts/gardener-acl-admission', fields: ['maxCIDRs'] };

/** A chart's values.schema.json with its `config` properties rendered from zod; the rest is the chart's own. */
export function chartValuesSchemaText(current: string, { chart, fields }: ChartConfigFields): string {
  const schema: unknown = JSON.parse(current);
  const config = isRecord(schema) && isRecord(schema['properties']) ? schema['properties']['config'] : undefined;
  if (!isRecord(config)) throw new Error(`${chart}/values.schema.json: no properties.config object to render the OperatorConfiguration into`);
  const all = operatorFieldSchemas();
  const names = fields ?? settingNames(all);
  config['properties'] = Object.fromEntries(
    names.map((name) => {
      const field = all[name];
      if (field === undefined) throw new Error(`${chart}: ${name} is not a field of the OperatorConfiguration (${settingNames(all).join(', ')})`);
      return [name, field];
    }),
  );
  config['additionalProperties'] = false;
  return compactJson(schema);
}

const MARKER = 'operator configuration';

function beginMarker(name: string): string {
  return `<!-- BEGIN GENERATED: ${name} (${GENERATE_COMMAND}) -->`;
}

function endMarker(name: string): string {
  return `<!-- END GENERATED: ${name} -->`;
}

/** `text` with the lines between the markers of `name` replaced by `content`. */
export function replaceGeneratedSection(text: string, name: string, content: string, file: string): string {
  const begin = text.indexOf(beginMarker(name));
  const end = text.indexOf(endMarker(name));
  if (begin < 0 || end < begin) throw new Error(`${file}: no lines ${beginMarker(name)} ... ${endMarker(name)} to write the generated ${name} between; add them where it belongs`);
  const afterBegin = text.indexOf('\n', begin) + 1;
  return `${text.slice(0, afterBegin)}${content}${text.slice(end)}`;
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** A code span of `value` (a string as it is, anything else as JSON), fenced so that a backtick inside stays in it; the row escapes `|`. */
function code(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``;
}

/** What a field accepts, in words an operator reads before the description. */
function accepts(field: JsonObject): string {
  const items = isRecord(field['items']) ? field['items'] : undefined;
  if (field['type'] === 'array' && items) {
    const bounds = [field['minItems'] !== undefined ? `at least ${String(field['minItems'])}` : '', field['maxItems'] !== undefined ? `at most ${String(field['maxItems'])}` : ''].filter(Boolean);
    return `list${bounds.length > 0 ? ` (${bounds.join(', ')})` : ''} of ${accepts(items)}`;
  }
  if (Array.isArray(field['enum'])) return `one of ${field['enum'].map(code).join(', ')}`;
  if (field['const'] !== undefined) return code(field['const']);
  if (field['type'] === 'integer') return `integer ${String(field['minimum'])}–${String(field['maximum'])}`;
  if (typeof field['pattern'] === 'string') return `string matching ${code(field['pattern'])}`;
  return String(field['type']);
}

/** The fields an operator sets: all but the optional apiVersion and kind. */
function settingNames(fields: Record<string, JsonObject>): string[] {
  return Object.keys(fields).filter((name) => name !== 'apiVersion' && name !== 'kind');
}

/**
 * What an operator writes to set zod's defaults: the input form of every field, before case
 * folding and sorting. zod gives no JSON default for a list whose items it transforms (the CIDRs):
 * an empty list reads the same either way, anything else would be the parsed form and is refused.
 */
export function inputDefaults(): JsonObject {
  const parsed: JsonObject = operatorSettingsSchema.parse({});
  const fields = operatorFieldSchemas();
  return Object.fromEntries(
    settingNames(fields).map((name) => {
      const declared = fields[name]?.['default'];
      if (declared !== undefined) return [name, declared];
      const value = parsed[name];
      if (Array.isArray(value) && value.length === 0) return [name, []];
      throw new Error(`OperatorConfiguration ${name}: its zod default has no JSON form (${typeof value}); give the field a default zod can render`);
    }),
  );
}

/** The operators' reference of the OperatorConfiguration: the defaults as a file, then one row per field, from zod. */
export function configReferenceMarkdown(): string {
  const defaults = inputDefaults();
  const rows = Object.entries(operatorFieldSchemas()).map(([name, field]) => {
    const value = name in defaults ? code(defaults[name]) : '—';
    return `| \`${name}\` | ${cell(value)} | ${cell(accepts(field))} | ${cell(String(field['description'] ?? ''))} |`;
  });
  const file = { apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'OperatorConfiguration', ...defaults };
  return ['```yaml', stringifyYaml(file).trimEnd(), '```', '', '| Field | Default | Accepts | What it does |', '| --- | --- | --- | --- |', ...rows, ''].join('\n');
}

export const CONFIG_REFERENCE_FILE = 'docs/operators/configuration.md';
export const CONFIG_REFERENCE_SECTION = MARKER;
