// The import graph of src/, held to its rule: no cycle between files, and a folder imports only
// folders of a lower layer (CI runs this in the lint step; issue 33). A folder that is not in the
// table is refused, so a new one is placed on purpose rather than by whatever it happens to import.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

/**
 * The layers of src/, lowest first. A folder may import its own files and any folder of a lower
 * layer; folders of one layer do not import each other (the webhook does not reach into the
 * actuator, rbac does not need kube), so each can be read and changed without the others.
 */
export const SRC_LAYERS: readonly (readonly string[])[] = [
  ['json'], // plain-data helpers
  ['acl'], // the owner's rule and the operator's settings: words, schemas, CIDRs
  ['rbac', 'kube'], // pure filter builders; the API machinery
  ['config', 'gardener', 'served', 'explain'], // settings checked against the forms; Gardener's objects; reading Envoy; explaining a verdict
  ['actuator', 'webhook', 'render', 'registration'], // the processes' work
  ['cli'], // commands
];

export interface ImportProblem {
  readonly kind: 'cycle' | 'layer' | 'unplaced';
  readonly message: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return sourceFiles(full);
      return entry.name.endsWith('.ts') ? [full] : [];
    })
    .sort();
}

/**
 * The files of `srcDir` that `file` imports, relative to `srcDir`: static imports and re-exports
 * (type-only ones too: a cycle of types is still a cycle for a reader) and import() of a literal,
 * as TypeScript's own scanner finds them (not in comments or strings).
 */
function importsOf(srcDir: string, file: string): string[] {
  const text = readFileSync(path.join(srcDir, file), 'utf8');
  const targets = new Set<string>();
  for (const { fileName: specifier } of ts.preProcessFile(text, true, true).importedFiles) {
    if (!specifier.startsWith('.')) continue;
    const resolved = path.relative(srcDir, path.resolve(path.dirname(path.join(srcDir, file)), specifier)).replace(/\.js$/, '.ts');
    targets.add(resolved.split(path.sep).join('/'));
  }
  return [...targets].sort();
}

function folderOf(file: string): string {
  const slash = file.indexOf('/');
  return slash < 0 ? '.' : file.slice(0, slash);
}

/** Strongly connected components of more than one file (or a file importing itself), each sorted. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let next = 0;
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    for (let member = stack.pop()!; ; member = stack.pop()!) {
      onStack.delete(member);
      component.push(member);
      if (member === node) break;
    }
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return found.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

export function checkImports(srcDir: string, layers: readonly (readonly string[])[] = SRC_LAYERS): { files: number; imports: number; problems: ImportProblem[] } {
  const layerOf = new Map(layers.flatMap((folders, layer) => folders.map((folder) => [folder, layer] as const)));
  const graph = new Map(sourceFiles(srcDir).map((full) => {
    const file = path.relative(srcDir, full).split(path.sep).join('/');
    return [file, importsOf(srcDir, file)] as const;
  }));
  const problems: ImportProblem[] = [];
  const unplaced = new Set<string>();
  let imports = 0;
  for (const [file, targets] of graph) {
    const from = folderOf(file);
    if (!layerOf.has(from) && !unplaced.has(from)) {
      unplaced.add(from);
      problems.push({ kind: 'unplaced', message: `src/${from}/ is in no layer of scripts/check-imports.ts; add it to SRC_LAYERS above every folder it imports` });
    }
    for (const target of targets) {
      imports++;
      const to = folderOf(target);
      if (to === from) continue;
      const fromLayer = layerOf.get(from);
      const toLayer = layerOf.get(to);
      if (fromLayer === undefined || toLayer === undefined || toLayer < fromLayer) continue;
      const relation = toLayer === fromLayer ? 'the same layer as' : 'a higher layer than';
      problems.push({
        kind: 'layer',
        message: `src/${file} imports src/${target}: ${to}/ is in ${relation} ${from}/; move what it needs down to a layer below ${from}/ (or the importing code up)`,
      });
    }
  }
  for (const component of cycles(graph)) {
    problems.push({ kind: 'cycle', message: `import cycle among ${component.map((f) => `src/${f}`).join(', ')}; break it by moving what its files share into a module below them` });
  }
  return { files: graph.size, imports, problems };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const srcDir = fileURLToPath(new URL('../src', import.meta.url));
  const { files, imports, problems } = checkImports(srcDir);
  for (const problem of problems) console.error(problem.message);
  console.log(`import graph of src/: ${files} files, ${imports} imports, ${problems.filter((p) => p.kind === 'cycle').length} cycles, ${problems.filter((p) => p.kind !== 'cycle').length} layer breaks`);
  if (problems.length > 0) process.exitCode = 1;
}
