// Issue 34 item 9: `render -o json` writes each List item piece by piece (writeJsonListItem), which
// must give byte for byte what JSON.stringify gave (indented by 2, each line moved 4 to the right),
// on the rendered objects and on arbitrary values.
import fc from 'fast-check';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { writeJsonListItem } from '../../src/render/json-documents.js';
import { renderSeedStream } from '../../src/render/seed-render.js';
import { TextBuffer } from '../../src/kube/text-buffer.js';
import { generatedSeedObjects } from '../support/generated-seed.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const reference = (value: unknown) => JSON.stringify(value, null, 2).replace(/\n/g, '\n    ');

function written(value: unknown): string {
  const text = new TextBuffer(16);
  text.write('before');
  writeJsonListItem(value, text);
  return text.text().slice('before'.length);
}

describe('writeJsonListItem', () => {
  it('writes every object of the example seed and of a generated seed as JSON.stringify does', async () => {
    const { objects } = await loadDocuments([path.join(ROOT, 'examples/seed')]);
    for (const documents of [[...renderSeedStream(objects).documents()], [...renderSeedStream(generatedSeedObjects(40, 50)).documents()]]) {
      for (const document of documents) expect(written(document)).toBe(reference(document));
    }
  });

  it('writes what JSON.stringify writes for escapes, numbers, skipped values and objects it does not know', () => {
    class Point {
      constructor(readonly x: number) {}
    }
    const values: unknown[] = [
      { s: ['', '"', '\\', '\n', '\t', '\u0000', '\u001f', '\u007f', '\u2028', '\ud800', 'x\udc00', '🚀', 'ü', '</script>'] },
      { '"key"': 1, 'k\ney': 2, '': 3, '🚀': 4 },
      { n: [0, -0, 1.5, 1e21, 1e-7, -1, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY], b: [true, false], z: null },
      { a: undefined, f: () => 1, y: Symbol('s'), kept: 1 },
      [undefined, () => 1, Symbol('s')],
      {}, [], { a: {} }, { a: [] }, [[]], [{}], { a: { b: undefined } },
      Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 }),
      { d: new Date(0) }, { p: new Point(1) }, { j: { toJSON: () => 'x' } }, { m: new Map([['a', 1]]) }, { boxed: Object('s') as unknown },
    ];
    for (const value of values) expect(written(value)).toBe(reference(value));
  });

  it('matches JSON.stringify on arbitrary JSON values', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), fc.object({ maxDepth: 3, withNullPrototype: true }), (json, object) => {
        expect(written(json)).toBe(reference(json));
        expect(written(object)).toBe(reference(object));
      }),
      { numRuns: 1000 },
    );
  });
});
