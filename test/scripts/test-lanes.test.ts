// The fast lane (`npm test`) is read from the imports: a test that reaches a real component's
// harness or starts a process is not in it, whatever directory it sits in.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REAL_COMPONENT_HARNESSES, fastLaneTestFiles } from '../../scripts/test-lanes.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('the fast lane', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'lanes-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  };
  write('test/envoy/envoy-binary.ts', "export const ENVOY = 'envoy';\n");
  write('test/support/helper.ts', "import { ENVOY } from '../envoy/envoy-binary.js';\nexport const x = ENVOY;\n");
  write('test/a/pure.test.ts', "import { x } from '../support/pure.js';\n");
  write('test/support/pure.ts', 'export const x = 1;\n');
  write('test/a/through-helper.test.ts', "// '../envoy/envoy-binary.js' named in a comment is no import\nimport { x } from '../support/helper.js';\n");
  write('test/b/spawns.test.ts', "import { spawn } from 'node:child_process';\n");
  write('test/b/cycle-a.test.ts', "import './cycle-b.js';\n");
  write('test/b/cycle-b.ts', "import './cycle-a.test.js';\n");

  it('holds the tests that reach no harness and start no process, and only those', () => {
    expect(fastLaneTestFiles(dir)).toEqual(['test/a/pure.test.ts', 'test/b/cycle-a.test.ts']);
  });

  it('in this repository: no test in it reaches a harness of a real component', () => {
    const fast = fastLaneTestFiles(ROOT);
    expect(fast.length).toBeGreaterThan(0);
    for (const harness of REAL_COMPONENT_HARNESSES) expect(fast).not.toContain(harness);
    expect(fast).not.toContain('test/envoy/conformance.test.ts');
    expect(fast).not.toContain('test/cli/compiled-cli.test.ts');
    expect(fast).toContain('test/rbac/semantics.property.test.ts');
  });
});
