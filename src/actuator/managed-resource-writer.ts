// Converges one ManagedResource per namespace on what the actuator wants (managed-resource.ts):
// the shoot's filters in its namespace, the virtual garden's in `garden`. Read from the informer's
// copy when it shows this process's last apply, else live.
import type { KubeObjectJson } from '../kube/object-json.js';
import { WrittenVersions } from '../kube/written-versions.js';
import type { ClusterClient, ObjectRef } from './cluster-client.js';
import { checkStoredManagedResource, managedResourceObjects, managedResourceProgress, MANAGED_RESOURCE_NAME, type ManagedResourceProgress } from './managed-resource.js';

export class ManagedResourceWriter {
  /** Per namespace, the ManagedResource this process last applied, until the cache shows it. */
  private readonly writes = new WrittenVersions();

  constructor(
    private readonly client: ClusterClient,
    /** The informer's copy (`stored` undefined: it holds none), or undefined while it cannot answer (not listed yet). */
    private readonly cached: ((namespace: string) => { readonly stored: KubeObjectJson | undefined } | undefined) | undefined,
    readonly name: string = MANAGED_RESOURCE_NAME,
  ) {}

  ref(namespace: string): ObjectRef {
    return { apiVersion: 'resources.gardener.cloud/v1alpha1', kind: 'ManagedResource', name: this.name, namespace };
  }

  /**
   * Converges the stored ManagedResource on the desired one: written when it is missing or differs
   * in anything we set (a foreign edit or delete comes back), its Secret created again when the
   * resource manager reports it could not apply it (a deleted Secret). Unchanged: no write.
   * Returns whether the resource manager has applied what is now stored.
   */
  async converge(namespace: string, filters: Parameters<typeof managedResourceObjects>[1]): Promise<ManagedResourceProgress> {
    const desired = managedResourceObjects(namespace, filters, this.name);
    const stored = await this.stored(namespace);
    const check = checkStoredManagedResource(stored, desired.managedResource);
    if (check.upToDate && !check.notApplied) return managedResourceProgress(stored);
    // Add before remove: the new Secret exists before the ManagedResource names it.
    await this.client.createIfAbsent(desired.secret);
    // The Secret it named before is left to the resource manager's garbage collector, which deletes
    // it once nothing references it (managed-resource.ts): the controller deletes no Secret.
    if (!check.upToDate) this.writes.note(namespace, (await this.client.apply(desired.managedResource)).resourceVersion);
    // Just written: the resource manager's status (an event on its informer) says when it is applied.
    return { kind: 'waiting', detail: 'written; the resource manager has not applied it yet' };
  }

  /**
   * The stored ManagedResource, from the cache when it can answer: it has listed, and it shows the
   * last write of this process (an older copy could still name the Secret before it, and a rule
   * changed back meanwhile would then look applied). Otherwise read live.
   */
  private async stored(namespace: string): Promise<unknown> {
    const cached = this.cached?.(namespace);
    if (cached !== undefined && !this.writes.lagging(namespace, cached.stored?.metadata.resourceVersion)) return cached.stored;
    return this.client.get(this.ref(namespace));
  }

  /**
   * Lets the resource manager delete the filters with the ManagedResource (keepObjects false),
   * then deletes it. `gone`: nothing is stored any more; `deleting`: the resource manager is
   * deleting the applied filters (its finalizer), which may still be stored.
   */
  async remove(namespace: string): Promise<'gone' | 'deleting'> {
    this.writes.forget(namespace);
    // Read live: a deletion is rare, and a cached copy that lags would skip the keepObjects patch.
    const current = await this.client.get(this.ref(namespace));
    if (!current) return 'gone';
    if (!(current['metadata'] as { deletionTimestamp?: string }).deletionTimestamp) {
      if ((current['spec'] as { keepObjects?: boolean } | undefined)?.keepObjects !== false) {
        await this.client.mergePatch(this.ref(namespace), { spec: { keepObjects: false } });
      }
      // Its Secret goes with the resource manager's garbage collector.
      await this.client.delete(this.ref(namespace));
    }
    return 'deleting';
  }
}
