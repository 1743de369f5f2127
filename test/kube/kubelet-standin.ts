// A stand-in for the kubelet's port-forward endpoint (tools/kube/kubelet-standin, built by
// scripts/setup-kube.sh): no kubelet or container runtime runs here, so "pods" are loopback
// processes. The kube-apiserver (real) proxies `pods/portforward` to it like to a kubelet, and it
// serves the request with the kubelet's own port-forward server code, forwarding the pod's port
// to the loopback address given. What it stands in for is only the last hop, node to container.
import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { killOnExit } from '../support/child-processes.js';
import { findKubeAssets } from './control-plane.js';
import { restRequest, type HttpMethod } from '../../src/kube/rest.js';

export interface StandinPod {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Pod port → loopback address:port that stands in for it. */
  readonly ports: ReadonlyMap<number, string>;
}

export interface KubeletStandin {
  readonly node: string;
  stop(): Promise<void>;
}

const NODE = 'kubelet-standin';

async function kubeRequest(kc: KubeConfig, method: HttpMethod, path: string, body: unknown, contentType?: string): Promise<unknown> {
  return restRequest(kc, { method, path, body, ...(contentType === undefined ? {} : { contentType }) });
}

function standinBinary(): string {
  const binary = path.join(path.dirname(findKubeAssets().kubeApiServer), 'kubelet-standin');
  try {
    accessSync(binary, fsConstants.X_OK);
  } catch {
    throw new Error(`${binary} is missing: build it with \`bash scripts/setup-kube.sh\``);
  }
  return binary;
}

/** Starts the stand-in, registers it as a Node and creates the pods on it (Running and Ready). */
export async function startKubeletStandin(kc: KubeConfig, pods: readonly StandinPod[]): Promise<KubeletStandin> {
  const forwards = pods.flatMap((pod) => [...pod.ports].flatMap(([port, target]) => ['-forward', `${pod.namespace}/${pod.name}:${port}=${target}`]));
  const child = spawn(standinBinary(), forwards, { stdio: ['pipe', 'pipe', 'pipe'] });
  killOnExit(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-8_000)));
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', () => reject(new Error(`kubelet-standin exited: ${stderr}`)));
  });
  const { port } = z.object({ port: z.number() }).parse(JSON.parse(first));
  await kubeRequest(kc, 'POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE } });
  await kubeRequest(kc, 'PATCH', `/api/v1/nodes/${NODE}/status`, { status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }], daemonEndpoints: { kubeletEndpoint: { Port: port } } } }, 'application/merge-patch+json');
  for (const pod of pods) {
    await kubeRequest(kc, 'POST', `/api/v1/namespaces/${pod.namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: pod.name, namespace: pod.namespace, labels: pod.labels },
      spec: { nodeName: NODE, containers: [{ name: 'istio-proxy', image: 'stand-in' }] },
    });
    await kubeRequest(kc, 'PATCH', `/api/v1/namespaces/${pod.namespace}/pods/${pod.name}/status`, {
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], podIP: '127.0.0.1' },
    }, 'application/merge-patch+json');
  }
  return {
    node: NODE,
    async stop() {
      child.stdin.end();
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null) resolve();
        else child.once('exit', () => resolve());
      });
    },
  };
}
