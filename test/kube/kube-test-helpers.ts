/** Shared fixtures of the src/kube tests that run against the real kube-apiserver. */
import { pino, type Logger } from 'pino';

import { createObject, patchStatus, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';

/** Logs stay quiet unless TEST_LOG_LEVEL is set (e.g. TEST_LOG_LEVEL=debug). */
export function testLogger(): Logger {
  return pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
}

/** A control plane with the project's CRDs and the given namespaces. */
export async function startWithCRDs(namespaces: string[]): Promise<ControlPlane> {
  const cp = await startControlPlane();
  try {
    await cp.installCRDs();
    for (const name of namespaces) {
      await createObject(cp.kubeConfig, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    }
    return cp;
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

export function extension(namespace: string, name: string, spec: Record<string, unknown> = {}): ObjectToWrite {
  return {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name, namespace },
    spec: { type: 'acl', ...spec },
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` until it returns a value other than undefined/false; fails after timeoutMs. */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * A control plane holding `objects` (their namespaces created first), each stored as its owner
 * stores it: the object, then its status through the status subresource.
 */
export async function startWithObjects(objects: readonly ObjectToWrite[]): Promise<ControlPlane> {
  const namespaces = [...new Set(objects.flatMap((o) => (o.metadata.namespace ? [o.metadata.namespace] : [])))];
  const cp = await startWithCRDs(namespaces);
  for (const object of objects) {
    await createObject(cp.kubeConfig, object);
    const status = object['status'] as Record<string, unknown> | undefined;
    if (status) await patchStatus(cp.kubeConfig, { apiVersion: object.apiVersion, kind: object.kind, name: object.metadata.name, namespace: object.metadata.namespace }, status);
  }
  return cp;
}
