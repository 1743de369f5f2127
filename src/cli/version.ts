// The version printed by `gardener-acl version`: package.json's, found by walking up from this
// module (src/cli under tsx, dist/src/cli in the image).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const packageJson = z.object({ name: z.literal('gardener-acl'), version: z.string() });

export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const parsed = packageJson.safeParse(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')));
      if (parsed.success) return parsed.data.version;
    } catch {
      // not here; look further up
    }
    const parent = dirname(dir);
    if (parent === dir) return 'unknown';
    dir = parent;
  }
}
