// Which test files make the fast lane (`npm test`): those that reach, through their imports, no
// harness of a real component (Envoy, kube-apiserver and etcd, Istio's render, Helm, Gardener's
// components) and start no process of their own. Read from the imports, not from a list, so a
// test that starts using a real component leaves the lane by itself. CI runs both lanes
// (scripts/test-all.sh runs every test file).
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** The modules that start a real component; whatever imports them needs its binaries. */
export const REAL_COMPONENT_HARNESSES = [
  'test/envoy/envoy-binary.ts',
  'test/kube/control-plane.ts',
  'test/istio/istio-render.ts',
  'test/charts/helm.ts',
  'test/support/gardener-resource-manager.ts',
  'test/support/kube-garbage-collector.ts',
  'test/gardener/garden-apiserver.test.ts',
] as const;

/** Starting a process (the CLI, the compiled build) costs seconds: such tests are not fast. */
const PROCESS_MODULES = new Set(['node:child_process', 'child_process']);

function testFiles(root: string): string[] {
  return readdirSync(path.join(root, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join('test', f))
    .sort();
}

/** The test files of the fast lane, relative to `root`, sorted. */
export function fastLaneTestFiles(root: string): string[] {
  const files = testFiles(root);
  const imports = new Map<string, { readonly local: string[]; readonly startsProcesses: boolean }>();
  for (const file of files) {
    const names = ts.preProcessFile(readFileSync(path.join(root, file), 'utf8'), true, true).importedFiles.map((i) => i.fileName);
    imports.set(file, {
      local: names.filter((n) => n.startsWith('.')).map((n) => path.normalize(path.join(path.dirname(file), n.replace(/\.js$/, '.ts')))),
      startsProcesses: names.some((n) => PROCESS_MODULES.has(n)),
    });
  }
  const harnesses = new Set<string>(REAL_COMPONENT_HARNESSES);
  const slow = new Map<string, boolean>();
  const isSlow = (file: string, visiting: Set<string>): boolean => {
    const known = slow.get(file);
    if (known !== undefined) return known;
    if (harnesses.has(file)) return true;
    if (visiting.has(file)) return false;
    visiting.add(file);
    const info = imports.get(file);
    const result = info !== undefined && (info.startsProcesses || info.local.some((dep) => isSlow(dep, visiting)));
    visiting.delete(file);
    slow.set(file, result);
    return result;
  };
  return files.filter((f) => f.endsWith('.test.ts') && !isSlow(f, new Set()));
}
