// The seed chart's values.schema.json applied to the values a registration embeds, so that a bad
// value is refused when the operator writes the registration, not later at gardenlet's render on
// every seed. Only the JSON-Schema keywords the chart's schema uses are understood; a schema that
// uses another one is refused as a whole (see schemaKeywordProblem), so the check never silently
// passes something Helm would refuse.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

type Schema = Readonly<Record<string, unknown>>;

/** Keywords that constrain a value. */
const CHECKED = new Set(['type', 'enum', 'const', 'pattern', 'minimum', 'maximum', 'minLength', 'maxLength', 'minItems', 'maxItems', 'required', 'properties', 'additionalProperties', 'items', '$ref', 'allOf', 'if', 'then']);
/** Keywords that only annotate. */
const ANNOTATIONS = new Set(['$schema', 'title', 'description', 'definitions', 'default', 'examples']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function hasType(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

const show = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 64 ? `${text.slice(0, 61)}...` : text;
};

/** A keyword of `schema` (or below it) the check does not understand, or undefined. */
export function schemaKeywordProblem(schema: unknown, at = ''): string | undefined {
  if (!isObject(schema)) return undefined;
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'properties' || key === 'definitions') {
      if (!isObject(value)) continue;
      for (const [name, sub] of Object.entries(value)) {
        const problem = schemaKeywordProblem(sub, `${at}/${key}/${name}`);
        if (problem) return problem;
      }
      continue;
    }
    if (!CHECKED.has(key) && !ANNOTATIONS.has(key)) return `${at || '/'}: keyword "${key}"`;
    const subs = key === 'allOf' && Array.isArray(value) ? value : ['items', 'additionalProperties', 'if', 'then'].includes(key) ? [value] : [];
    for (const sub of subs) {
      const problem = schemaKeywordProblem(sub, `${at}/${key}`);
      if (problem) return problem;
    }
  }
  return undefined;
}

/** Every way `value` at `at` breaks `schema` (the root schema resolves `$ref`s). */
export function valuesSchemaErrors(value: unknown, schema: Schema, root: Schema = schema, at = ''): string[] {
  const where = at === '' ? '(the values)' : at;
  const errors: string[] = [];
  const ref = schema['$ref'];
  if (typeof ref === 'string') {
    const name = /^#\/definitions\/(.+)$/.exec(ref)?.[1];
    const target = name !== undefined && isObject(root['definitions']) ? root['definitions'][name] : undefined;
    if (!isObject(target)) return [`${where}: the chart's schema refers to ${ref}, which it does not define`];
    errors.push(...valuesSchemaErrors(value, target, root, at));
  }
  const types = schema['type'] === undefined ? undefined : ([] as unknown[]).concat(schema['type']).map(String);
  if (types && !types.some((t) => hasType(value, t))) return [...errors, `${where}: must be ${types.join(' or ')}, not ${typeOf(value)} ${show(value)}`];
  if (Array.isArray(schema['enum']) && !schema['enum'].some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    errors.push(`${where}: must be one of ${schema['enum'].map((e) => show(e)).join(', ')}, not ${show(value)}`);
  }
  if ('const' in schema && JSON.stringify(schema['const']) !== JSON.stringify(value)) errors.push(`${where}: must be ${show(schema['const'])}, not ${show(value)}`);
  if (typeof value === 'string' || typeof value === 'number') {
    const text = String(value);
    if (typeof schema['pattern'] === 'string' && !new RegExp(schema['pattern'], 'u').test(text)) errors.push(`${where}: ${show(value)} does not have the form ${schema['pattern']}`);
  }
  if (typeof value === 'number') {
    if (typeof schema['minimum'] === 'number' && value < schema['minimum']) errors.push(`${where}: must be at least ${schema['minimum']}, not ${value}`);
    if (typeof schema['maximum'] === 'number' && value > schema['maximum']) errors.push(`${where}: must be at most ${schema['maximum']}, not ${value}`);
  }
  if (typeof value === 'string' && typeof schema['minLength'] === 'number' && value.length < schema['minLength']) errors.push(`${where}: must be at least ${schema['minLength']} character(s) long`);
  if (typeof value === 'string' && typeof schema['maxLength'] === 'number' && value.length > schema['maxLength']) errors.push(`${where}: must be at most ${schema['maxLength']} characters long, not ${value.length}`);
  if (Array.isArray(value)) {
    if (typeof schema['minItems'] === 'number' && value.length < schema['minItems']) errors.push(`${where}: must list at least ${schema['minItems']}`);
    if (typeof schema['maxItems'] === 'number' && value.length > schema['maxItems']) errors.push(`${where}: must list at most ${schema['maxItems']}, not ${value.length}`);
    if (isObject(schema['items'])) value.forEach((item, i) => errors.push(...valuesSchemaErrors(item, schema['items'] as Schema, root, `${at}[${i}]`)));
  }
  if (isObject(value)) {
    const properties = isObject(schema['properties']) ? schema['properties'] : {};
    for (const name of Array.isArray(schema['required']) ? schema['required'].map(String) : []) {
      if (!(name in value)) errors.push(`${at === '' ? name : `${at}.${name}`}: is required`);
    }
    for (const [name, sub] of Object.entries(value)) {
      const path = at === '' ? name : `${at}.${name}`;
      const known = properties[name];
      if (isObject(known)) errors.push(...valuesSchemaErrors(sub, known, root, path));
      else if (schema['additionalProperties'] === false) errors.push(`${path}: not a value of the chart; check the spelling (values.schema.json lists them)`);
      else if (isObject(schema['additionalProperties'])) errors.push(...valuesSchemaErrors(sub, schema['additionalProperties'], root, path));
    }
  }
  for (const sub of Array.isArray(schema['allOf']) ? schema['allOf'] : []) if (isObject(sub)) errors.push(...valuesSchemaErrors(value, sub, root, at));
  if (isObject(schema['if']) && isObject(schema['then']) && valuesSchemaErrors(value, schema['if'], root, at).length === 0) {
    errors.push(...valuesSchemaErrors(value, schema['then'], root, at));
  }
  return errors;
}

/** The chart's values.schema.json; a string says why it cannot be used for the check. */
export async function readValuesSchema(chartDir: string): Promise<Schema | string> {
  const file = path.join(chartDir, 'values.schema.json');
  let schema: unknown;
  try {
    schema = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    return `${file}: ${(error as Error).message}`;
  }
  if (!isObject(schema)) return `${file}: not a JSON object`;
  const unknown = schemaKeywordProblem(schema);
  return unknown === undefined ? schema : `${file}: ${unknown} is not understood by the registration's check; extend src/registration/values-schema.ts`;
}
