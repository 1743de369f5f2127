// A garden control plane with the real gardener-apiserver (`gardener-contract garden`: Gardener's
// test/envtest, kube-apiserver and etcd plus gardener-apiserver behind the aggregation layer), as
// the virtual garden: Shoots, ManagedSeeds and the rest of Gardener's API, validated by Gardener's
// own code. Admission plugins that need a whole landscape are off (tools/gardener/contract/garden.go).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { eventually } from '../kube/kube-test-helpers.js';
import { gardenerBin } from './gardener-resource-manager.js';

export interface GardenApiServer {
  readonly kubeConfig: KubeConfig;
  readonly kubeconfigPath: string;
  stop(): Promise<void>;
}

export async function startGardenApiServer(): Promise<GardenApiServer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-garden-'));
  const kubeconfigPath = path.join(dir, 'kubeconfig');
  const output: string[] = [];
  const garden: ChildProcess = spawn(gardenerBin('gardener-contract'), ['garden', `--kube-assets=${process.env['KUBE_ASSETS'] ?? ''}`, `--kubeconfig-out=${kubeconfigPath}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  garden.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
  garden.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => garden.once('exit', () => resolve()));
  // It stops its kube-apiserver and etcd on SIGTERM; waited for, so none outlives the suite.
  const stop = async (): Promise<void> => {
    garden.stdin?.end();
    garden.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 30_000))]);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await eventually('garden control plane', () => output.join('').includes('{"step":"garden","ok":true'), 120_000);
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\n${output.join('').slice(-4000)}`);
  }
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  return { kubeConfig, kubeconfigPath, stop };
}

/** A Shoot as gardener-apiserver accepts it with the landscape plugins off (no CloudProfile or credentials need exist). */
export function gardenShoot(name: string, namespace: string, spec: Record<string, unknown> = {}): { apiVersion: string; kind: string; metadata: { name: string; namespace: string }; spec: Record<string, unknown> } {
  return {
    apiVersion: 'core.gardener.cloud/v1beta1',
    kind: 'Shoot',
    metadata: { name, namespace },
    spec: {
      cloudProfile: { kind: 'CloudProfile', name: 'cloudprofile1' },
      credentialsBindingName: 'credentials',
      region: 'europe-central-1',
      provider: { type: 'local', workers: [{ name: 'pool', minimum: 1, maximum: 1, machine: { type: 'large', image: { name: 'image', version: '1.0.0' } } }] },
      kubernetes: { version: '1.33.0' },
      networking: { type: 'calico', nodes: '10.180.0.0/16' },
      ...spec,
    },
  };
}
