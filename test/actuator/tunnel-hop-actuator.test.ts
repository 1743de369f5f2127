// The per-shoot actuator with tunnelRevocation hop (the default), on an in-memory seed: the
// tunnel generation it records, also when the shoot has no Gateway (hibernated), and what delete
// takes away (the per-shoot hops of earlier versions included). The generation logic itself is
// tunnel-generation.test.ts; the controller on a real API server (the shared hop written from the
// recorded generation) is controller-matcher-form.test.ts.
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import type { AclActuator } from '../../src/actuator/acl-actuator.js';
import type { ClusterClient } from '../../src/actuator/cluster-client.js';
import { classifyObjects } from '../../src/gardener/inventory.js';
import { extensionSchema, type Extension } from '../../src/gardener/objects.js';
import { shootFilterName, tunnelHopFilterName } from '../../src/rbac/shoot-envoy-filters.js';
import { testActuator } from './actuator-deps.js';
import { DEFAULT_GW, ZONAL_GW, aclExtension, allowRule, gatewayObjects, shootObjects, technicalID, type ShootFixture } from './seed-fixture.js';

const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const HOP: OperatorConfig = defaultOperatorConfig();

function recordingClient() {
  const calls: string[] = [];
  const client: ClusterClient = {
    get: async () => undefined,
    createIfAbsent: async (o) => void calls.push(`create ${String(o['kind'])}`),
    apply: async (o) => (calls.push(`apply ${String(o['kind'])}`), {}),
    mergePatch: async (ref) => void calls.push(`merge ${ref.kind} ${ref.namespace ?? ''}/${ref.name}`),
    jsonPatch: async (ref) => void calls.push(`json ${ref.kind}`),
    patchStatus: async (ref) => void calls.push(`status ${ref.kind}`),
    delete: async (ref) => void calls.push(`delete ${ref.kind} ${ref.namespace ?? ''}/${ref.name}`),
  };
  return { client, calls };
}

function actuator(client: ClusterClient, withGateway: boolean, tunnelHopMissing?: (technicalID: string, generation: number) => readonly string[]): AclActuator {
  const objects = [...[DEFAULT_GW, ZONAL_GW].flatMap(gatewayObjects), ...shootObjects(A).filter((o) => withGateway || o['kind'] !== 'Gateway')];
  const { inventory } = classifyObjects(objects.map((object, i) => ({ object, source: `#${i}` })));
  return testActuator(client, HOP, inventory, tunnelHopMissing);
}

function extension(state: unknown): Extension {
  return extensionSchema.parse({ ...aclExtension(technicalID(A), A.providerConfig), metadata: { name: 'acl', namespace: technicalID(A), generation: 1 }, status: { state } });
}

describe('the actuator with tunnelRevocation hop', () => {
  it('records generation 1; a resync returns the same state (no status write)', async () => {
    expect(HOP.tunnelRevocation).toBe('hop');
    const { client } = recordingClient();
    // The recording client stores nothing, so no resource manager ever applies the ManagedResource: the
    // result stays pending, and records its state as a finished one would.
    const first = await actuator(client, true).reconcile(extension(undefined));
    expect(first).toMatchObject({ kind: 'pending', reason: `ACL recorded; waiting for gardener-resource-manager to apply ManagedResource ${technicalID(A)}/extension-acl` });
    const state = first.state as { tunnels?: { generation: number }; hopNamespaces?: string[] } | undefined;
    expect(state?.tunnels?.generation).toBe(1);
    // The hop is seed-wide now: no namespaces of per-shoot hops to remember.
    expect(state?.hopNamespaces).toBeUndefined();
    const again = await actuator(client, true).reconcile(extension(JSON.parse(JSON.stringify(state))));
    expect(JSON.stringify(again.state)).toBe(JSON.stringify(state));
  });

  it("is not done while a gateway's stored hop lacks the shoot's chain of the recorded generation", async () => {
    const { client } = recordingClient();
    const asked: string[] = [];
    const result = await actuator(client, true, (id, generation) => (asked.push(`${id}/${generation}`), [ZONAL_GW.namespace])).reconcile(extension(undefined));
    expect(asked).toEqual([`${technicalID(A)}/1`]);
    expect(result).toMatchObject({ kind: 'pending', reason: `ACL recorded; waiting for the tunnel hop (generation 1) on ${ZONAL_GW.namespace}` });
    expect((result.kind === 'pending' ? (result.state as { tunnels?: { generation: number } }) : undefined)?.tunnels?.generation).toBe(1);
  });

  it('without a Gateway: no tunnels key appears from nothing (it would differ from the stored state on every resync), and a recorded one is kept as it was', async () => {
    const { client } = recordingClient();
    const none = await actuator(client, false).reconcile(extension(undefined));
    expect(none.kind).toBe('pending');
    expect(Object.keys((none.kind === 'pending' ? none.state : undefined) ?? {})).not.toContain('tunnels');
    const recorded = { gatewayNamespaces: [DEFAULT_GW.namespace], hopNamespaces: [DEFAULT_GW.namespace, ZONAL_GW.namespace], tunnels: { generation: 3, admitted: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['198.51.100.0/24'], mode: 'enforce' }, alwaysAllowed: [] } } };
    const kept = await actuator(client, false).reconcile(extension(recorded));
    const state = kept.kind === 'pending' ? (kept.state as typeof recorded) : undefined;
    // The rule (203.0.113.0/24) no longer admits 198.51.100.0/24, but without a Gateway the
    // generation waits as recorded (the filter goes ahead on every gateway); so do the namespaces
    // of an earlier version's per-shoot hops, where delete looks for leftovers.
    expect(state?.tunnels).toEqual(recorded.tunnels);
    expect(state?.hopNamespaces).toEqual(recorded.hopNamespaces);
    expect(state?.gatewayNamespaces).toEqual([DEFAULT_GW.namespace, ZONAL_GW.namespace].sort());
  });

  it("delete takes the SNI filter and an earlier version's per-shoot hops from every namespace either was written to", async () => {
    const { client, calls } = recordingClient();
    const recorded = { gatewayNamespaces: [DEFAULT_GW.namespace], hopNamespaces: [DEFAULT_GW.namespace, ZONAL_GW.namespace] };
    await actuator(client, true).delete(extension(recorded));
    const deleted = calls.filter((c) => c.startsWith('delete EnvoyFilter')).sort();
    expect(deleted).toEqual(
      [DEFAULT_GW, ZONAL_GW].flatMap((g) => [`delete EnvoyFilter ${g.namespace}/${shootFilterName(technicalID(A))}`, `delete EnvoyFilter ${g.namespace}/${tunnelHopFilterName(technicalID(A))}`]).sort(),
    );
  });
});
