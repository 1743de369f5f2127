// A JSON Schema (draft-07) validator for exactly the keywords the published providerConfig schema
// uses, so the test needs no validator dependency. Any other keyword throws: a keyword it skipped
// would let the test pass while an editor refuses (or admits) something else.

export interface SchemaViolation {
  /** JSON pointer of the offending value, e.g. `/rule/cidrs/0`. */
  readonly path: string;
  readonly message: string;
}

/** Keywords that only inform (editors show or use them); they never change the verdict. */
const ANNOTATIONS = new Set(['$schema', '$id', 'title', 'description', 'default', 'deprecationMessage', 'patternErrorMessage']);
const ASSERTIONS = new Set(['type', 'enum', 'pattern', 'anyOf', 'minItems', 'items', 'required', 'properties', 'additionalProperties']);

type Schema = boolean | Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function typeMatches(type: string, value: unknown): boolean {
  switch (type) {
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      throw new Error(`unknown type ${JSON.stringify(type)}`);
  }
}

/** Structural equality of JSON values, as `enum` compares. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

const compiled = new Map<string, RegExp>();
/** JSON Schema patterns are ECMA-262 and unanchored; `u` because the spec asks for Unicode semantics. */
function patternOf(source: string): RegExp {
  let re = compiled.get(source);
  if (!re) {
    re = new RegExp(source, 'u');
    compiled.set(source, re);
  }
  return re;
}

/** Walks the whole schema, not only the parts a value reaches, so an unknown keyword fails every check. */
function assertKnownKeywords(schema: unknown, schemaPath: string): void {
  if (typeof schema === 'boolean') return;
  if (!isObject(schema)) throw new Error(`${schemaPath}: a schema must be an object or a boolean`);
  for (const key of Object.keys(schema)) {
    if (!ANNOTATIONS.has(key) && !ASSERTIONS.has(key)) throw new Error(`${schemaPath}: keyword ${JSON.stringify(key)} is not supported by json-schema-check; teach it what the keyword means`);
  }
  const { properties, items, additionalProperties, anyOf } = schema;
  if (properties !== undefined) {
    if (!isObject(properties)) throw new Error(`${schemaPath}/properties: must be an object`);
    for (const [name, sub] of Object.entries(properties)) assertKnownKeywords(sub, `${schemaPath}/properties/${name}`);
  }
  if (items !== undefined) {
    // Draft-07's tuple form (an array of schemas) means something else; it is not used.
    if (Array.isArray(items)) throw new Error(`${schemaPath}/items: the tuple form is not supported`);
    assertKnownKeywords(items, `${schemaPath}/items`);
  }
  if (additionalProperties !== undefined) assertKnownKeywords(additionalProperties, `${schemaPath}/additionalProperties`);
  if (anyOf !== undefined) {
    if (!Array.isArray(anyOf) || anyOf.length === 0) throw new Error(`${schemaPath}/anyOf: must be a non-empty array`);
    anyOf.forEach((sub, i) => assertKnownKeywords(sub, `${schemaPath}/anyOf/${i}`));
  }
}

function validate(schema: Schema, value: unknown, path: string, schemaPath: string, out: SchemaViolation[]): void {
  if (schema === true) return;
  if (schema === false) {
    out.push({ path, message: 'no value is allowed here' });
    return;
  }
  const type = schema['type'];
  if (type !== undefined) {
    const types = Array.isArray(type) ? (type as string[]) : [type as string];
    if (!types.some((t) => typeMatches(t, value))) {
      out.push({ path, message: `must be of type ${types.join(' or ')}` });
      return;
    }
  }
  const enumValues = schema['enum'];
  if (enumValues !== undefined) {
    if (!Array.isArray(enumValues)) throw new Error(`${schemaPath}/enum: must be an array`);
    if (!enumValues.some((e) => jsonEqual(e, value))) out.push({ path, message: `must be one of ${JSON.stringify(enumValues)}` });
  }
  const pattern = schema['pattern'];
  if (pattern !== undefined && typeof value === 'string') {
    if (typeof pattern !== 'string') throw new Error(`${schemaPath}/pattern: must be a string`);
    if (!patternOf(pattern).test(value)) out.push({ path, message: `must match the pattern ${pattern}` });
  }
  const anyOf = schema['anyOf'];
  if (anyOf !== undefined) {
    const branches = (anyOf as Schema[]).map((sub, i) => {
      const branch: SchemaViolation[] = [];
      validate(sub, value, path, `${schemaPath}/anyOf/${i}`, branch);
      return branch;
    });
    if (!branches.some((b) => b.length === 0)) out.push({ path, message: `matches no alternative: ${branches.map((b) => b.map((v) => v.message).join(', ')).join(' | ')}` });
  }
  if (Array.isArray(value)) {
    const minItems = schema['minItems'];
    if (minItems !== undefined) {
      if (typeof minItems !== 'number') throw new Error(`${schemaPath}/minItems: must be a number`);
      if (value.length < minItems) out.push({ path, message: `must have at least ${minItems} item(s)` });
    }
    const items = schema['items'];
    if (items !== undefined) {
      value.forEach((item, i) => validate(items as Schema, item, `${path}/${i}`, `${schemaPath}/items`, out));
    }
  }
  if (isObject(value)) {
    const required = schema['required'];
    if (required !== undefined) {
      if (!Array.isArray(required)) throw new Error(`${schemaPath}/required: must be an array`);
      for (const name of required as string[]) if (!Object.hasOwn(value, name)) out.push({ path, message: `must have property ${JSON.stringify(name)}` });
    }
    const properties = (schema['properties'] ?? {}) as Readonly<Record<string, Schema>>;
    const additional = schema['additionalProperties'] as Schema | undefined;
    for (const [name, child] of Object.entries(value)) {
      const childPath = `${path}/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
      if (Object.hasOwn(properties, name)) validate(properties[name] as Schema, child, childPath, `${schemaPath}/properties/${name}`, out);
      else if (additional !== undefined) validate(additional, child, childPath, `${schemaPath}/additionalProperties`, out);
    }
  }
}

const walked = new WeakSet<object>();

/** The violations of `value` against `schema`; empty when the value is valid. Throws on a keyword it does not know. */
export function checkJsonSchema(schema: unknown, value: unknown): SchemaViolation[] {
  if (!(isObject(schema) && walked.has(schema))) {
    assertKnownKeywords(schema, '#');
    if (isObject(schema)) walked.add(schema);
  }
  const out: SchemaViolation[] = [];
  validate(schema as Schema, value, '', '#', out);
  return out;
}
