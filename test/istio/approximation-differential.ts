// Compares test/envoy/istio-placement-approximation.ts with Istio's own EnvoyFilter patching on
// a real Gardener seed. Every EnvoyFilter is split into the patches the approximation handles
// (FILTER_CHAIN ADD/REMOVE, NETWORK_FILTER, HTTP_FILTER) and the rest (LISTENER, CLUSTER,
// HTTP_ROUTE, ...). Istio renders the gateway once with only the rest (the base), the
// approximation applies the handled patches to that base, and Istio renders it once with
// everything: any difference between the two results is a difference in placement semantics.
// Splitting is sound because Istio applies each applyTo kind in its own pass.

import type { GatewayModel } from '../envoy/gardener-gateway.js';
import { approximateIstioPlacement, type PatchReport } from '../envoy/istio-placement-approximation.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../envoy/json.js';
import { renderGatewayWithIstio, type GatewayProxy } from './istio-render.js';
import { canonicalJson, listenerPort } from './rendered-config.js';

const HANDLED: Readonly<Record<string, readonly string[] | 'all'>> = {
  FILTER_CHAIN: ['ADD', 'REMOVE'],
  NETWORK_FILTER: 'all',
  HTTP_FILTER: 'all',
};

function handled(patch: JsonValue): boolean {
  if (!isJsonObject(patch) || !isJsonObject(patch['patch'])) return false;
  const operations = HANDLED[String(patch['applyTo'])];
  const operation = String(patch['patch']['operation']);
  const match = isJsonObject(patch['match']) ? patch['match'] : {};
  // match.proxy, routeConfiguration, cluster and patch.filterClass are outside the approximation.
  const plainMatch = Object.keys(match).every((key) => key === 'context' || key === 'listener');
  const plainPatch = Object.keys(patch['patch']).every((key) => key === 'operation' || key === 'value');
  return operations !== undefined && (operations === 'all' || operations.includes(operation)) && plainMatch && plainPatch;
}

function withPatches(envoyFilter: JsonObject, patches: JsonValue[]): JsonObject | undefined {
  if (patches.length === 0) return undefined;
  const spec = isJsonObject(envoyFilter['spec']) ? envoyFilter['spec'] : {};
  return { ...envoyFilter, spec: { ...spec, configPatches: patches } };
}

export interface SplitObjects {
  /** Everything except the handled patches (for Istio's base render). */
  readonly base: JsonObject[];
  /** EnvoyFilters reduced to their handled patches (for the approximation). */
  readonly handled: JsonObject[];
}

export function splitForApproximation(objects: readonly JsonObject[]): SplitObjects {
  const base: JsonObject[] = [];
  const handledFilters: JsonObject[] = [];
  for (const object of objects) {
    const spec = object['spec'];
    if (object['kind'] !== 'EnvoyFilter' || !isJsonObject(spec) || !Array.isArray(spec['configPatches'])) {
      base.push(object);
      continue;
    }
    const patches = spec['configPatches'];
    const rest = withPatches(object, patches.filter((p) => !handled(p)));
    const mine = withPatches(object, patches.filter(handled));
    if (rest !== undefined) base.push(rest);
    if (mine !== undefined) handledFilters.push(mine);
  }
  return { base, handled: handledFilters };
}

/** Paths where two JSON values differ (at most `limit`). */
export function jsonDifferences(a: JsonValue | undefined, b: JsonValue | undefined, path = '', limit = 20): string[] {
  if (canonicalJson(a) === canonicalJson(b)) return [];
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    return a.flatMap((element, i) => jsonDifferences(element, b[i], `${path}[${i}]`, limit)).slice(0, limit);
  }
  if (isJsonObject(a) && isJsonObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((key) => jsonDifferences(a[key], b[key], `${path}.${key}`, limit)).slice(0, limit);
  }
  const show = (v: JsonValue | undefined): string => (v === undefined ? 'absent' : canonicalJson(v).slice(0, 160));
  return [`${path}: Istio ${show(a)} / approximation ${show(b)}`];
}

export interface DifferentialResult {
  /** Per listener name: where Istio's and the approximation's results differ. */
  readonly differences: ReadonlyMap<string, readonly string[]>;
  readonly patches: readonly PatchReport[];
  readonly notSelected: readonly string[];
}

/** Istio's placement of the handled patches vs the approximation's, on the same Istio-rendered base. */
export async function compareWithApproximation(objects: readonly JsonObject[], proxy: GatewayProxy): Promise<DifferentialResult> {
  const split = splitForApproximation(objects);
  const [base, full] = await Promise.all([renderGatewayWithIstio(split.base, proxy), renderGatewayWithIstio(objects, proxy)]);
  const model: GatewayModel = {
    namespace: proxy.namespace,
    labels: proxy.labels,
    listeners: base.listeners.flatMap((config) => {
      const port = listenerPort(config);
      return port === undefined ? [] : [{ logicalPort: port, config }];
    }),
    clusters: [],
  };
  const placement = approximateIstioPlacement(model, split.handled);
  const approximated = new Map(placement.gateway.listeners.map((l) => [String(l.config['name']), l.config]));
  const differences = new Map<string, string[]>();
  for (const listener of full.listeners.filter((l) => listenerPort(l) !== undefined)) {
    const name = String(listener['name']);
    const diff = jsonDifferences(listener, approximated.get(name));
    if (diff.length > 0) differences.set(name, diff);
  }
  return { differences, patches: placement.patches, notSelected: placement.notSelected };
}
