// Writes every file rendered from code (scripts/generated-files.ts lists them);
// with --check, writes nothing and exits 1 naming each file that differs from what it renders.
import { readFileSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATE_COMMAND, GENERATED_FILES } from './generated-files.js';

const check = process.argv.includes('--check');
let stale = 0;
for (const { file, render } of GENERATED_FILES) {
  const target = fileURLToPath(new URL(`../${file}`, import.meta.url));
  const current = existsSync(target) ? readFileSync(target, 'utf8') : '';
  const rendered = await render(current);
  if (rendered === current) continue;
  if (check) {
    console.error(`${file}: differs from what the code renders; run ${GENERATE_COMMAND}`);
    stale++;
    continue;
  }
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, rendered);
  console.log(`wrote ${file}`);
}
process.exitCode = stale > 0 ? 1 : 0;
