// Instantiates the Gardener-shaped fixture templates under fixtures/gardener: YAML files whose
// values may be placeholders, filled the way Gardener's own charts and Go templates fill them
// (one rendering per ingress gateway, one per shoot). The YAML stays valid YAML; substitution
// happens on the parsed documents:
//
//   key: ${name}            the whole value is replaced by values[name] (any JSON: list, map, ...)
//   key: 'a-${name}.b'      string interpolation (the value must be a string or a number)
//   list: ['...${name}']    the element is replaced by the elements of values[name] (a list)
//
// A placeholder without a value is an error, so a template and its caller cannot drift apart.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { isJsonObject, type JsonObject, type JsonValue } from '../envoy/json.js';

export const FIXTURE_DIR = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'gardener');

export type TemplateValues = Readonly<Record<string, JsonValue>>;

const WHOLE = /^\$\{([A-Za-z][A-Za-z0-9]*)\}$/;
const SPREAD = /^\.\.\.\$\{([A-Za-z][A-Za-z0-9]*)\}$/;
const INLINE = /\$\{([A-Za-z][A-Za-z0-9]*)\}/g;

class Substitution {
  readonly used = new Set<string>();
  constructor(
    private readonly file: string,
    private readonly values: TemplateValues,
  ) {}

  private value(name: string): JsonValue {
    const value = this.values[name];
    if (value === undefined) throw new Error(`${this.file}: no value for placeholder \${${name}}`);
    this.used.add(name);
    return structuredClone(value);
  }

  private string(text: string): JsonValue {
    const whole = WHOLE.exec(text);
    if (whole?.[1] !== undefined) return this.value(whole[1]);
    return text.replace(INLINE, (_match, name: string) => {
      const value = this.value(name);
      if (typeof value !== 'string' && typeof value !== 'number') {
        throw new Error(`${this.file}: \${${name}} is interpolated into a string but its value is ${JSON.stringify(value)}`);
      }
      return String(value);
    });
  }

  apply(node: JsonValue): JsonValue {
    if (typeof node === 'string') return this.string(node);
    if (Array.isArray(node)) {
      return node.flatMap((element) => {
        const spread = typeof element === 'string' ? SPREAD.exec(element) : null;
        if (spread?.[1] === undefined) return [this.apply(element)];
        const value = this.value(spread[1]);
        if (!Array.isArray(value)) throw new Error(`${this.file}: '...\${${spread[1]}}' needs a list, got ${JSON.stringify(value)}`);
        return value;
      });
    }
    if (isJsonObject(node)) return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, this.apply(value)]));
    return node;
  }
}

function parseTemplate(relativePath: string): JsonValue[] {
  const path = join(FIXTURE_DIR, relativePath);
  return parseAllDocuments(readFileSync(path, 'utf8')).flatMap((document) => {
    if (document.errors.length > 0) throw new Error(`${relativePath}: ${document.errors.map((e) => e.message).join('; ')}`);
    const content: unknown = document.toJS();
    return content === null || content === undefined ? [] : [content as JsonValue];
  });
}

const cache = new Map<string, JsonValue[]>();

/** The documents of a template, placeholders filled; every value given must be used. */
export function instantiate(relativePath: string, values: TemplateValues): JsonValue[] {
  const documents = cache.get(relativePath) ?? parseTemplate(relativePath);
  cache.set(relativePath, documents);
  const substitution = new Substitution(relativePath, values);
  const result = documents.map((document) => substitution.apply(document));
  const unused = Object.keys(values).filter((name) => !substitution.used.has(name));
  if (unused.length > 0) throw new Error(`${relativePath}: values given but not used: ${unused.join(', ')}`);
  return result;
}

/** The objects of a template (every document a Kubernetes object). */
export function instantiateObjects(relativePath: string, values: TemplateValues): JsonObject[] {
  return instantiate(relativePath, values).map((document) => {
    if (!isJsonObject(document) || typeof document['kind'] !== 'string') {
      throw new Error(`${relativePath}: every document must be a Kubernetes object`);
    }
    return document;
  });
}
