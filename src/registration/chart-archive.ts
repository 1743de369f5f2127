// Packs a chart directory like `helm package` does (entries under `<chart name>/`, files
// matched by .helmignore left out), without needing Helm: the registration command must work
// on an operator's machine that has only Node.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { tarGz, type TarEntry } from './tar.js';

const chartYamlSchema = z.looseObject({
  apiVersion: z.literal('v2', { error: 'Chart.yaml: apiVersion must be v2' }),
  name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, { error: 'Chart.yaml: name must be a lower-case chart name' }),
  version: z.string().min(1, { error: 'Chart.yaml: version is required' }),
  appVersion: z.string().optional(),
});
export type ChartMetadata = z.infer<typeof chartYamlSchema>;

/** .helmignore subset: comments, `*`/`?` globs matched against the basename or the relative path, trailing `/` for directories. */
function ignoreMatcher(text: string): (relPath: string, isDir: boolean) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((pattern) => {
      const dirOnly = pattern.endsWith('/');
      const glob = dirOnly ? pattern.slice(0, -1) : pattern;
      const source = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]');
      return { regex: new RegExp(`^${source}$`), dirOnly, anchored: glob.includes('/') };
    });
  return (relPath, isDir) =>
    rules.some((r) => (!r.dirOnly || isDir) && r.regex.test(r.anchored ? relPath : path.posix.basename(relPath)));
}

async function listFiles(root: string, ignored: (rel: string, isDir: boolean) => boolean, rel = ''): Promise<string[]> {
  const entries = await readdir(path.join(root, rel), { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    const childRel = rel ? `${rel}/${entry.name}` : entry.name;
    if (ignored(childRel, entry.isDirectory())) continue;
    if (entry.isDirectory()) files.push(...(await listFiles(root, ignored, childRel)));
    else if (entry.isFile()) files.push(childRel);
  }
  return files;
}

export async function readChartMetadata(dir: string): Promise<ChartMetadata> {
  const parsed = chartYamlSchema.safeParse(parseYaml(await readFile(path.join(dir, 'Chart.yaml'), 'utf8')));
  if (!parsed.success) throw new Error(`${dir}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

/** The chart's files (relative paths) that a package contains, sorted. */
export async function chartFiles(dir: string): Promise<string[]> {
  let ignoreText = '';
  try {
    ignoreText = await readFile(path.join(dir, '.helmignore'), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  return (await listFiles(dir, ignoreMatcher(ignoreText))).sort();
}

export interface PackedChart {
  readonly metadata: ChartMetadata;
  readonly archive: Buffer;
}

export async function packChart(dir: string): Promise<PackedChart> {
  const metadata = await readChartMetadata(dir);
  const files = await chartFiles(dir);
  const entries: TarEntry[] = await Promise.all(
    files.map(async (rel) => ({ path: `${metadata.name}/${rel}`, content: await readFile(path.join(dir, rel)) })),
  );
  return { metadata, archive: tarGz(entries) };
}
