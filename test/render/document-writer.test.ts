// Issue 34 item 9: YAML and JSON go through one streaming writer, which gathers documents into
// chunks, waits for a full sink, and writes the bytes one JSON List or one multi-document YAML of
// all documents would be.
import { describe, expect, it } from 'vitest';
import { writeDocuments, type OutputFormat } from '../../src/render/document-writer.js';
import { renderSeedStream } from '../../src/render/seed-render.js';
import { toYamlDocuments } from '../../src/kube/yaml-documents.js';
import { generatedSeedObjects } from '../support/generated-seed.js';

async function written(documents: readonly unknown[], format: OutputFormat, full = (_writes: number) => false) {
  const writes: string[] = [];
  let waits = 0;
  let pendingWait = false;
  const counts: { documents: number; bytes: number }[] = [];
  const result = await writeDocuments(
    documents,
    format,
    {
      write: (text) => {
        // A caller that writes again before `drained` resolved would break the sink's contract.
        expect(pendingWait).toBe(false);
        writes.push(text);
        return !full(writes.length);
      },
      drained: async () => {
        pendingWait = true;
        await new Promise((resolve) => setImmediate(resolve));
        pendingWait = false;
        waits++;
      },
    },
    (c) => counts.push(c),
  );
  return { text: writes.join(''), writes, waits, counts, result };
}

const jsonList = (items: readonly unknown[]) => `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items }, null, 2)}\n`;

describe('writeDocuments', () => {
  it('writes no documents as an empty YAML stream and an empty JSON List', async () => {
    expect((await written([], 'yaml')).text).toBe('');
    expect((await written([], 'json')).text).toBe(jsonList([]));
  });

  it('writes a seed of many objects in pieces of up to 64 KiB, byte for byte the whole YAML and JSON, waiting when the sink is full', async () => {
    const documents = [...renderSeedStream(generatedSeedObjects(40, 50)).documents()];
    for (const format of ['yaml', 'json'] as const) {
      const { text, writes, waits, counts, result } = await written(documents, format, (n) => n % 3 === 0);
      expect(text).toBe(format === 'yaml' ? toYamlDocuments(documents) : jsonList(documents));
      // Gathered (far fewer writes than objects), and cut (no write over 64 KiB, so no large string).
      expect(writes.length).toBeGreaterThan(3);
      expect(writes.length).toBeLessThan(documents.length);
      expect(Math.max(...writes.map((w) => Buffer.byteLength(w)))).toBe(64 * 1024);
      expect(waits).toBe(Math.floor(writes.length / 3));
      expect(counts.map((c) => c.documents)).toEqual(documents.map((_, i) => i + 1));
      expect(result).toEqual({ documents: documents.length, bytes: Buffer.byteLength(text) });
    }
  });

  it('counts UTF-8 bytes, not characters, and never cuts a character between two writes', async () => {
    // Over 64 KiB of text made of 2-, 3- and 4-byte characters, so that a cut falls inside some.
    const documents = Array.from({ length: 3 }, (_, i) => ({ kind: 'Note', text: `${'ü漢🚀'.repeat(4000 + i)}` }));
    for (const format of ['yaml', 'json'] as const) {
      const { text, writes, result } = await written(documents, format);
      expect(writes.length).toBeGreaterThan(1);
      expect(writes.some((w) => w.includes('\ufffd'))).toBe(false);
      expect(text).toBe(format === 'yaml' ? toYamlDocuments(documents) : jsonList(documents));
      expect(Buffer.byteLength(text)).toBeGreaterThan(text.length);
      expect(result.bytes).toBe(Buffer.byteLength(text));
    }
  });
});
