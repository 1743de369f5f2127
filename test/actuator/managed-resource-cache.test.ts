// The actuator reads the shoot's ManagedResource from the informer's copy (issue 31: no live GET
// per reconcile), except where that copy cannot answer: before the cache has listed, and while it
// does not yet show the last apply of this process. The second case is about correctness, not
// cost: a copy from before that apply may show the previous rule as applied, and a rule changed
// back meanwhile would then pass for applied although the ManagedResource now stored names another
// Secret. The informer and the wiring on a real API server are controller.test.ts.
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import type { ClusterClient, KubeObjectLike } from '../../src/actuator/cluster-client.js';
import { cachedManagedResource } from '../../src/gardener/cached-views.js';
import { classifyObjects } from '../../src/gardener/inventory.js';
import { extensionSchema, type Extension } from '../../src/gardener/objects.js';
import { kubeObjectJsonSchema, type KubeObjectJson } from '../../src/kube/object-json.js';
import { testActuator } from './actuator-deps.js';
import { DEFAULT_GW, aclExtension, allowRule, gatewayObjects, shootObjects, technicalID, type ShootFixture } from './seed-fixture.js';

const A: ShootFixture = { project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const NAMESPACE = technicalID(A);

/** Answers GETs of the ManagedResource with `live`, counts them, and hands out increasing resourceVersions for applies. */
function countingClient(live: () => KubeObjectJson | undefined) {
  const counts = { gets: 0, applies: 0, creates: 0 };
  let version = 100;
  const applied: KubeObjectLike[] = [];
  const client: ClusterClient = {
    get: async (ref) => (ref.kind === 'ManagedResource' && ref.name === 'extension-acl' ? (counts.gets++, live()) : undefined),
    createIfAbsent: async () => void counts.creates++,
    apply: async (o) => (counts.applies++, applied.push(o), { resourceVersion: String(++version) }),
    mergePatch: async () => undefined,
    jsonPatch: async () => undefined,
    patchStatus: async () => undefined,
    delete: async () => undefined,
  };
  return { client, counts, applied };
}

/** `written` as the resource manager leaves it once applied: generation observed, ResourcesApplied=True. */
function appliedCopy(written: KubeObjectLike, resourceVersion: string, secret?: string): KubeObjectJson {
  const object = JSON.parse(JSON.stringify(written)) as Record<string, unknown> & { spec: { secretRefs: { name: string }[] }; metadata: Record<string, unknown> };
  if (secret !== undefined) object.spec.secretRefs = [{ name: secret }];
  object.metadata = { ...object.metadata, resourceVersion, generation: 3, uid: 'u1' };
  object['status'] = { observedGeneration: 3, conditions: [{ type: 'ResourcesApplied', status: 'True', reason: 'ApplySucceeded' }] };
  return cachedManagedResource(kubeObjectJsonSchema.parse(object));
}

function extension(): Extension {
  return extensionSchema.parse({ ...aclExtension(NAMESPACE, A.providerConfig), metadata: { name: 'acl', namespace: NAMESPACE, generation: 1 } });
}

function actuator(client: ClusterClient, cached: () => { stored: KubeObjectJson | undefined } | undefined) {
  const { inventory } = classifyObjects([...gatewayObjects(DEFAULT_GW), ...shootObjects(A)].map((object, i) => ({ object, source: `#${i}` })));
  return testActuator(client, defaultOperatorConfig(), inventory, () => [], {
    cachedManagedResource: cached,
    // As the controller's caches say on a current Gardener: no legacy filters, no reference ManagedResource.
    surelyAbsent: () => true,
  });
}

/** The ManagedResource the actuator writes for A. */
async function desiredManagedResource(): Promise<KubeObjectLike> {
  const { client, applied } = countingClient(() => undefined);
  await actuator(client, () => undefined).reconcile(extension());
  const mr = applied.find((o) => o.kind === 'ManagedResource');
  if (!mr) throw new Error('the actuator applied no ManagedResource');
  return mr;
}

describe('the stored ManagedResource, read from the cache', () => {
  it('an applied, up-to-date copy in the cache: done, without a GET or a write', async () => {
    const desired = await desiredManagedResource();
    const { client, counts } = countingClient(() => undefined);
    const result = await actuator(client, () => ({ stored: appliedCopy(desired, '50') })).reconcile(extension());
    expect(result.kind).toBe('done');
    expect(counts).toEqual({ gets: 0, applies: 0, creates: 0 });
  });

  it('a cache that has not listed: read live', async () => {
    const desired = await desiredManagedResource();
    const { client, counts } = countingClient(() => appliedCopy(desired, '50'));
    const result = await actuator(client, () => undefined).reconcile(extension());
    expect(result.kind).toBe('done');
    expect(counts).toEqual({ gets: 1, applies: 0, creates: 0 });
  });

  it('none in the cache: written without a GET, and the result waits for the resource manager', async () => {
    const { client, counts } = countingClient(() => undefined);
    const result = await actuator(client, () => ({ stored: undefined })).reconcile(extension());
    expect(result).toMatchObject({ kind: 'pending', reason: `ACL recorded; waiting for gardener-resource-manager to apply ManagedResource ${NAMESPACE}/extension-acl` });
    expect(counts).toEqual({ gets: 0, applies: 1, creates: 1 });
  });

  it('a copy older than its own last apply is not believed, even when it looks applied and up to date', async () => {
    const desired = await desiredManagedResource();
    // What the server holds after this process's apply (resourceVersion 101): another Secret.
    let live = appliedCopy(desired, '101', 'managedresource-extension-acl-0ther000');
    let cached = appliedCopy(desired, '40', 'managedresource-extension-acl-0ld00000');
    const { client, counts } = countingClient(() => live);
    const act = actuator(client, () => ({ stored: cached }));
    // The cache shows an older Secret: written (resourceVersion 101 noted).
    expect((await act.reconcile(extension())).kind).toBe('pending');
    expect(counts).toEqual({ gets: 0, applies: 1, creates: 1 });
    // A copy from before that write, showing the desired Secret applied: not believed; the live
    // object names another Secret, so it is written again (resourceVersion 102).
    cached = appliedCopy(desired, '99');
    expect((await act.reconcile(extension())).kind).toBe('pending');
    expect(counts).toEqual({ gets: 1, applies: 2, creates: 2 });
    // Once the cache shows that write (or later), it answers again.
    live = appliedCopy(desired, '102');
    cached = appliedCopy(desired, '102');
    expect((await act.reconcile(extension())).kind).toBe('done');
    expect(counts).toEqual({ gets: 1, applies: 2, creates: 2 });
  });
});
