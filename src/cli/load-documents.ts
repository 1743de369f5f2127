import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { SourcedObject } from '../gardener/inventory.js';
import type { Problem } from '../gardener/problems.js';

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

async function listFiles(target: string): Promise<string[]> {
  const info = await stat(target);
  if (!info.isDirectory()) return [target];
  const entries = await readdir(target, { withFileTypes: true });
  const nested = await Promise.all(
    entries
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .filter((e) => e.isDirectory() || EXTENSIONS.has(path.extname(e.name)))
      .map((e) => listFiles(path.join(target, e.name))),
  );
  return nested.flat();
}

function isList(value: unknown): value is { items: unknown[] } {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'List' && Array.isArray((value as { items?: unknown }).items);
}

/**
 * Reads YAML/JSON documents (multi-document files and `kind: List` included) from files or
 * directories; `-` is stdin where the command can read it.
 */
export async function loadDocuments(targets: readonly string[], options: { readonly readStdin?: (() => Promise<string>) | undefined } = {}): Promise<{ objects: SourcedObject[]; problems: Problem[] }> {
  const objects: SourcedObject[] = [];
  const problems: Problem[] = [];
  const parse = (text: string, file: string) => {
    parseAllDocuments(text, { prettyErrors: true }).forEach((doc, index) => {
      const source = `${file} (document ${index + 1})`;
      if (doc.errors.length > 0) {
        problems.push({ severity: 'error', object: source, message: `invalid YAML: ${doc.errors[0]?.message ?? 'parse error'}` });
        return;
      }
      const value: unknown = doc.toJS({ maxAliasCount: 100 });
      if (value === null || value === undefined) return;
      if (isList(value)) value.items.forEach((item, i) => objects.push({ object: item, source: `${source} item ${i}` }));
      else objects.push({ object: value, source });
    });
  };
  for (const target of targets) {
    if (target === '-' && options.readStdin) {
      parse(await options.readStdin(), 'stdin');
      continue;
    }
    let files: string[];
    try {
      files = await listFiles(target);
    } catch (error) {
      problems.push({ severity: 'error', object: target, message: `cannot read: ${(error as NodeJS.ErrnoException).code ?? String(error)}` });
      continue;
    }
    for (const file of files) parse(await readFile(file, 'utf8'), file);
  }
  return { objects, problems };
}
