// Which of our stored EnvoyFilters apply to a given chain or listener of a gateway, and in which
// order, following the EnvoyFilter fields we emit (a pure stand-in for Istio's placement; Istio's
// own code is checked against the hand-built gateways in test/istio).
import type { RbacRules } from '../../src/rbac/envoy-rbac-types.js';

export type JsonRecord = { readonly [key: string]: unknown };

export function isRecord(value: unknown): value is JsonRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const HCM = 'envoy.filters.network.http_connection_manager';

/** The `rules` our network filters put on the SNI chain whose server names are `chainHosts`, whatever else the objects hold (CONNECT filters of any form, tunnel hops). */
export function sniChainRules(objects: readonly unknown[], namespace: string, port: number, chainHosts: readonly string[]): RbacRules[] {
  const rules: RbacRules[] = [];
  for (const object of objects) {
    if (!isRecord(object) || !isRecord(object['metadata']) || object['metadata']['namespace'] !== namespace || !isRecord(object['spec'])) continue;
    const patches = object['spec']['configPatches'];
    for (const patch of Array.isArray(patches) ? (patches as unknown[]) : []) {
      if (!isRecord(patch) || patch['applyTo'] !== 'NETWORK_FILTER' || !isRecord(patch['match']) || !isRecord(patch['match']['listener'])) continue;
      const listener = patch['match']['listener'];
      const chain = listener['filterChain'];
      if (listener['portNumber'] !== port || !isRecord(chain) || typeof chain['sni'] !== 'string' || !chainHosts.includes(chain['sni'])) continue;
      const value = isRecord(patch['patch']) ? patch['patch']['value'] : undefined;
      const config = isRecord(value) ? value['typed_config'] : undefined;
      // An audit-mode filter (shadow rules only) enforces nothing.
      if (isRecord(config) && isRecord(config['rules'])) rules.push(config['rules'] as unknown as RbacRules);
    }
  }
  return rules;
}

/** One HTTP filter our objects put into a listener's chain, and where it comes from. */
export interface PlacedHttpFilter {
  /** `<object name>#<patch index>`. */
  readonly origin: string;
  /** The patch value: `{name, typed_config}` or `{name, config_discovery}`. */
  readonly value: JsonRecord;
}

/** An ECDS resource an EXTENSION_CONFIG patch defines. */
export interface ExtensionConfigDefinition {
  readonly origin: string;
  readonly value: JsonRecord;
}

export interface ConnectChainPlacement {
  /**
   * Our HTTP filters in the order the listener runs them: the INSERT_FIRST ones (before Istio's
   * and Gardener's own), then those inserted before the router (after them).
   */
  readonly filters: readonly PlacedHttpFilter[];
  /** ECDS resources by name: every definition of that name, in application order. */
  readonly extensionConfigs: ReadonlyMap<string, readonly ExtensionConfigDefinition[]>;
}

function creationTime(metadata: JsonRecord): number {
  const stamp = metadata['creationTimestamp'];
  if (stamp === undefined) return 0;
  const time = typeof stamp === 'string' ? Date.parse(stamp) : Number.NaN;
  if (Number.isNaN(time)) throw new Error(`EnvoyFilter ${String(metadata['name'])}: unparsable creationTimestamp ${JSON.stringify(stamp)}`);
  return time;
}

const ROUTER = 'envoy.filters.http.router';

function outside(origin: string, what: string): never {
  throw new Error(`${origin}: ${what} is outside the placement the oracle models`);
}

/**
 * The HTTP filters our EnvoyFilters of `namespace` put before everything else on the CONNECT
 * listener of `port`, in the order Envoy runs them, and the ECDS resources they define.
 *
 * Istio (pilot/pkg/model/push_context.go, envoyfilter/listener_patch.go) applies the EnvoyFilters
 * that select the gateway by ascending `spec.priority` (default 0), then creation time, then
 * `<name>.<namespace>`; within one object in patch order. Every INSERT_FIRST goes to the front, so
 * what is applied later runs earlier. EXTENSION_CONFIG `ADD` patches define ECDS resources by
 * name (envoyfilter/extension_configuration_patch.go), in the same order. With `gatewayLabels`,
 * objects whose workloadSelector does not select them are left out; without, every object of the
 * namespace counts. An INSERT_BEFORE the router goes right in front of it, so those run last, in
 * application order. Patches we do not write on this path (other ports, network filters, clusters,
 * listeners) are ignored; HTTP filter patches we never write throw instead of being guessed.
 */
export function connectChainPlacement(objects: readonly unknown[], where: { readonly namespace: string; readonly port: number; readonly gatewayLabels?: Readonly<Record<string, string>> }): ConnectChainPlacement {
  const selected = objects.flatMap((object, index) => {
    if (!isRecord(object) || !isRecord(object['metadata']) || !isRecord(object['spec'])) throw new Error(`object #${index} is not an EnvoyFilter: ${JSON.stringify(object).slice(0, 200)}`);
    const metadata = object['metadata'];
    const spec = object['spec'];
    if (metadata['namespace'] !== where.namespace) return [];
    const selector = isRecord(spec['workloadSelector']) && isRecord(spec['workloadSelector']['labels']) ? spec['workloadSelector']['labels'] : {};
    const labels = where.gatewayLabels;
    if (labels !== undefined && !Object.entries(selector).every(([k, v]) => labels[k] === v)) return [];
    const priority = spec['priority'] ?? 0;
    if (typeof priority !== 'number') throw new Error(`EnvoyFilter ${String(metadata['name'])}: priority ${JSON.stringify(priority)}`);
    return [{ name: String(metadata['name']), priority, time: creationTime(metadata), patches: Array.isArray(spec['configPatches']) ? (spec['configPatches'] as unknown[]) : [] }];
  });
  selected.sort((a, b) => a.priority - b.priority || a.time - b.time || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const filters: PlacedHttpFilter[] = [];
  const beforeRouter: PlacedHttpFilter[] = [];
  const extensionConfigs = new Map<string, ExtensionConfigDefinition[]>();
  for (const object of selected) {
    object.patches.forEach((patch, i) => {
      const origin = `${object.name}#${i}`;
      if (!isRecord(patch) || !isRecord(patch['patch'])) return outside(origin, 'a patch without `patch`');
      const { operation, value } = patch['patch'];
      if (patch['applyTo'] === 'EXTENSION_CONFIG') {
        if (operation !== 'ADD' || !isRecord(value) || typeof value['name'] !== 'string') return outside(origin, `EXTENSION_CONFIG ${String(operation)}`);
        extensionConfigs.set(value['name'], [...(extensionConfigs.get(value['name']) ?? []), { origin, value }]);
        return;
      }
      if (patch['applyTo'] !== 'HTTP_FILTER') return;
      const match = isRecord(patch['match']) ? patch['match'] : {};
      const context = match['context'] ?? 'ANY';
      const listener = isRecord(match['listener']) ? match['listener'] : {};
      if (context !== 'GATEWAY' && context !== 'ANY') return;
      if (listener['portNumber'] !== undefined && listener['portNumber'] !== where.port) return;
      const chain = isRecord(listener['filterChain']) ? listener['filterChain'] : {};
      const filter = isRecord(chain['filter']) ? chain['filter'] : {};
      if (filter['name'] !== undefined && filter['name'] !== HCM) return;
      if (listener['name'] !== undefined || Object.keys(chain).some((k) => k !== 'filter')) return outside(origin, `an HTTP_FILTER match ${JSON.stringify(match)}`);
      if (filter['subFilter'] !== undefined) {
        const sub = isRecord(filter['subFilter']) ? filter['subFilter'] : {};
        if (sub['name'] !== ROUTER || Object.keys(sub).length !== 1 || operation !== 'INSERT_BEFORE' || !isRecord(value)) return outside(origin, `an HTTP_FILTER ${String(operation)} at ${JSON.stringify(match)}`);
        beforeRouter.push({ origin, value });
        return;
      }
      if (operation !== 'INSERT_FIRST' || !isRecord(value)) return outside(origin, `HTTP_FILTER ${String(operation)}`);
      filters.unshift({ origin, value });
    });
  }
  return { filters: [...filters, ...beforeRouter], extensionConfigs };
}
