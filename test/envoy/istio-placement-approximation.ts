// An APPROXIMATION of how istiod applies EnvoyFilter patches to a gateway's listeners, for the
// subset of the API that gardener-acl and Gardener use. It mirrors
// istio/istio pilot/pkg/networking/core/envoyfilter/listener_patch.go and PushContext.EnvoyFilters:
//
// - selection: EnvoyFilters in the gateway's namespace or Istio's root namespace whose
//   `workloadSelector.labels` are a subset of the gateway's labels (`targetRefs` never match);
// - order: priority, then root namespace first, then creationTimestamp, then `name.namespace`;
//   all patches of one `applyTo` kind run in that order;
// - per listener and filter chain: FILTER_CHAIN REMOVE, then NETWORK_FILTER operations, then per
//   network filter its MERGEs and, inside every HCM, the HTTP_FILTER operations and MERGEs;
//   FILTER_CHAIN ADDs are appended last, so no patch ever sees an added chain (istio#41536).
//
// It is not Istio: patch values are JSON merged without the proto schema; only the oneofs and
// map fields of the filter types in ONEOFS_BY_TYPE and MAP_FIELDS_BY_TYPE follow proto rules. Anything outside the
// subset (other applyTo kinds, LISTENER patches other than ADD, match.proxy, filterClass, FILTER_CHAIN
// MERGE, ...) throws instead of being silently ignored. EXTENSION_CONFIG patches (ECDS resources)
// change no listener: they are returned as the resources Envoy would fetch by name. CLUSTER and
// LISTENER ADDs (the tunnel hop's doors and internal listeners) are appended as they are, after
// every patch of the gateway's own listeners, so no patch ever sees an added listener. test/istio/approximation-differential.ts compares it
// with Istio's own code on Gardener-shaped seeds of every era.

import { z } from 'zod';
import type { GatewayListener, GatewayModel } from './gardener-gateway.js';
import { FILTER_NAME, TYPE_URL } from './gardener-shapes.js';
import {
  cloneJson,
  fieldKey,
  getField,
  getObject,
  getObjectList,
  getString,
  isJsonObject,
  snakeCase,
  type JsonObject,
} from './json.js';

export const ISTIO_ROOT_NAMESPACE = 'istio-system';

const jsonObjectSchema = z.record(z.string(), z.json());

const listenerMatchSchema = z.strictObject({
  portNumber: z.number().int().positive().optional(),
  name: z.string().optional(),
  filterChain: z
    .strictObject({
      name: z.string().optional(),
      sni: z.string().optional(),
      transportProtocol: z.string().optional(),
      applicationProtocols: z.string().optional(),
      destinationPort: z.number().int().positive().optional(),
      filter: z
        .strictObject({
          name: z.string().default(''),
          subFilter: z.strictObject({ name: z.string().default('') }).optional(),
        })
        .optional(),
    })
    .optional(),
});

const operationSchema = z.enum(['MERGE', 'ADD', 'REMOVE', 'INSERT_BEFORE', 'INSERT_AFTER', 'INSERT_FIRST', 'REPLACE']);

/** A cluster or listener added as it is (CLUSTER / LISTENER ADD, matched by context only). */
const addPatchSchema = z.strictObject({
  applyTo: z.enum(['CLUSTER', 'LISTENER']),
  match: z.strictObject({ context: z.enum(['ANY', 'GATEWAY']).default('ANY') }).optional(),
  patch: z.strictObject({ operation: z.literal('ADD'), value: jsonObjectSchema }),
});

/** An ECDS resource (EXTENSION_CONFIG ADD): no listener changes; Envoy takes it by name through ECDS. */
const extensionConfigPatchSchema = z.strictObject({
  applyTo: z.literal('EXTENSION_CONFIG'),
  patch: z.strictObject({ operation: z.literal('ADD'), value: jsonObjectSchema }),
});

const configPatchSchema = z
  .strictObject({
    applyTo: z.enum(['FILTER_CHAIN', 'NETWORK_FILTER', 'HTTP_FILTER']),
    match: z
      .strictObject({
        context: z.enum(['ANY', 'SIDECAR_INBOUND', 'SIDECAR_OUTBOUND', 'GATEWAY']).default('ANY'),
        listener: listenerMatchSchema.optional(),
      })
      .optional(),
    patch: z.strictObject({ operation: operationSchema, value: jsonObjectSchema.optional() }),
  })
  .refine((p) => !(p.applyTo === 'FILTER_CHAIN' && !['ADD', 'REMOVE'].includes(p.patch.operation)), {
    message: 'the approximation supports FILTER_CHAIN ADD and REMOVE only',
  });

/**
 * An ECDS resource or a listener patch of the subset: told apart by `applyTo`, so that a patch
 * outside the subset is refused with the error of its own field.
 */
const anyPatchSchema = z.unknown().transform((patch, ctx) => {
  const applyTo = isJsonObject(patch) ? patch['applyTo'] : undefined;
  const schema = applyTo === 'EXTENSION_CONFIG' ? extensionConfigPatchSchema : applyTo === 'CLUSTER' || applyTo === 'LISTENER' ? addPatchSchema : configPatchSchema;
  const parsed: z.ZodSafeParseResult<AnyPatch> = schema.safeParse(patch);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  return z.NEVER;
});

const envoyFilterSchema = z.object({
  apiVersion: z.string().startsWith('networking.istio.io/'),
  kind: z.literal('EnvoyFilter'),
  metadata: z.object({
    name: z.string().min(1),
    namespace: z.string().optional(),
    creationTimestamp: z.string().optional(),
  }),
  spec: z.strictObject({
    workloadSelector: z.strictObject({ labels: z.record(z.string(), z.string()).default({}) }).optional(),
    targetRefs: z.array(z.unknown()).optional(),
    priority: z.number().int().default(0),
    configPatches: z.array(anyPatchSchema).default([]),
  }),
});

type ConfigPatch = z.infer<typeof configPatchSchema>;
type AddPatch = z.infer<typeof addPatchSchema>;
type AnyPatch = ConfigPatch | z.infer<typeof extensionConfigPatchSchema> | AddPatch;
const isListenerPatch = (patch: AnyPatch): patch is ConfigPatch => patch.applyTo !== 'EXTENSION_CONFIG' && patch.applyTo !== 'CLUSTER' && patch.applyTo !== 'LISTENER';
const isAddPatch = (patch: AnyPatch): patch is AddPatch => patch.applyTo === 'CLUSTER' || patch.applyTo === 'LISTENER';
type ParsedEnvoyFilter = z.infer<typeof envoyFilterSchema>;
type Operation = z.infer<typeof operationSchema>;

export interface PatchReport {
  /** `namespace/name` of the EnvoyFilter. */
  envoyFilter: string;
  patchIndex: number;
  applyTo: ConfigPatch['applyTo'] | AddPatch['applyTo'];
  operation: Operation;
  /** How many times the patch changed something (0 = silent no-op, as in Istio). */
  applications: number;
}

export interface PlacementResult {
  /** The gateway with patched listeners (the input is not modified). */
  gateway: GatewayModel;
  /** One entry per selected patch, in application order. */
  patches: PatchReport[];
  /** `namespace/name` of EnvoyFilters that do not select this gateway. */
  notSelected: string[];
  /** The ECDS resources (`{name, typed_config}`) the selected EnvoyFilters add, later ones winning by name. */
  extensionConfigs: JsonObject[];
}

/** Whether a CLUSTER / LISTENER ADD applies: Istio's context GATEWAY and ANY both reach a gateway. */
const addsToGateway = (patch: AddPatch): boolean => (patch.match?.context ?? 'ANY') === 'ANY' || patch.match?.context === 'GATEWAY';

interface OrderedPatch {
  patch: ConfigPatch;
  report: PatchReport;
}

function parseEnvoyFilter(object: unknown, index: number): ParsedEnvoyFilter {
  // Judge the object as the API server would store it: undefined fields dropped, dates as strings.
  const serialized: unknown = object === undefined ? undefined : JSON.parse(JSON.stringify(object));
  const parsed = envoyFilterSchema.safeParse(serialized);
  if (!parsed.success) {
    throw new Error(`EnvoyFilter #${index} is outside what the Istio approximation handles: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

function creationTime(filter: ParsedEnvoyFilter): number {
  const timestamp = filter.metadata.creationTimestamp;
  if (timestamp === undefined) return 0;
  const time = Date.parse(timestamp);
  if (Number.isNaN(time)) throw new Error(`EnvoyFilter ${filter.metadata.name}: unparsable creationTimestamp ${timestamp}`);
  return time;
}

function selects(filter: ParsedEnvoyFilter, namespace: string, gateway: GatewayModel, rootNamespace: string): boolean {
  if (namespace !== gateway.namespace && namespace !== rootNamespace) return false;
  if (filter.spec.targetRefs !== undefined) return false;
  const selector = filter.spec.workloadSelector?.labels ?? {};
  return Object.entries(selector).every(([key, value]) => gateway.labels[key] === value);
}

function orderedPatches(
  gateway: GatewayModel,
  objects: readonly unknown[],
  rootNamespace: string,
): { patches: OrderedPatch[]; notSelected: string[]; extensionConfigs: JsonObject[]; added: { patch: AddPatch; report: PatchReport }[] } {
  const selected: Array<{ filter: ParsedEnvoyFilter; namespace: string }> = [];
  const notSelected: string[] = [];
  objects.forEach((object, index) => {
    const filter = parseEnvoyFilter(object, index);
    const namespace = filter.metadata.namespace ?? gateway.namespace;
    if (selects(filter, namespace, gateway, rootNamespace)) selected.push({ filter, namespace });
    else notSelected.push(`${namespace}/${filter.metadata.name}`);
  });
  selected.sort((a, b) => {
    if (a.filter.spec.priority !== b.filter.spec.priority) return a.filter.spec.priority - b.filter.spec.priority;
    if (a.namespace !== b.namespace && (a.namespace === rootNamespace || b.namespace === rootNamespace)) {
      return a.namespace === rootNamespace ? -1 : 1;
    }
    const byTime = creationTime(a.filter) - creationTime(b.filter);
    if (byTime !== 0) return byTime;
    const aKey = `${a.filter.metadata.name}.${a.namespace}`;
    const bKey = `${b.filter.metadata.name}.${b.namespace}`;
    return aKey < bKey ? -1 : aKey > bKey ? 1 : 0;
  });
  const extensionConfigs = new Map<string, JsonObject>();
  for (const { filter } of selected) {
    for (const patch of filter.spec.configPatches) if (!isListenerPatch(patch)) extensionConfigs.set(getString(patch.patch.value, 'name') ?? '', patch.patch.value);
  }
  const added = selected.flatMap(({ filter, namespace }) =>
    filter.spec.configPatches.flatMap((patch, patchIndex) =>
      isAddPatch(patch) && addsToGateway(patch) ? [{ patch, report: { envoyFilter: `${namespace}/${filter.metadata.name}`, patchIndex, applyTo: patch.applyTo, operation: patch.patch.operation, applications: 1 } }] : [],
    ),
  );
  const patches = selected.flatMap(({ filter, namespace }) =>
    filter.spec.configPatches.flatMap((patch, patchIndex) => (!isListenerPatch(patch) ? [] : [{
      patch,
      report: {
        envoyFilter: `${namespace}/${filter.metadata.name}`,
        patchIndex,
        applyTo: patch.applyTo,
        operation: patch.patch.operation,
        applications: 0,
      },
    }])),
  );
  return { patches, notSelected, extensionConfigs: [...extensionConfigs.values()], added };
}

// ---------------------------------------------------------------------------------------------
// Matching (listener_patch.go: commonConditionMatch, listenerMatch, filterChainMatch, ...)

function contextMatches(patch: ConfigPatch): boolean {
  const context = patch.match?.context ?? 'ANY';
  return context === 'GATEWAY' || context === 'ANY';
}

function listenerMatches(listener: GatewayListener, patch: ConfigPatch): boolean {
  const match = patch.match?.listener;
  if (match === undefined) return true;
  if (match.name !== undefined && match.name !== '' && match.name !== getString(listener.config, 'name')) return false;
  return match.portNumber === undefined || match.portNumber === listener.logicalPort;
}

function filterChainMatches(chain: JsonObject, patch: ConfigPatch): boolean {
  const match = patch.match?.listener?.filterChain;
  if (match === undefined) return true;
  const chainMatch = getObject(chain, 'filter_chain_match');
  if (match.name !== undefined && match.name !== '' && match.name !== getString(chain, 'name')) return false;
  if (match.sni !== undefined && match.sni !== '') {
    const serverNames = chainMatch === undefined ? [] : getField(chainMatch, 'server_names');
    if (!Array.isArray(serverNames) || !serverNames.includes(match.sni)) return false;
  }
  if (match.transportProtocol !== undefined && match.transportProtocol !== '') {
    if (chainMatch === undefined || getString(chainMatch, 'transport_protocol') !== match.transportProtocol) return false;
  }
  if (match.applicationProtocols !== undefined && match.applicationProtocols !== '') {
    const present = chainMatch === undefined ? undefined : getField(chainMatch, 'application_protocols');
    if (!Array.isArray(present) || !match.applicationProtocols.split(',').every((p) => present.includes(p))) return false;
  }
  if (match.destinationPort !== undefined) {
    const port = chainMatch === undefined ? undefined : getField(chainMatch, 'destination_port');
    if (port !== match.destinationPort) return false;
  }
  return true;
}

/** The network filter name a patch anchors on, or undefined if it has no `filterChain.filter`. */
function networkFilterAnchor(patch: ConfigPatch): string | undefined {
  return patch.match?.listener?.filterChain?.filter?.name;
}

/** The HTTP filter name a patch anchors on, or undefined if it has no `filter.subFilter`. */
function httpFilterAnchor(patch: ConfigPatch): string | undefined {
  return patch.match?.listener?.filterChain?.filter?.subFilter?.name;
}

function nameMatches(entry: JsonObject, anchor: string | undefined): boolean {
  return anchor === undefined || getString(entry, 'name') === anchor;
}

// ---------------------------------------------------------------------------------------------
// Operations on filter lists (same semantics for network and HTTP filters)

function patchValue(patch: ConfigPatch): JsonObject {
  if (patch.patch.value === undefined) throw new Error(`${patch.applyTo} ${patch.patch.operation} needs patch.value`);
  return cloneJson(patch.patch.value);
}

/** Applies a list operation (not MERGE); returns the new list and whether it changed. */
function applyListOperation(list: JsonObject[], patch: ConfigPatch, anchor: string | undefined): [JsonObject[], boolean] {
  const index = anchor === undefined ? -1 : list.findIndex((entry) => getString(entry, 'name') === anchor);
  switch (patch.patch.operation) {
    case 'ADD':
      return [[...list, patchValue(patch)], true];
    case 'INSERT_FIRST':
      return [[patchValue(patch), ...list], true];
    case 'INSERT_BEFORE':
      // Without an anchor Istio prepends; with an anchor that is absent, nothing happens.
      if (anchor === undefined) return [[patchValue(patch), ...list], true];
      return index < 0 ? [list, false] : [[...list.slice(0, index), patchValue(patch), ...list.slice(index)], true];
    case 'INSERT_AFTER':
      if (anchor === undefined) return [[...list, patchValue(patch)], true];
      return index < 0 ? [list, false] : [[...list.slice(0, index + 1), patchValue(patch), ...list.slice(index + 1)], true];
    case 'REPLACE':
      return index < 0 ? [list, false] : [[...list.slice(0, index), patchValue(patch), ...list.slice(index + 1)], true];
    case 'REMOVE': {
      if (anchor === undefined) return [list, false];
      const kept = list.filter((entry) => getString(entry, 'name') !== anchor);
      return [kept, kept.length !== list.length];
    }
    case 'MERGE':
      return [list, false];
  }
}

/**
 * Map fields (proto `map<>`) of the filter configs MERGE patches target, per type URL, as paths
 * below typed_config. proto.Merge replaces the value of a map entry the patch names; it does not
 * merge into it. Found against Istio's own render (test/istio): a MERGE naming an existing RBAC
 * policy replaces that policy, where a message-like JSON merge would append to its lists.
 */
const MAP_FIELDS_BY_TYPE: Readonly<Record<string, readonly string[]>> = {
  [TYPE_URL.networkRbac]: ['rules.policies', 'shadow_rules.policies'],
  [TYPE_URL.httpRbac]: ['rules.policies', 'shadow_rules.policies'],
};

/** proto.Merge, approximated on JSON: messages merge recursively, lists append, scalars and map entries replace. */
function mergeJson(target: JsonObject, source: JsonObject, mapFields: ReadonlySet<string> = new Set(), path = ''): void {
  for (const [sourceKey, value] of Object.entries(source)) {
    const snake = snakeCase(sourceKey);
    const existingKey = [sourceKey, fieldKey(target, snake)].find((key) => key in target);
    const key = existingKey ?? sourceKey;
    const existing = target[key];
    const fieldPath = path === '' ? snake : `${path}.${snake}`;
    if (mapFields.has(fieldPath) && isJsonObject(existing) && isJsonObject(value)) {
      for (const [entry, entryValue] of Object.entries(value)) existing[entry] = cloneJson(entryValue);
    } else if (isJsonObject(existing) && isJsonObject(value)) mergeJson(existing, value, mapFields, fieldPath);
    else if (Array.isArray(existing) && Array.isArray(value)) target[key] = [...existing, ...cloneJson(value)];
    else target[key] = cloneJson(value);
  }
}

/**
 * Oneofs of the filter configs MERGE patches target, per type URL. proto.Merge (Istio's
 * MergeAnyWithAny) clears the other members of a oneof when the patch sets one; a schema-less
 * JSON merge would keep both. Found against Istio's own render (test/istio): Gardener's
 * `reversed-vpn` / `http-proxy` MERGE an inline `route_config` into an HCM that Istio generated
 * with `rds`; Istio's result has only `route_config`, and Envoy rejects a config with both.
 */
const ONEOFS_BY_TYPE: Readonly<Record<string, readonly (readonly string[])[]>> = {
  [TYPE_URL.httpConnectionManager]: [['rds', 'route_config', 'scoped_routes']],
};

function clearReplacedOneofMembers(target: JsonObject, source: JsonObject, typeUrl: string): void {
  for (const members of ONEOFS_BY_TYPE[typeUrl] ?? []) {
    const set = members.filter((member) => fieldKey(source, member) in source);
    if (set.length === 0) continue;
    for (const member of members) {
      if (set.includes(member)) continue;
      delete target[fieldKey(target, member)];
    }
  }
}

/**
 * MERGE of a filter (network or HTTP): only if the existing filter has a typed_config; the patch
 * may rename the filter; its typed_config is merged as if it had the existing filter's type URL.
 */
function mergeFilter(filter: JsonObject, patch: ConfigPatch): boolean {
  const existingConfig = getObject(filter, 'typed_config');
  if (existingConfig === undefined) return false;
  const value = patchValue(patch);
  const name = getString(value, 'name');
  if (name !== undefined && name !== '') filter['name'] = name;
  const patchConfig = getObject(value, 'typed_config');
  if (patchConfig !== undefined) {
    const { ['@type']: _ignoredTypeUrl, ...fields } = patchConfig;
    const typeUrl = getString(existingConfig, '@type') ?? '';
    clearReplacedOneofMembers(existingConfig, fields, typeUrl);
    mergeJson(existingConfig, fields, new Set(MAP_FIELDS_BY_TYPE[typeUrl] ?? []));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Walking a listener

class ListenerPatcher {
  constructor(
    private readonly byKind: Readonly<Record<ConfigPatch['applyTo'], OrderedPatch[]>>,
    private readonly listener: GatewayListener,
  ) {}

  private appliesToChain(entry: OrderedPatch, chain: JsonObject): boolean {
    return contextMatches(entry.patch) && listenerMatches(this.listener, entry.patch) && filterChainMatches(chain, entry.patch);
  }

  patch(): GatewayListener {
    const config = cloneJson(this.listener.config);
    const chains = getObjectList(config, 'filter_chains').filter((chain) => this.patchChain(chain));
    const defaultChain = getObject(config, 'default_filter_chain');
    if (defaultChain !== undefined && !this.patchChain(defaultChain)) delete config[fieldKey(config, 'default_filter_chain')];
    for (const entry of this.byKind.FILTER_CHAIN) {
      if (entry.patch.patch.operation !== 'ADD') continue;
      if (!contextMatches(entry.patch) || !listenerMatches(this.listener, entry.patch)) continue;
      chains.push(patchValue(entry.patch));
      entry.report.applications += 1;
    }
    config[fieldKey(config, 'filter_chains')] = chains;
    return { logicalPort: this.listener.logicalPort, config };
  }

  /** Patches one chain in place; false if a FILTER_CHAIN REMOVE dropped it. */
  private patchChain(chain: JsonObject): boolean {
    for (const entry of this.byKind.FILTER_CHAIN) {
      if (entry.patch.patch.operation === 'REMOVE' && this.appliesToChain(entry, chain)) {
        entry.report.applications += 1;
        return false;
      }
    }
    const filtersKey = fieldKey(chain, 'filters');
    let filters = getObjectList(chain, 'filters');
    for (const entry of this.byKind.NETWORK_FILTER) {
      if (!this.appliesToChain(entry, chain)) continue;
      const [next, changed] = applyListOperation(filters, entry.patch, networkFilterAnchor(entry.patch));
      filters = next;
      if (changed) entry.report.applications += 1;
    }
    chain[filtersKey] = filters;
    for (const filter of filters) this.patchNetworkFilter(chain, filter);
    return true;
  }

  private patchNetworkFilter(chain: JsonObject, filter: JsonObject): void {
    for (const entry of this.byKind.NETWORK_FILTER) {
      if (entry.patch.patch.operation !== 'MERGE') continue;
      if (!this.appliesToChain(entry, chain) || !nameMatches(filter, networkFilterAnchor(entry.patch))) continue;
      if (mergeFilter(filter, entry.patch)) entry.report.applications += 1;
    }
    if (getString(filter, 'name') === FILTER_NAME.httpConnectionManager) this.patchHttpFilters(chain, filter);
  }

  private patchHttpFilters(chain: JsonObject, hcm: JsonObject): void {
    const hcmConfig = getObject(hcm, 'typed_config');
    if (hcmConfig === undefined) return;
    const applicable = this.byKind.HTTP_FILTER.filter(
      (entry) => this.appliesToChain(entry, chain) && nameMatches(hcm, networkFilterAnchor(entry.patch)),
    );
    let httpFilters = getObjectList(hcmConfig, 'http_filters');
    for (const entry of applicable) {
      const [next, changed] = applyListOperation(httpFilters, entry.patch, httpFilterAnchor(entry.patch));
      httpFilters = next;
      if (changed) entry.report.applications += 1;
    }
    for (const httpFilter of httpFilters) {
      for (const entry of applicable) {
        if (entry.patch.patch.operation !== 'MERGE' || !nameMatches(httpFilter, httpFilterAnchor(entry.patch))) continue;
        if (mergeFilter(httpFilter, entry.patch)) entry.report.applications += 1;
      }
    }
    hcmConfig[fieldKey(hcmConfig, 'http_filters')] = httpFilters;
  }
}

/**
 * Applies `envoyFilters` (Kubernetes EnvoyFilter objects, as JSON) to the gateway's listeners the
 * way istiod would — approximately, see the module comment.
 */
export function approximateIstioPlacement(
  gateway: GatewayModel,
  envoyFilters: readonly unknown[],
  options: { rootNamespace?: string } = {},
): PlacementResult {
  const { patches, notSelected, extensionConfigs, added } = orderedPatches(gateway, envoyFilters, options.rootNamespace ?? ISTIO_ROOT_NAMESPACE);
  const byKind: Record<ConfigPatch['applyTo'], OrderedPatch[]> = { FILTER_CHAIN: [], NETWORK_FILTER: [], HTTP_FILTER: [] };
  for (const entry of patches) byKind[entry.patch.applyTo].push(entry);
  const listeners = gateway.listeners.map((listener) => new ListenerPatcher(byKind, listener).patch());
  const addedOf = (kind: AddPatch['applyTo']) => added.filter((a) => a.patch.applyTo === kind).map((a) => cloneJson(a.patch.patch.value));
  const clusters = [...gateway.clusters, ...addedOf('CLUSTER')];
  const internalListeners = [...(gateway.internalListeners ?? []), ...addedOf('LISTENER')];
  return {
    gateway: { ...gateway, listeners, clusters, ...(internalListeners.length > 0 ? { internalListeners } : {}) },
    // Added clusters and listeners count as applied once (Istio appends them as they are).
    patches: [...patches.map((entry) => entry.report), ...added.map((a) => a.report)],
    notSelected,
    extensionConfigs,
  };
}
