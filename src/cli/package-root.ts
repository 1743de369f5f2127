// Files shipped with the package, found from the module that asks: it runs from src/cli under tsx,
// from dist/src/cli of a build, and from /app/dist/src/cli in the image (whose examples are in
// /app/dist/examples), so no fixed relative path fits all three.
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const PACKAGE_NAME = 'gardener-acl';
const packageJson = z.object({ name: z.literal(PACKAGE_NAME) });

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The nearest directory at or above `start` whose package.json is gardener-acl's; undefined outside the package. */
export function packageRoot(start = HERE): string | undefined {
  for (let dir = path.resolve(start); ; dir = path.dirname(dir)) {
    if (isPackageRoot(dir)) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

function isPackageRoot(dir: string): boolean {
  try {
    return packageJson.safeParse(JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'))).success;
  } catch {
    // no package.json here, or not JSON: not the root
    return false;
  }
}

/**
 * The example seed `render`, `explain` and `verify` read when no PATH is given: the nearest
 * examples/seed directory from `start` up to the package root (the image keeps it in dist/, a
 * checkout or an npm install at the root). When there is none, the root's examples/seed is
 * returned all the same, so that the "cannot read" error names where it was looked for; outside
 * the package (no package.json of gardener-acl above), examples/ beside src/ as before.
 */
export function embeddedExampleSeed(start = HERE): string {
  const root = packageRoot(start);
  if (root === undefined) return path.resolve(start, '..', '..', 'examples', 'seed');
  for (let dir = path.resolve(start); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'examples', 'seed');
    if (statSync(candidate, { throwIfNoEntry: false })?.isDirectory() === true || dir === root) return candidate;
  }
}
