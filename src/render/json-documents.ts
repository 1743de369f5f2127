import { emitOrFallback, NotHandledHere, type TextBuffer } from '../kube/text-buffer.js';

/**
 * A document as an item of a JSON List indented by 2 (the item's lines indented by 4, its first
 * line's indentation left to the caller), appended to `text`: byte for byte
 * JSON.stringify(document, null, 2) with every line break followed by four spaces, as the List was
 * written before, but piece by piece into the buffer instead of as two strings of the whole object
 * (the largest objects are hundreds of KiB as indented JSON). Plain objects, arrays, strings,
 * numbers, booleans and null are written here by JSON.stringify's rules; anything else (toJSON, a
 * Date, a Map, a boxed value, a class instance) sends the document through JSON.stringify.
 */
export function writeJsonListItem(document: unknown, text: TextBuffer): void {
  emitOrFallback(
    text,
    () => {
      out = text;
      try {
        writeValue(document, ITEM_DEPTH);
      } finally {
        out = undefined;
      }
    },
    () => JSON.stringify(document, null, 2).replace(/\n/g, '\n    '),
  );
}

/** The List's items are two levels in: {"items": [ ... ]}. */
const ITEM_DEPTH = 2;
const MAX_DEPTH = 200;

/** Where the document being written goes (writeJsonListItem runs to its end without yielding, so one at a time). */
let out: TextBuffer | undefined;

function put(piece: string): void {
  out?.write(piece);
}

const indents: string[] = [];
function indent(depth: number): string {
  return (indents[depth] ??= '  '.repeat(depth));
}

/** What JSON.stringify leaves out of an object and writes as null in an array. */
function isSkipped(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

// Characters JSON.stringify escapes: quote, backslash, control characters, lone surrogates.
// eslint-disable-next-line no-control-regex -- control characters are among what it finds
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

function writeString(value: string): void {
  if (NEEDS_ESCAPE.test(value)) {
    put(JSON.stringify(value));
    return;
  }
  put('"');
  put(value);
  put('"');
}

function writeValue(value: unknown, depth: number): void {
  switch (typeof value) {
    case 'string':
      writeString(value);
      return;
    case 'number':
      put(Number.isFinite(value) ? JSON.stringify(value) : 'null');
      return;
    case 'boolean':
      put(value ? 'true' : 'false');
      return;
    case 'object':
      break;
    default:
      throw new NotHandledHere();
  }
  if (value === null) {
    put('null');
    return;
  }
  if (depth > MAX_DEPTH) throw new NotHandledHere();
  const proto: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value) && proto === Array.prototype) {
    if (value.length === 0) {
      put('[]');
      return;
    }
    put('[');
    for (let i = 0; i < value.length; i++) {
      put(i === 0 ? '\n' : ',\n');
      put(indent(depth + 1));
      const item: unknown = value[i];
      if (isSkipped(item)) put('null');
      else writeValue(item, depth + 1);
    }
    put('\n');
    put(indent(depth));
    put(']');
    return;
  }
  if ((proto !== Object.prototype && proto !== null) || typeof (value as { toJSON?: unknown }).toJSON === 'function') throw new NotHandledHere();
  const record = value as Record<string, unknown>;
  let first = true;
  for (const key of Object.keys(record)) {
    const item = record[key];
    if (isSkipped(item)) continue;
    put(first ? '{\n' : ',\n');
    first = false;
    put(indent(depth + 1));
    writeString(key);
    put(': ');
    writeValue(item, depth + 1);
  }
  if (first) {
    put('{}');
    return;
  }
  put('\n');
  put(indent(depth));
  put('}');
}
