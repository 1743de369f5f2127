// Gardens as gardener-operator's CRD takes them, and a write of one that returns what the client
// sees (the status code and the API server's message), for the tests of the Garden webhook.
import { restRequest } from '../../src/kube/rest.js';
import type { ObjectToWrite } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';

export const rule = (cidrs: readonly string[], mode?: 'audit' | 'enforce') => ({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [...cidrs], ...(mode ? { mode } : {}) } });

export function garden(name: string, providerConfig: unknown, annotations: Record<string, string> = {}): ObjectToWrite {
  return {
    apiVersion: 'operator.gardener.cloud/v1alpha1',
    kind: 'Garden',
    metadata: { name, annotations },
    spec: {
      runtimeCluster: { ingress: { controller: { kind: 'nginx' } }, networking: { pods: ['100.96.0.0/11'], services: ['100.64.0.0/13'] }, provider: {} },
      virtualCluster: {
        dns: { domains: [{ name: 'garden.example.test' }] },
        gardener: { clusterIdentity: name },
        kubernetes: { version: '1.33.0' },
        maintenance: { timeWindow: { begin: '220000+0100', end: '230000+0100' } },
        networking: { services: ['100.64.0.0/13'] },
      },
      extensions: providerConfig === undefined ? [] : [{ type: 'acl', providerConfig }],
    },
  } as unknown as ObjectToWrite;
}

export interface Answer {
  readonly status: number;
  readonly message: string;
}

export async function write(cp: ControlPlane, method: 'POST' | 'PUT', object: ObjectToWrite): Promise<Answer> {
  const name = object.metadata.name;
  try {
    const path = `/apis/operator.gardener.cloud/v1alpha1/gardens${method === 'PUT' ? `/${name}` : ''}`;
    let body: unknown = object;
    if (method === 'PUT') {
      const current = (await restRequest(cp.kubeConfig, { method: 'GET', path })) as { metadata: { resourceVersion: string } };
      body = { ...object, metadata: { ...object.metadata, resourceVersion: current.metadata.resourceVersion } };
    }
    await restRequest(cp.kubeConfig, { method, path, body });
    return { status: 200, message: '' };
  } catch (error) {
    const e = error as { code?: number; body?: unknown; message?: string };
    const text = typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? '');
    const parsed = (() => {
      try {
        return JSON.parse(text) as { message?: string; code?: number };
      } catch {
        return { message: e.message ?? text };
      }
    })();
    return { status: parsed.code ?? e.code ?? 0, message: parsed.message ?? '' };
  }
}
