// From Gardener's objects to what Istio gives each gateway: our generator (renderSeed) runs on
// the fixture seed of one era, its JSON patches are applied to Gardener's legacy EnvoyFilters (as
// the mutating webhook would before they are stored), and Istio's own config generation renders
// every ingress gateway from Gardener's objects plus our EnvoyFilters.

import jsonpatch from 'fast-json-patch';
import type { CombinedFormName } from '../../src/config/operator-config.js';
import { renderSeed, type SeedRender } from '../../src/render/seed-render.js';
import { cloneJson, isJsonObject, type JsonObject } from '../envoy/json.js';
import { renderGatewayWithIstio, type IstioRenderOutput } from './istio-render.js';
import type { GardenerEraFixture } from './eras.js';
import { gardenerSeedObjects, gatewayLabels, INGRESS_GATEWAYS, type GatewayKey } from './seed-fixture.js';

// Gardener created its EnvoyFilters before the extension was installed; Istio orders patches of
// equal priority by creation time, so the stored objects carry that order.
const GARDENER_CREATED = '2025-06-01T00:00:00Z';
const GARDENER_ACL_CREATED = '2026-01-01T00:00:00Z';

export interface IstioRenderedSeed {
  readonly era: GardenerEraFixture;
  /** Gardener's objects as Gardener wrote them. */
  readonly gardenerObjects: readonly JsonObject[];
  /** Our generator's output for them. */
  readonly generated: SeedRender;
  /** What the API server stores and Istio reads: Gardener's objects (legacy filters mutated by our patches) and ours. */
  readonly istioInput: readonly JsonObject[];
  readonly renders: ReadonlyMap<GatewayKey, IstioRenderOutput>;
}

function withCreationTimestamp(object: JsonObject, timestamp: string): JsonObject {
  const metadata = isJsonObject(object['metadata']) ? object['metadata'] : {};
  return { ...object, metadata: { ...metadata, creationTimestamp: timestamp } };
}

function objectKey(object: JsonObject): string {
  const metadata = isJsonObject(object['metadata']) ? object['metadata'] : {};
  return `${String(object['kind'])} ${String(metadata['namespace'])}/${String(metadata['name'])}`;
}

/** Gardener's objects with our RFC 6902 patches applied to the EnvoyFilters they name (the webhook's effect). */
export function applyWebhookPatches(gardenerObjects: readonly JsonObject[], generated: SeedRender): JsonObject[] {
  const patches = new Map(generated.patches.map((p) => [`EnvoyFilter ${p.metadata.namespace}/${p.metadata.name}`, p]));
  const objects = gardenerObjects.map((object) => {
    const patch = patches.get(objectKey(object));
    if (patch === undefined) return object;
    patches.delete(objectKey(object));
    return jsonpatch.applyPatch(cloneJson(object), [...patch.spec.operations], true).newDocument;
  });
  if (patches.size > 0) throw new Error(`patches for EnvoyFilters that do not exist: ${[...patches.keys()].join(', ')}`);
  return objects;
}

/** The objects Istio reads for a seed: Gardener's (mutated where our webhook patches them) and ours. */
export function istioInputObjects(gardenerObjects: readonly JsonObject[], generated: SeedRender): JsonObject[] {
  const ours = generated.envoyFilters.map((filter) => withCreationTimestamp(JSON.parse(JSON.stringify(filter)) as JsonObject, GARDENER_ACL_CREATED));
  const gardener = applyWebhookPatches(gardenerObjects, generated).map((object) =>
    object['kind'] === 'EnvoyFilter' ? withCreationTimestamp(object, GARDENER_CREATED) : object,
  );
  return [...gardener, ...ours];
}

/** Our generator on Gardener's objects; any error it reports fails the suite (the fixture must be clean input); warnings (e.g. an ALLOW of one address family) are the owner's to read. */
export function generateForSeed(gardenerObjects: readonly JsonObject[]): SeedRender {
  const generated = renderSeed(gardenerObjects.map((object, index) => ({ object, source: `fixture #${index} ${objectKey(object)}` })));
  const errors = generated.problems.filter((p) => p.severity === 'error');
  if (errors.length > 0) throw new Error(`renderSeed reported problems:\n${errors.map((p) => `${p.object}: ${p.message}`).join('\n')}`);
  return generated;
}

/** Renders every ingress gateway of the era's seed with Istio. */
export async function renderSeedThroughIstio(
  era: GardenerEraFixture,
  meshConfigYaml?: string,
  settings?: Parameters<typeof withOperatorSettings>[1],
): Promise<IstioRenderedSeed> {
  const gardenerObjects = settings ? withOperatorSettings(gardenerSeedObjects(era), settings) : gardenerSeedObjects(era);
  const generated = generateForSeed(gardenerObjects);
  const istioInput = istioInputObjects(gardenerObjects, generated);
  const renders = new Map<GatewayKey, IstioRenderOutput>();
  for (const gateway of INGRESS_GATEWAYS) {
    renders.set(gateway.key, await renderGatewayWithIstio(istioInput, { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) }, meshConfigYaml));
  }
  return { era, gardenerObjects, generated, istioInput, renders };
}

/** The seed's objects with an OperatorConfiguration holding only `settings` (the fixture has none of its own). */
export function withOperatorSettings(
  objects: readonly JsonObject[],
  settings: { readonly combinedForm: CombinedFormName; readonly ecdsBuckets?: number; readonly tunnelRevocation?: 'none' | 'hop' },
): JsonObject[] {
  return [...objects.filter((o) => o['kind'] !== 'OperatorConfiguration'), { apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'OperatorConfiguration', ...settings }];
}

/** The seed's objects with an OperatorConfiguration that selects the matcher form. */
export function withMatcherForm(objects: readonly JsonObject[]): JsonObject[] {
  return withOperatorSettings(objects, { combinedForm: 'matcher' });
}

/** The seed's objects with `technicalID`'s ACL replaced. */
export function withRule(objects: readonly JsonObject[], technicalID: string, rule: Record<string, unknown>): JsonObject[] {
  return objects.map((object) => {
    const metadata = isJsonObject(object['metadata']) ? object['metadata'] : {};
    if (object['kind'] !== 'Extension' || metadata['namespace'] !== technicalID) return object;
    const copy = structuredClone(object) as { spec: { providerConfig: { rule: Record<string, unknown> } } };
    copy.spec.providerConfig.rule = rule;
    return copy as unknown as JsonObject;
  });
}

/** What Istio reads for the seed with the operator's `combinedForm: ecds` in `buckets` buckets: exactly what the product writes. */
export function istioInputWithEcds(gardenerObjects: readonly JsonObject[], buckets: number): JsonObject[] {
  const objects = withOperatorSettings(gardenerObjects, { combinedForm: 'ecds', ecdsBuckets: buckets });
  return istioInputObjects(objects, generateForSeed(objects));
}
