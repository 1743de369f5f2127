// Issue 34 item 9: `render` writes YAML through its own emitter (yamlDocument), which must give
// byte for byte what the `yaml` library gives (toYamlDocuments, the output before the change):
// on every object rendered for the example seed, the golden seeds and a generated seed, on
// strings that need quoting or block scalars in every place a string can stand, and on
// arbitrary JSON-like values.
import fc from 'fast-check';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { renderSeedStream } from '../../src/render/seed-render.js';
import { toYamlDocuments, yamlDocument } from '../../src/kube/yaml-documents.js';
import { generatedSeedObjects } from '../support/generated-seed.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The library's text for one document. */
const reference = (value: unknown) => toYamlDocuments([value]);

function expectSameAsLibrary(values: readonly unknown[]): void {
  for (const value of values) expect(yamlDocument(value)).toBe(reference(value));
}

const TRICKY_STRINGS = [
  '*', '*.example.com', ':', 'a:', 'a: b', 'a:b', '2001:db8::', '::', '::/0', '10.0.0.0/8', 'http://x:80/y',
  '-', '- a', '-a', '--', '?', '? a', '?a', '---', '---x', '--- x', '...', '... x', '%', '%x', '@type', '`x', '!x', '&x', '|', '>', '|x',
  '#', '#x', 'a #b', 'a#b', '[a]', '{a}', 'a,b', ',', "'", '"', "'x'", '"x"', `both ' and "`, `it's`, 'say "hi"',
  'yes', 'no', 'on', 'off', 'y', 'n', 'Yes', 'NO', 'true', 'True', 'TRUE', 'tRUE', 'false', 'null', 'Null', 'NULL', 'nULL', '~', '',
  '0', '123', '-1', '+1', '0o17', '0o8', '0x1F', '0xG', '1e3', '1E-3', '.5', '5.', '-1.5', '+.5e+3', '.inf', '-.Inf', '.nan', '.NaN', '1_000', '1:20', '12:30:45', '0123',
  ' ', '  ', ' lead', 'trail ', 'tab\there', '\t', 'a\tb', 'ends\t',
  'multi\nline', 'multi\nline\n', 'multi\nline\n\n', '\nleading', '\n', '\n\n', '  indented\nlines', 'a\n  b', 'trailing space \nx', 'x\n ', '---\nx', 'x\n---', 'x\n...\ny', '%x\ny',
  'a long line '.repeat(20) + '\nand a second',
  'cr\rhere', 'crlf\r\nhere', 'unicode ü 漢字 🚀', 'é', '\u00a0', '\u0085', '\u2028', '\u2029', '\u0000', '\u0007', '\u000b', '\u001b', '\u007f', '\u009f', '\ud800', 'x\udc00', 'a\u0000\nb',
  'backslash \\ here', '\\u0041', '\\', 'quote"and\\slash',
  'x'.repeat(1100),
];

/** A string in every place: map value and key at several depths, sequence item at several depths, root sequence. */
function everyPlace(text: string): unknown[] {
  return [
    { k: text },
    { [text]: 1 },
    { [text]: { [text]: [text] } },
    { a: { b: { c: text, [text]: null } } },
    [text],
    [[text]],
    [{ k: text }],
    { list: [text, [text, { k: [text] }]] },
    { a: { list: [text] } },
    { [text]: [] , x: { [text]: {} } },
  ];
}

describe('yamlDocument, the render YAML emitter', () => {
  it('writes every object of the example seed and the golden seeds as the yaml library does', async () => {
    for (const input of ['examples/seed', 'test/golden/gardener-1.110/input', 'test/golden/gardener-1.145/input']) {
      const { objects } = await loadDocuments([path.join(ROOT, input)]);
      const documents = [...renderSeedStream(objects).documents()];
      expect(documents.length).toBeGreaterThan(0);
      expectSameAsLibrary(documents);
    }
  });

  it('writes every object of a generated seed (40 shoots x 50 CIDRs on three gateways) as the yaml library does', () => {
    const documents = [...renderSeedStream(generatedSeedObjects(40, 50)).documents()];
    expect(documents.some((d) => d.metadata.name.startsWith('acl-connect-ecds-'))).toBe(true);
    expectSameAsLibrary(documents);
  });

  it('quotes and blocks strings as the library does, in every place a string can stand', () => {
    for (const text of TRICKY_STRINGS) {
      for (const value of everyPlace(text)) expect({ text, yaml: yamlDocument(value) }).toEqual({ text, yaml: reference(value) });
    }
  });

  it('writes numbers, booleans, null, empty collections and leftover cases as the library does', () => {
    class Point {
      constructor(readonly x: number) {}
    }
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    expectSameAsLibrary([
      { n: [0, -0, 1, -1, 1.5, 1e21, 1e-7, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY], b: [true, false], z: null },
      {}, [], { a: {} }, { a: [] }, [[]], [{}], [[], {}], { a: undefined }, { a: { b: undefined } }, { a: undefined, b: 1 },
      [[1, [2, [3]]], { a: [{ b: [{ c: 1 }] }] }],
      nullProto,
      // Through the library as a whole: undefined in a list, a Date, a Map, a class instance, toJSON.
      [1, undefined, 2], { d: new Date(0) }, { m: new Map([['a', 1]]) }, { p: new Point(1) }, { j: { toJSON: () => 'x' } }, { s: new Set([1]) },
    ]);
  });

  it('matches the library on arbitrary JSON-like values', () => {
    const tricky = fc.constantFrom(...TRICKY_STRINGS);
    const text = fc.oneof(tricky, fc.string({ unit: 'binary', maxLength: 12 }), fc.string({ unit: fc.constantFrom('a', ' ', ':', '-', '#', '\n', "'", '"', '\t', '.', '0', '*'), maxLength: 8 }));
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, text, fc.double(), fc.integer(), fc.boolean(), fc.constant(null), tie('list'), tie('map')),
      list: fc.array(tie('value'), { maxLength: 4 }),
      map: fc.dictionary(text, tie('value'), { maxKeys: 4 }),
    }));
    fc.assert(
      fc.property(fc.oneof(fc.array(value, { maxLength: 4 }), fc.dictionary(text, value, { maxKeys: 5 })), (doc) => {
        expect(yamlDocument(doc)).toBe(reference(doc));
      }),
      { numRuns: 2000 },
    );
  });
});
