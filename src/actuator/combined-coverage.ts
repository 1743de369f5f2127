// What the stored combined CONNECT filters actually enforce, read back from the objects the API
// server holds (never from a memory of our own writes). A shoot counts as protected on a gateway
// and port only if some stored filter there is shaped as the generator writes it (first HTTP
// filter on that port, RBAC action DENY, the gateway's workload selector) and holds a policy for
// the shoot. Everything another writer may have changed is parsed defensively.
import { z } from 'zod';
import type { EnvoyFilterObject } from '../gardener/objects.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { HTTP_RBAC_TYPE } from '../rbac/envoy-rbac-types.js';
import { combinedEntries, type PolicyEntry } from '../rbac/filter-values.js';
import type { GatewayWorkload } from '../acl/model.js';
import { perObject } from '../json/per-object.js';

/** How coverage reads one form's stored objects (see combined-forms.ts). */
export interface CombinedFormReader {
  storedShards(filter: EnvoyFilterObject): readonly { readonly port: number; readonly entries: ReadonlyMap<string, PolicyEntry<unknown>> }[];
  /** Whether what the shard named `shard` relies on at the gateway and port is stored as written. */
  supportStored(stored: readonly EnvoyFilterObject[], gateway: GatewayWorkload, port: number, shard: string): boolean;
}

const HCM = 'envoy.filters.network.http_connection_manager';

const storedPatchSchema = z.looseObject({
  applyTo: z.literal('HTTP_FILTER'),
  match: z.looseObject({
    context: z.literal('GATEWAY').optional(),
    listener: z.looseObject({
      portNumber: z.number().int(),
      filterChain: z.looseObject({ filter: z.looseObject({ name: z.literal(HCM) }) }),
    }),
  }),
  patch: z.looseObject({
    operation: z.literal('INSERT_FIRST'),
    value: z.looseObject({
      typed_config: z.looseObject({
        '@type': z.literal(HTTP_RBAC_TYPE),
        rules: z.looseObject({ action: z.literal('DENY'), policies: z.record(z.string(), z.unknown()) }),
        // Audit-mode shoots: counted, not enforced.
        shadow_rules: z.looseObject({ action: z.literal('DENY'), policies: z.record(z.string(), z.unknown()) }).optional(),
      })
        // With a matcher Envoy ignores the rules: such a filter protects nobody as recorded.
        .refine((config) => !('matcher' in config) && !('shadow_matcher' in config)),
    }),
  }),
});

const storedSpecSchema = z.looseObject({
  workloadSelector: z.looseObject({ labels: z.record(z.string(), z.string()) }).optional(),
  configPatches: z.array(z.unknown()).default([]),
});

/** Gateway namespace → port → technical ID → the stored entries (policy and mode) for that shoot (one per shard that has it). */
export type StoredCoverage = ReadonlyMap<string, ReadonlyMap<number, ReadonlyMap<string, readonly PolicyEntry<unknown>[]>>>;

/**
 * Reads the policies the stored combined filters enforce. `selectors` (gateway namespace → the
 * gateway's workload labels), when given, drops filters whose selector no longer picks the
 * gateway (a foreign edit); filters in namespaces without a known selector are counted as stored.
 */
export function storedCoverage(
  filters: readonly EnvoyFilterObject[],
  selectors?: ReadonlyMap<string, Readonly<Record<string, string>>>,
  form: CombinedFormReader = { storedShards: storedPatches, supportStored: () => true },
): StoredCoverage {
  const byNamespace = new Map<string, Map<number, Map<string, PolicyEntry<unknown>[]>>>();
  const supported = new Map<string, boolean>();
  for (const filter of filters) {
    const namespace = filter.metadata.namespace;
    const selector = selectors?.get(namespace);
    if (selector && !jsonEqual(storedSelector(filter) ?? {}, selector)) continue;
    for (const { port, entries } of form.storedShards(filter)) {
      // A shard whose supporting objects are missing or changed does not protect as recorded (matcher form: it refuses every request naming a shoot).
      const gatewaySelector = selector ?? storedSelector(filter) ?? {};
      const supportKey = `${namespace}:${port}:${filter.metadata.name}:${JSON.stringify(gatewaySelector)}`;
      if (!supported.has(supportKey)) supported.set(supportKey, form.supportStored(filters, { namespace, selector: gatewaySelector }, port, filter.metadata.name));
      if (!supported.get(supportKey)) continue;
      const ports = byNamespace.get(namespace) ?? new Map<number, Map<string, PolicyEntry<unknown>[]>>();
      byNamespace.set(namespace, ports);
      const shoots = ports.get(port) ?? new Map<string, PolicyEntry<unknown>[]>();
      ports.set(port, shoots);
      for (const [id, entry] of entries) {
        const held = shoots.get(id);
        if (held) held.push(entry);
        else shoots.set(id, [entry]);
      }
    }
  }
  return byNamespace;
}

/** The workload labels a stored filter selects; undefined when it has none or an unreadable spec. */
export const storedSelector = perObject((filter: EnvoyFilterObject): Readonly<Record<string, string>> | undefined => storedSpecSchema.safeParse(filter.spec).data?.workloadSelector?.labels);

/** The patches of one stored filter (shaped as the generator writes them): port and entries by technical ID. */
export const storedPatches = perObject((filter: EnvoyFilterObject): readonly { readonly port: number; readonly entries: ReadonlyMap<string, PolicyEntry<unknown>> }[] => {
  const spec = storedSpecSchema.safeParse(filter.spec);
  if (!spec.success) return [];
  return spec.data.configPatches.flatMap((raw) => {
    const patch = storedPatchSchema.safeParse(raw);
    return patch.success ? [{ port: patch.data.match.listener.portNumber, entries: combinedEntries(patch.data.patch.value.typed_config) }] : [];
  });
});

/** Every entry one stored filter holds, by technical ID (the last patch wins for a shoot listed twice). */
export function storedEntries(filter: EnvoyFilterObject): ReadonlyMap<string, PolicyEntry<unknown>> {
  return new Map(storedPatches(filter).flatMap((p) => [...p.entries]));
}

/** Where a shoot is not protected as stored: `<gateway namespace>:<port>` entries, empty when protected everywhere. */
export function uncoveredPaths(
  coverage: StoredCoverage,
  technicalID: string,
  expected: PolicyEntry<unknown>,
  gatewayNamespaces: readonly string[],
  ports: readonly number[],
): string[] {
  const missing: string[] = [];
  for (const namespace of gatewayNamespaces) {
    for (const port of ports) {
      const stored = coverage.get(namespace)?.get(port)?.get(technicalID) ?? [];
      if (!stored.some((entry) => jsonEqual(entry, expected))) missing.push(`${namespace}:${port}`);
    }
  }
  return missing;
}

/** Technical IDs that have a policy in at least one stored shard, per gateway namespace and port. */
export function storedShoots(coverage: StoredCoverage, namespace: string, port: number): ReadonlySet<string> {
  return new Set(coverage.get(namespace)?.get(port)?.keys() ?? []);
}
