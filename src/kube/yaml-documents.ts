import { Document, stringify } from 'yaml';
import { emitOrFallback, NotHandledHere, TextBuffer } from './text-buffer.js';

/**
 * No anchors or aliases: the generator shares sub-objects between patches, and a reader (or
 * kubectl diff) should see every object spelled out. No folding: a long CIDR list or Lua line
 * stays on one line.
 */
const YAML_OPTIONS = { lineWidth: 0, aliasDuplicateObjects: false } as const;

/** Multi-document YAML of `items`, through the `yaml` library: the reference yamlDocument must match byte for byte. */
export function toYamlDocuments(items: readonly unknown[]): string {
  return items.map((item) => stringify(item, YAML_OPTIONS)).join('---\n');
}

/**
 * One YAML document (with its final newline), byte for byte what toYamlDocuments([value]) gives,
 * about ten times faster and with a fraction of its garbage: the library builds a node tree of the
 * whole object first, which for the 400 KiB bucket objects was most of a render's time and of the
 * garbage it made while writing. Maps, sequences, numbers, booleans, null and one-line strings are written here by the
 * library's rules (yaml 2.9, options above): block style, sequences indented under their key, empty
 * collections as {} and [], a string plain unless those rules quote it, then quoted as they quote.
 * A string over several lines (a block scalar: the Lua code) or starting with a document marker is
 * written by the library itself, in a document that puts it at the same place, and remembered. A
 * value outside JSON (undefined in a list, a Date, a Map, a class instance, toJSON) sends the whole
 * document through the library. test/render/yaml-document.test.ts holds the two to the same bytes.
 */
export function yamlDocument(value: unknown): string {
  const text = new TextBuffer();
  writeYamlDocument(value, text);
  return text.text();
}

/** yamlDocument, appended to `text`. */
export function writeYamlDocument(value: unknown, text: TextBuffer): void {
  const keys = isPlainObject(value) ? Object.keys(value) : undefined;
  if (!keys && !isPlainArray(value)) {
    text.write(stringify(value, YAML_OPTIONS));
    return;
  }
  emitOrFallback(
    text,
    () => {
      out = text;
      try {
        if (isEmpty(value as object, keys)) text.write(Array.isArray(value) ? '[]' : '{}');
        else writeCollection(value as object, keys, 0);
        text.write('\n');
      } finally {
        out = undefined;
      }
    },
    () => stringify(value, YAML_OPTIONS),
  );
}

/** Deeper than any object the generator writes; also ends a cycle (the library would overflow its stack on one). */
const MAX_DEPTH = 200;

/** Where the document being written goes (writeYamlDocument runs to its end without yielding, so one at a time). */
let out: TextBuffer | undefined;

function put(piece: string): void {
  out?.write(piece);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}

function isPlainArray(value: unknown): value is unknown[] {
  return Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype;
}

function isEmpty(value: object, keys: readonly string[] | undefined): boolean {
  if (!keys) return (value as unknown[]).length === 0;
  // The library leaves out undefined values; a map of nothing else is written as {}.
  for (const key of keys) if ((value as Record<string, unknown>)[key] !== undefined) return false;
  return true;
}

const indents: string[] = [];
function indent(depth: number): string {
  return (indents[depth] ??= '  '.repeat(depth));
}

/** A non-empty map (with its keys) or sequence at `depth` (indentation 2*depth) as the library writes it in block style, without a final newline. */
function writeCollection(value: object, keys: readonly string[] | undefined, depth: number): void {
  if (depth > MAX_DEPTH) throw new NotHandledHere();
  let first = true;
  if (!keys) {
    for (const item of value as unknown[]) {
      if (!first) newline(depth);
      first = false;
      put('- ');
      writeNode(item, depth + 1, false);
    }
    return;
  }
  for (const key of keys) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined) continue;
    if (!first) newline(depth);
    first = false;
    writeKey(key, depth);
    writeNode(item, depth + 1, true);
  }
}

/**
 * A map value (`afterKey`: what follows the key's colon, a scalar or an empty collection after a
 * space, any other collection on the next line) or a sequence item (what follows "- ") whose node
 * is at `depth`.
 */
function writeNode(value: unknown, depth: number, afterKey: boolean): void {
  if (typeof value === 'object' && value !== null) {
    const keys = isPlainObject(value) ? Object.keys(value) : undefined;
    if (!keys && !isPlainArray(value)) throw new NotHandledHere();
    if (isEmpty(value, keys)) put(afterKey ? (keys ? ' {}' : ' []') : keys ? '{}' : '[]');
    else {
      if (afterKey) newline(depth);
      writeCollection(value, keys, depth);
    }
    return;
  }
  if (typeof value === 'string' && !singleLine(value)) {
    put(libraryScalar(value, depth, afterKey ? 'value' : 'item'));
    return;
  }
  if (afterKey) put(' ');
  put(scalar(value));
}

function newline(depth: number): void {
  put('\n');
  put(indent(depth));
}

function scalar(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return plainAsIs(value) ? value : quoted(value);
    case 'number':
      if (Number.isNaN(value)) return '.nan';
      if (!Number.isFinite(value)) return value < 0 ? '-.inf' : '.inf';
      return Object.is(value, -0) ? '-0' : JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      if (value === null) return 'null';
      throw new NotHandledHere();
  }
}

function writeKey(key: string, depth: number): void {
  const text = singleLine(key) ? (plainAsIs(key) ? key : quoted(key)) : undefined;
  // The library writes a longer key as an explicit one ("? key"), written differently.
  if (text === undefined || text.length > 1024) {
    const library = libraryScalar(key, depth, 'key');
    if (library.startsWith('?')) throw new NotHandledHere();
    put(library);
    return;
  }
  put(text);
  put(':');
}

// The library's rules for a string it writes plain (stringifyString's plainString, yaml 2.9): no
// indicator first, no ': ', ' #', no leading or trailing blank, no line break or control character,
// no document marker, and nothing the core schema would read as null, a boolean or a number.
const NOT_PLAIN = /^[\n\t ,[\]{}#&*!|>'"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]$/;
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const FORCED_QUOTES = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u{D800}-\u{DFFF}]/u;
const DOCUMENT_MARKER = /^(%|---|\.\.\.)/m;
/** Only strings starting so can match one of the core schema's null, boolean or number tests. */
const MAYBE_OTHER_TYPE = /^[-+.0-9~nNtTfF]/;
const otherTypeTests: readonly RegExp[] = new Document(null).schema.tags.flatMap((tag) =>
  tag.default === true && tag.tag !== 'tag:yaml.org,2002:str' && 'test' in tag && tag.test instanceof RegExp ? [tag.test] : [],
);

/**
 * A string written the same wherever it is: on one line, and not starting with a document marker
 * (the library writes "---x" plain as a value but quoted as a key of the root map).
 */
function singleLine(text: string): boolean {
  return !text.includes('\n') && !DOCUMENT_MARKER.test(text);
}

/** For a singleLine string: whether the library writes it plain. */
function plainAsIs(text: string): boolean {
  if (text === '' || NOT_PLAIN.test(text) || FORCED_QUOTES.test(text)) return false;
  return !MAYBE_OTHER_TYPE.test(text) || !otherTypeTests.some((test) => test.test(text));
}

/**
 * For a singleLine string the library does not write plain: its quoted form (quotedString):
 * single quotes for a string with double quotes and no single quote (and no character that needs
 * an escape), else double quotes with YAML's escapes for what JSON escapes as \u.
 */
function quoted(text: string): string {
  if (!FORCED_QUOTES.test(text) && text.includes('"') && !text.includes("'")) return `'${text}'`;
  return JSON.stringify(text).replace(JSON_ESCAPE, (escape: string, code: string | undefined) => (code === undefined ? escape : (YAML_ESCAPES[code] ?? (code.startsWith('00') ? `\\x${code.slice(2)}` : escape))));
}

const JSON_ESCAPE = /\\(?:u([0-9a-f]{4})|.)/g;
const YAML_ESCAPES: Readonly<Record<string, string>> = { '0000': '\\0', '0007': '\\a', '000b': '\\v', '001b': '\\e', '0085': '\\N', '00a0': '\\_', '2028': '\\L', '2029': '\\P' };

/** Few distinct strings take this way (the Lua code of the hop, per gateway); bounded all the same. */
const libraryScalars = new Map<string, string>();
const LIBRARY_SCALARS_KEPT = 4096;

/**
 * What the library writes for `text` at this place: it is stringified in a document of nested
 * maps that puts it at the same indentation in the same role (quoting, block scalars and their
 * indentation depend on nothing else), and the part after the surrounding text is kept.
 */
function libraryScalar(text: string, depth: number, place: 'value' | 'item' | 'key'): string {
  const cacheKey = `${place}${depth}\0${text}`;
  const cached = libraryScalars.get(cacheKey);
  if (cached !== undefined) return cached;
  let result: string;
  if (place === 'key') {
    // The key of a map at `depth`: its pair's text up to the space before the value.
    const printed = stringify(nest(depth, { [text]: 0 }), YAML_OPTIONS);
    result = printed.slice(nestPrefix(depth).length, -' 0\n'.length);
  } else if (place === 'value') {
    // The value of a pair in a map at depth - 1: everything after "a:" (the space included).
    const printed = stringify(nest(depth - 1, { a: text }), YAML_OPTIONS);
    result = printed.slice(nestPrefix(depth - 1).length + 'a:'.length, -1);
  } else {
    // An item of a sequence at depth - 1: one at the root, else the value of a pair in a map at depth - 2.
    const printed = stringify(depth === 1 ? [text] : nest(depth - 2, { a: [text] }), YAML_OPTIONS);
    const before = depth === 1 ? '- ' : `${nestPrefix(depth - 2)}a:\n${indent(depth - 1)}- `;
    result = printed.slice(before.length, -1);
  }
  if (libraryScalars.size >= LIBRARY_SCALARS_KEPT) libraryScalars.clear();
  libraryScalars.set(cacheKey, result);
  return result;
}

/** `inner` as the value of `depth` nested maps {a: {a: ...}}, so that it is a map at `depth`. */
function nest(depth: number, inner: object): object {
  let value = inner;
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

/** The text before the innermost map of nest(depth, ...). */
function nestPrefix(depth: number): string {
  let prefix = '';
  for (let i = 0; i < depth; i++) prefix += `${indent(i)}a:\n`;
  return prefix + indent(depth);
}
