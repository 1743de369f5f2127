// Kubernetes Events on the Extension, so a shoot owner (via gardenlet) sees why the ACL is not applied.
import { createHash, randomBytes } from 'node:crypto';
import type { Extension } from '../gardener/objects.js';
import type { ClusterClient } from './cluster-client.js';

/**
 * A Warning Event on the Extension. `once`: the same reason and message for the same Extension
 * make one Event (named after them) until the API server expires it, however often it is recorded.
 */
export async function recordWarningEvent(client: ClusterClient, ext: Extension, reason: string, message: string, now: Date, once = false): Promise<void> {
  const time = now.toISOString();
  const suffix = once ? createHash('sha256').update(`${reason}\n${message}`).digest('hex').slice(0, 16) : randomBytes(8).toString('hex');
  await client.createIfAbsent({
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${ext.metadata.name}.${suffix}`, namespace: ext.metadata.namespace },
    involvedObject: {
      apiVersion: ext.apiVersion,
      kind: 'Extension',
      name: ext.metadata.name,
      namespace: ext.metadata.namespace,
      ...((ext.metadata as { uid?: string }).uid ? { uid: (ext.metadata as { uid?: string }).uid } : {}),
    },
    reason,
    // The Event API limits messages to 1 KiB.
    message: message.length > 1024 ? `${message.slice(0, 1021)}...` : message,
    type: 'Warning',
    source: { component: 'gardener-acl' },
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
  } as Parameters<ClusterClient['createIfAbsent']>[0]);
}
