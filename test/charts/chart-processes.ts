// Runs containers of the rendered seed chart as local processes, with a token of the chart's
// ServiceAccount, so the API server enforces the chart's RBAC on them.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { restRequest } from '../../src/kube/rest.js';
import { getFreePort, type ControlPlane } from '../kube/control-plane.js';
import { killOnExit } from '../support/child-processes.js';
import { find, type KubeObject } from './helm.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CONFIG_MOUNT = '/etc/gardener-acl/config';

type Container = { name: string; args: string[]; env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[] };

export interface RunningContainer {
  readonly child: ChildProcess;
  /** The free port its --probe-port was mapped to. */
  readonly probePort: number;
  output(): string;
}

/** A kubeconfig holding a TokenRequest token of one of the chart's ServiceAccounts. */
export async function serviceAccountKubeconfig(cp: ControlPlane, namespace: string, dir: string, serviceAccount = 'gardener-acl'): Promise<string> {
  const review = (await restRequest(cp.kubeConfig, {
    method: 'POST',
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  })) as { status: { token: string } };
  const cluster = cp.kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig without cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: 'gardener-acl', token: review.status.token }],
    contexts: [{ name: 'sa', cluster: cluster.name, user: 'gardener-acl' }],
    currentContext: 'sa',
  });
  const file = path.join(dir, `${serviceAccount}.kubeconfig`);
  await writeFile(file, kc.exportConfig());
  return file;
}

/** What the API server's authorizer says about `user` (a ServiceAccount of `namespace`) doing `attributes`. */
export async function canI(cp: ControlPlane, user: string, namespace: string, attributes: Record<string, string>): Promise<boolean> {
  const review = (await restRequest(cp.kubeConfig, {
    method: 'POST',
    path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec: { user, groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'], resourceAttributes: attributes } },
  })) as { status: { allowed: boolean } };
  return review.status.allowed;
}

/** The chart's OperatorConfiguration (its ConfigMap) as a local file. */
export async function writeChartConfig(objects: readonly KubeObject[], dir: string): Promise<string> {
  const file = path.join(dir, 'config.yaml');
  await writeFile(file, (find(objects, 'ConfigMap').data as Record<string, string>)['config.yaml'] ?? '');
  return file;
}

/**
 * The named container of the chart's Deployments as a process: its args (mount paths mapped by
 * `mapArg`, probe ports to free ones) and env (values as given, e.g. NODE_OPTIONS with the heap
 * limits; the namespace from the downward API).
 */
export async function startChartContainer(
  objects: readonly KubeObject[],
  name: string,
  kubeconfig: string,
  /** An arg as this machine needs it: one string, or none (an empty list drops it). */
  mapArg: (arg: string) => string | readonly string[],
  namespace = 'garden',
  /** What the platform injects besides the chart (e.g. gardener-operator's GARDEN_KUBECONFIG). */
  injectedEnv: Record<string, string> = {},
): Promise<RunningContainer> {
  const deployments = objects.filter((o) => o.kind === 'Deployment') as unknown as { spec: { template: { spec: { containers: Container[] } } } }[];
  const container = deployments.flatMap((d) => d.spec.template.spec.containers).find((c) => c.name === name);
  if (!container) throw new Error(`no ${name} container`);
  const probePort = await getFreePort();
  const args = container.args.flatMap(mapArg).map((arg) => arg.replace(/^--probe-port=\d+$/, `--probe-port=${probePort}`));
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = namespace;
    else throw new Error(`unexpected env ${e.name}`);
  }
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', KUBECONFIG: kubeconfig, ...env, ...injectedEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  return { child, probePort, output: () => output };
}
