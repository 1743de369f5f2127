// Shoot manifests among explain's inputs: the owner's ACL as written in the garden, explained
// before it is applied. With the seed's objects, the manifest's acl providerConfig replaces what
// the seed holds for that shoot; alone, a seed is made up around it: one gateway, the shoot's own
// node range, and the seed's always-allowed ranges the owner gives (--always-allowed).
import type { SourcedObject } from '../gardener/inventory.js';
import { isShootManifest, readShootManifest, type ShootManifest } from '../gardener/shoot-manifest.js';
import { EXTENSION_TYPE } from '../gardener/seed-acl.js';

const EXTENSIONS_API = 'extensions.gardener.cloud/v1alpha1';
/** The gateway of a seed made up around a manifest: Gardener's default istio-ingressgateway. */
export const OFFLINE_GATEWAY_NAMESPACE = 'istio-ingress';
const OFFLINE_GATEWAY_LABELS = { app: 'istio-ingressgateway', istio: 'ingressgateway' };

export interface ManifestInputs {
  /** The objects to build the seed model from. */
  readonly objects: SourcedObject[];
  /** The manifests read, by technical ID. */
  readonly manifests: ReadonlyMap<string, SourcedManifest>;
  /** True when the inputs held no seed (no Cluster) and one was made up around the manifests. */
  readonly madeUpSeed: boolean;
  readonly errors: readonly string[];
}

type SourcedManifest = ShootManifest & { readonly source: string; readonly object: Record<string, unknown> };

const kindOf = (o: SourcedObject): unknown => (o.object as { kind?: unknown } | null)?.kind;
const namespaceOf = (o: SourcedObject): unknown => (o.object as { metadata?: { namespace?: unknown } } | null)?.metadata?.namespace;

function extensionObject(manifest: ShootManifest): Record<string, unknown> {
  return { apiVersion: EXTENSIONS_API, kind: 'Extension', metadata: { name: EXTENSION_TYPE, namespace: manifest.technicalID }, spec: { type: EXTENSION_TYPE, providerConfig: manifest.providerConfig } };
}

/** The seed objects around a manifest explained alone: its Cluster (with its node range), its Extension, one gateway. */
function madeUpSeed(manifests: readonly SourcedManifest[]): SourcedObject[] {
  const source = 'the seed made up around the Shoot manifest';
  const perShoot = manifests.flatMap((m): SourcedObject[] => {
    const status = (m.object['status'] ?? {}) as Record<string, unknown>;
    const cluster = {
      apiVersion: EXTENSIONS_API,
      kind: 'Cluster',
      metadata: { name: m.technicalID },
      spec: { seed: { metadata: { name: 'offline' }, spec: { networks: {} } }, shoot: { ...m.object, status: { ...status, technicalID: m.technicalID } } },
    };
    // The API server's SNI chain: Gardener's Gateway names the shoot's API hosts; which host decides nothing here.
    const domain = ((m.object['spec'] as { dns?: { domain?: unknown } } | undefined)?.dns?.domain);
    const apiGateway = {
      apiVersion: 'networking.istio.io/v1beta1',
      kind: 'Gateway',
      metadata: { name: 'kube-apiserver', namespace: m.technicalID },
      spec: {
        selector: OFFLINE_GATEWAY_LABELS,
        servers: [{ hosts: [typeof domain === 'string' && domain !== '' ? `api.${domain}` : `api.${m.technicalID}.invalid`], port: { number: 443, name: 'tls', protocol: 'HTTPS' }, tls: { mode: 'OPTIONAL_MUTUAL' } }],
      },
    };
    // A shoot with workers has an Infrastructure; its egress addresses are among what --always-allowed gives.
    const name = (m.object['metadata'] as { name?: unknown } | undefined)?.name;
    const infrastructure = { apiVersion: EXTENSIONS_API, kind: 'Infrastructure', metadata: { name, namespace: m.technicalID }, status: { egressCIDRs: [] } };
    return [{ object: cluster, source: m.source }, { object: apiGateway, source }, { object: infrastructure, source }, ...(m.hasAcl ? [{ object: extensionObject(m), source: m.source }] : [])];
  });
  const gateway = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'istio-ingressgateway', namespace: OFFLINE_GATEWAY_NAMESPACE, labels: OFFLINE_GATEWAY_LABELS },
    spec: { selector: { matchLabels: OFFLINE_GATEWAY_LABELS }, template: { metadata: { labels: OFFLINE_GATEWAY_LABELS } } },
  };
  return [...perShoot, { object: gateway, source }];
}

/** Takes the Shoot manifests out of `objects` and puts what they say in their place (see the file comment). */
export function withShootManifests(objects: readonly SourcedObject[]): ManifestInputs {
  const manifests = new Map<string, SourcedManifest>();
  const errors: string[] = [];
  const rest: SourcedObject[] = [];
  for (const sourced of objects) {
    if (!isShootManifest(sourced.object)) {
      rest.push(sourced);
      continue;
    }
    const read = readShootManifest(sourced.object);
    if ('error' in read) errors.push(`${sourced.source}: ${read.error}`);
    else if (manifests.has(read.manifest.technicalID)) errors.push(`${sourced.source}: ${read.manifest.ref}: a second manifest of ${read.manifest.technicalID} (first in ${manifests.get(read.manifest.technicalID)?.source ?? ''})`);
    else manifests.set(read.manifest.technicalID, { ...read.manifest, source: sourced.source, object: sourced.object as Record<string, unknown> });
  }
  if (manifests.size === 0) return { objects: rest, manifests, madeUpSeed: false, errors };
  if (!rest.some((o) => kindOf(o) === 'Cluster')) return { objects: [...rest, ...madeUpSeed([...manifests.values()])], manifests, madeUpSeed: true, errors };
  // The manifest is what the owner is about to apply: its acl entry replaces the seed's Extension (or its absence removes it).
  const replaced = rest.filter((o) => !(kindOf(o) === 'Extension' && manifests.has(String(namespaceOf(o))) && (o.object as { spec?: { type?: unknown } }).spec?.type === EXTENSION_TYPE));
  for (const m of manifests.values()) if (m.hasAcl) replaced.push({ object: extensionObject(m), source: m.source });
  return { objects: replaced, manifests, madeUpSeed: false, errors };
}
