// Every relative link of the README and docs/ leads somewhere: the file exists and, with an anchor,
// the file has a heading of that anchor (GitHub's slugs: lower case, punctuation dropped, spaces to
// dashes). Code comments and docs cite each other by these links, so a moved heading fails here.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return markdownFiles(full);
    return entry.name.endsWith('.md') ? [full] : [];
  });
}

function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of text.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const base = slug(match[1] ?? '');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

describe('links in the README and docs/', () => {
  const files = [path.join(ROOT, 'README.md'), ...markdownFiles(path.join(ROOT, 'docs'))];

  it('every relative link names a file that exists, and an anchor that one of its headings has', () => {
    const broken: string[] = [];
    for (const file of files) {
      const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] ?? '';
        if (/^[a-z]+:/i.test(target)) continue;
        const [filePart, anchor] = target.split('#') as [string, string | undefined];
        const resolved = filePart === '' ? file : path.resolve(path.dirname(file), filePart);
        const where = `${path.relative(ROOT, file)}: ${target}`;
        if (!existsSync(resolved)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor !== undefined && statSync(resolved).isFile() && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) broken.push(`${where} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
