// STAND-IN FOR gardener-resource-manager (which cannot run here): applies the objects listed in
// the ManagedResources of class `seed` the way GRM does for our purposes — server-side apply of
// every manifest, deletion of objects a ManagedResource no longer lists or whose ManagedResource
// is gone — once per call, so tests decide when "GRM" has run. It tracks what it applied with an
// origin annotation, like GRM's `resources.gardener.cloud/origin`.
import type { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { manifestsOf } from '../../src/actuator/managed-resource.js';
import { listAll } from '../../src/kube/list-watch.js';
import { deleteObject, getObject, serverSideApply, type ObjectToWrite } from '../../src/kube/objects-client.js';

const ORIGIN = 'resources.gardener.cloud/origin';
const FIELD_MANAGER = 'resource-manager-stand-in';

interface Desired {
  readonly origin: string;
  readonly objects: ObjectToWrite[];
}

async function desiredObjects(kc: KubeConfig): Promise<Desired[]> {
  const { items } = await listAll(kc, '/apis/resources.gardener.cloud/v1alpha1/managedresources');
  const result: Desired[] = [];
  for (const mr of items as { metadata: { name: string; namespace: string }; spec?: { class?: string; secretRefs?: { name: string }[] } }[]) {
    if (mr.spec?.class !== 'seed') continue;
    const origin = `${mr.metadata.namespace}/${mr.metadata.name}`;
    const objects: ObjectToWrite[] = [];
    for (const ref of mr.spec.secretRefs ?? []) {
      const secret = await getObject(kc, { apiVersion: 'v1', kind: 'Secret', name: ref.name, namespace: mr.metadata.namespace });
      const data = (secret?.['data'] ?? {}) as Record<string, string>;
      for (const doc of parseAllDocuments(manifestsOf(data))) {
        const obj = doc.toJS() as ObjectToWrite | null;
        if (obj) objects.push(obj);
      }
    }
    result.push({ origin, objects });
  }
  return result;
}

/** One "GRM" pass over all seed-class ManagedResources; returns what it applied and deleted. */
export async function applyManagedResourcesInPlaceOfResourceManager(kc: KubeConfig): Promise<{ applied: string[]; deleted: string[] }> {
  const desired = await desiredObjects(kc);
  const wanted = new Set<string>();
  const applied: string[] = [];
  for (const { origin, objects } of desired) {
    for (const obj of objects) {
      const key = `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}`;
      wanted.add(key);
      await serverSideApply(kc, { ...obj, metadata: { ...obj.metadata, annotations: { ...(obj.metadata['annotations'] as object | undefined), [ORIGIN]: origin } } }, FIELD_MANAGER);
      applied.push(key);
    }
  }
  const deleted: string[] = [];
  const { items } = await listAll(kc, '/apis/networking.istio.io/v1alpha3/envoyfilters');
  for (const obj of items as { apiVersion: string; kind: string; metadata: { name: string; namespace: string; annotations?: Record<string, string> } }[]) {
    const key = `EnvoyFilter ${obj.metadata.namespace}/${obj.metadata.name}`;
    if (obj.metadata.annotations?.[ORIGIN] && !wanted.has(key)) {
      await deleteObject(kc, { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: obj.metadata.name, namespace: obj.metadata.namespace });
      deleted.push(key);
    }
  }
  return { applied, deleted };
}
