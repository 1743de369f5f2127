// Runs the Helm CLI built by scripts/setup-helm.sh (HELM_BIN). Fails loudly when it is missing:
// chart tests that silently skip would let a broken chart through.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const SEED_CHART = fileURLToPath(new URL('../../charts/gardener-acl', import.meta.url));
export const ADMISSION_CHART = fileURLToPath(new URL('../../charts/gardener-acl-admission', import.meta.url));

export function helmBin(): string {
  const bin = process.env.HELM_BIN;
  if (!bin || !existsSync(bin)) {
    throw new Error(`HELM_BIN is ${bin ? `${bin}, which does not exist` : 'not set'}; run: export HELM_BIN="$(bash scripts/setup-helm.sh | tail -n 1)"`);
  }
  return bin;
}

export interface HelmResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function helm(args: readonly string[]): Promise<HelmResult> {
  return new Promise((resolve) => {
    execFile(helmBin(), [...args], { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, HELM_CACHE_HOME: '/tmp/gardener-acl-helm/cache', HELM_CONFIG_HOME: '/tmp/gardener-acl-helm/config', HELM_DATA_HOME: '/tmp/gardener-acl-helm/data' } }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly [k: string]: unknown };
  readonly [field: string]: unknown;
}

/** `helm template` with values given as --set-json, parsed into objects; throws with Helm's stderr. */
export async function renderChart(chart: string, values: Record<string, unknown> = {}, namespace = 'garden'): Promise<KubeObject[]> {
  const setArgs = Object.entries(values).flatMap(([key, value]) => ['--set-json', `${key}=${JSON.stringify(value)}`]);
  const result = await helm(['template', 'gardener-acl', chart, '--namespace', namespace, ...setArgs]);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null);
}

export function find(objects: readonly KubeObject[], kind: string, name?: string, namespace?: string): KubeObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name) && (namespace === undefined || o.metadata.namespace === namespace));
  if (!found) throw new Error(`no ${kind}${name ? ` ${name}` : ''} rendered`);
  return found;
}
