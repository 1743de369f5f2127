// Golden files: what `gardener-acl render` prints for seeds of each Gardener era. Review every
// change to expected.yaml by hand; regenerate with UPDATE_GOLDEN=1.
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { renderSeed } from '../../src/render/seed-render.js';
import { toYamlDocuments } from '../../src/kube/yaml-documents.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCENARIOS = [
  { name: 'examples-seed', input: path.join(ROOT, 'examples/seed') },
  { name: 'gardener-1.110', input: path.join(ROOT, 'test/golden/gardener-1.110/input') },
  { name: 'gardener-1.145', input: path.join(ROOT, 'test/golden/gardener-1.145/input') },
  { name: 'gardener-1.149', input: path.join(ROOT, 'test/golden/gardener-1.149/input') },
];

describe('golden render output', () => {
  it.each(SCENARIOS)('$name', async ({ name, input }) => {
    const { objects, problems } = await loadDocuments([input]);
    expect(problems).toEqual([]);
    const result = renderSeed(objects);
    expect(result.problems.filter((p) => p.severity === 'error')).toEqual([]);
    const text = toYamlDocuments([...result.envoyFilters, ...result.patches]);
    const file = path.join(ROOT, 'test/golden', name, 'expected.yaml');
    if (process.env.UPDATE_GOLDEN) await writeFile(file, text);
    expect(text).toBe(await readFile(file, 'utf8'));
  });
});
