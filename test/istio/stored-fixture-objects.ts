// Fixture objects on their way into a real API server and back out to Istio.
import type { ObjectToWrite } from '../../src/kube/objects-client.js';
import type { JsonObject } from '../envoy/json.js';

/** A fixture object as the API server takes it: what its CRD requires and the fixture leaves out (no controller ever reads it). */
export function forApiServer(object: JsonObject): ObjectToWrite {
  const o = structuredClone(object) as unknown as ObjectToWrite;
  if (o.kind === 'Infrastructure') return { ...o, spec: { type: 'local', region: 'r', ...(o['spec'] as object) } };
  return o;
}

/** A stored object as Istio's config store takes it: without the server's field ownership. */
export function withoutServerFields(object: Record<string, unknown>): JsonObject {
  const metadata = { ...(object['metadata'] as Record<string, unknown>) };
  delete metadata['managedFields'];
  return { ...object, metadata } as JsonObject;
}
