// The import rule CI holds src/ to (scripts/check-imports.ts), on small trees made to break it.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkImports } from '../../scripts/check-imports.js';

const LAYERS = [['low'], ['mid', 'peer'], ['high']];
let dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs = [];
});

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'check-imports-'));
  dirs.push(dir);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

describe('the import rule of src/', () => {
  it('holds on this checkout: no cycle, no import of a folder at or above its own layer', () => {
    const { files, problems } = checkImports(path.resolve(import.meta.dirname, '../../src'));
    expect(problems).toEqual([]);
    expect(files).toBeGreaterThan(100);
  });

  it('admits imports downward and within a folder', () => {
    const dir = tree({
      'high/a.ts': "import { b } from '../mid/b.js';\nexport { c } from './c.js';\nconst lazy = () => import('../low/d.js');\n",
      'high/c.ts': "import type { D } from '../low/d.js';\n",
      'mid/b.ts': "import '../low/d.js';\nimport { z } from 'zod';\n// the owner's note: import { x } from '../high/a.js'\nconst s = \"import { y } from '../high/c.js'\";\n",
      'low/d.ts': 'export const d = 1;\n',
    });
    expect(checkImports(dir, LAYERS)).toEqual({ files: 4, imports: 5, problems: [] });
  });

  it('refuses an upward import, a same-layer import (type-only and dynamic ones too) and names the fix', () => {
    const dir = tree({
      'low/a.ts': "import { b } from '../mid/b.js';\n",
      'mid/b.ts': "import type { C } from '../peer/c.js';\n",
      'peer/c.ts': "export async function load() { return import('../high/d.js'); }\n",
      'high/d.ts': 'export const d = 1;\n',
    });
    expect(checkImports(dir, LAYERS).problems.map((p) => p.message)).toEqual([
      'src/low/a.ts imports src/mid/b.ts: mid/ is in a higher layer than low/; move what it needs down to a layer below low/ (or the importing code up)',
      'src/mid/b.ts imports src/peer/c.ts: peer/ is in the same layer as mid/; move what it needs down to a layer below mid/ (or the importing code up)',
      'src/peer/c.ts imports src/high/d.ts: high/ is in a higher layer than peer/; move what it needs down to a layer below peer/ (or the importing code up)',
    ]);
  });

  it('finds a cycle inside one folder and refuses a folder in no layer', () => {
    const dir = tree({
      'mid/a.ts': "import { b } from './b.js';\n",
      'mid/b.ts': "export { c } from './c.js';\n",
      'mid/c.ts': "import type { A } from './a.js';\n",
      'mid/self.ts': "import { x } from './self.js';\n",
      'new/e.ts': "import { b } from '../mid/b.js';\n",
    });
    expect(checkImports(dir, LAYERS).problems).toEqual([
      { kind: 'unplaced', message: 'src/new/ is in no layer of scripts/check-imports.ts; add it to SRC_LAYERS above every folder it imports' },
      { kind: 'cycle', message: 'import cycle among src/mid/a.ts, src/mid/b.ts, src/mid/c.ts; break it by moving what its files share into a module below them' },
      { kind: 'cycle', message: 'import cycle among src/mid/self.ts; break it by moving what its files share into a module below them' },
    ]);
  });
});
