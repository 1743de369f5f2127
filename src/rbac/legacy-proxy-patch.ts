import type { Operation } from 'fast-json-patch';
import { z } from 'zod';
import type { Cidr } from '../acl/cidr.js';
import { normalizeCidrSet } from '../acl/cidr.js';
import type { AclRule } from '../acl/acl-rule.js';
import { jsonEqual } from './deep-equal.js';
import { FILTER_NAMES, networkDenyFilter, shootStatPrefix } from './filter-values.js';
import { notAdmittedPrincipal } from './principals.js';

/** Gardener names its per-shoot legacy apiserver-proxy filters `<technical ID>` and `<technical ID>-apiserver-proxy`. */
export const LEGACY_FILTER_PREFIX = 'shoot-';

const TCP_PROXY = 'envoy.filters.network.tcp_proxy';
// The chain forwards to the shoot's kube-apiserver Service, or, with Istio TLS termination
// (Gardener 1.114-1.122), to the listener Gardener adds for it on an abstract socket.
const KUBE_APISERVER_CLUSTERS = [
  /^outbound\|443\|\|kube-apiserver\.(shoot-[a-z0-9-]+)\.svc\.cluster\.local$/,
  /^(shoot-[a-z0-9-]+)--kube-apiserver-socket$/,
];

function shootOfCluster(cluster: string): string | undefined {
  for (const pattern of KUBE_APISERVER_CLUSTERS) {
    const id = pattern.exec(cluster)?.[1];
    if (id) return id;
  }
  return undefined;
}

const namedFilter = z.looseObject({ name: z.string(), typed_config: z.looseObject({ cluster: z.string().optional() }).optional() });
const configPatch = z.looseObject({
  applyTo: z.string().optional(),
  match: z.looseObject({ listener: z.looseObject({ portNumber: z.number().optional(), name: z.string().optional() }).optional() }).optional(),
  patch: z.looseObject({ operation: z.string().optional(), value: z.looseObject({ filters: z.array(z.unknown()).optional() }).optional() }).optional(),
});
const envoyFilterShape = z.looseObject({ spec: z.looseObject({ configPatches: z.array(z.unknown()).optional() }).optional() });

/** The ACL of the shoot a legacy chain leads to, as the webhook's cache knows it. */
export interface LegacyProxyAcl {
  readonly rule: AclRule;
  readonly alwaysAllowed: readonly Cidr[];
  readonly legacyProxyAllowed: readonly Cidr[];
}

export interface LegacyChainTarget {
  /** Index into spec.configPatches. */
  readonly patchIndex: number;
  readonly technicalID: string;
}

/**
 * Gardener's per-shoot chains on the legacy apiserver-proxy port: `FILTER_CHAIN` ADD patches on
 * that port whose filters end in a tcp_proxy to the shoot's kube-apiserver cluster. The shoot
 * is read from the cluster the chain forwards to, so the decision follows the real destination.
 */
export function findLegacyChains(envoyFilter: unknown, legacyPort: number): LegacyChainTarget[] {
  const parsed = envoyFilterShape.safeParse(envoyFilter);
  if (!parsed.success) return [];
  const targets: LegacyChainTarget[] = [];
  (parsed.data.spec?.configPatches ?? []).forEach((raw, patchIndex) => {
    const p = configPatch.safeParse(raw);
    if (!p.success || p.data.applyTo !== 'FILTER_CHAIN' || p.data.patch?.operation !== 'ADD') return;
    const listener = p.data.match?.listener;
    if (listener?.portNumber !== legacyPort && listener?.name !== `0.0.0.0_${legacyPort}`) return;
    for (const filter of p.data.patch.value?.filters ?? []) {
      const f = namedFilter.safeParse(filter);
      if (!f.success || f.data.name !== TCP_PROXY) continue;
      const id = shootOfCluster(f.data.typed_config?.cluster ?? '');
      if (id) targets.push({ patchIndex, technicalID: id });
    }
  });
  return targets;
}

/**
 * What the webhook knows of a shoot whose Extension is active but whose recorded ACL it cannot read
 * (status.state missing or unreadable): its legacy chain keeps the RBAC filter it had, never loses it.
 */
export const KEEP_AS_STORED = 'keep-as-stored';

/**
 * For an ACL shoot in a review that is not of a stored legacy filter (a create, or a review made
 * up by someone who can reach the webhook): a filter that refuses every client, so the answer
 * reveals no range. The controller's next write of the stored filter brings the shoot's ACL.
 */
export const SEALED = 'sealed';

/** What the webhook knows of the shoot a legacy chain leads to (undefined: no active ACL, the chain stays open). */
export type LegacyAclAnswer = LegacyProxyAcl | typeof KEEP_AS_STORED | typeof SEALED | undefined;

/** The shoot's RBAC filter in its legacy chain of `envoyFilter`, if it has one. */
function storedLegacyFilter(envoyFilter: unknown, technicalID: string, legacyPort: number): unknown {
  for (const target of findLegacyChains(envoyFilter, legacyPort)) {
    if (target.technicalID !== technicalID) continue;
    const patches = (envoyFilter as { spec: { configPatches: { patch: { value: { filters: unknown[] } } }[] } }).spec.configPatches;
    const found = (patches[target.patchIndex]?.patch.value.filters ?? []).find((f) => namedFilter.safeParse(f).data?.name === FILTER_NAMES.legacyProxy);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * RFC 6902 operations that put the shoot's network RBAC filter first in each of its legacy
 * chains (or take it out when the shoot has no ACL): one `replace` of each chain's filter list.
 * Applying them and asking again yields none. For a shoot whose ACL is KEEP_AS_STORED the chain
 * keeps the RBAC filter it carries, or the one it carried in `previous` (the stored object an
 * update replaces: Gardener writes its chains without ours).
 */
export function legacyProxyPatch(
  envoyFilter: unknown,
  aclOf: (technicalID: string) => LegacyAclAnswer,
  legacyPort: number,
  previous?: unknown,
): Operation[] {
  const operations: Operation[] = [];
  const targets = findLegacyChains(envoyFilter, legacyPort);
  if (targets.length === 0) return operations;
  // findLegacyChains only returns targets inside a well-formed spec.configPatches.
  const patches = (envoyFilter as { spec: { configPatches: { patch: { value: { filters: unknown[] } } }[] } }).spec.configPatches;
  for (const { patchIndex, technicalID } of targets) {
    const current = patches[patchIndex]?.patch.value.filters ?? [];
    const others = current.filter((f) => namedFilter.safeParse(f).data?.name !== FILTER_NAMES.legacyProxy);
    const acl = aclOf(technicalID);
    const kept = acl === KEEP_AS_STORED ? (storedLegacyFilter(envoyFilter, technicalID, legacyPort) ?? storedLegacyFilter(previous, technicalID, legacyPort)) : undefined;
    const rbac = acl === KEEP_AS_STORED ? kept : acl === SEALED ? sealedFilter(technicalID) : acl ? legacyProxyFilter(technicalID, acl) : undefined;
    const desired = rbac !== undefined ? [structuredClone(rbac), ...others] : others;
    if (jsonEqual(current, desired)) continue;
    const path = `/spec/configPatches/${patchIndex}/patch/value/filters`;
    operations.push({ op: 'replace', path, value: desired });
  }
  return operations;
}

function sealedFilter(technicalID: string): unknown {
  return structuredClone(
    networkDenyFilter(FILTER_NAMES.legacyProxy, shootStatPrefix('legacy_proxy', technicalID), { [technicalID]: { permissions: [{ any: true }], principals: [{ any: true }] } }, 'enforce'),
  );
}

function legacyProxyFilter(technicalID: string, acl: LegacyProxyAcl): unknown {
  const principal = notAdmittedPrincipal(acl.rule, normalizeCidrSet([...acl.alwaysAllowed, ...acl.legacyProxyAllowed]));
  // A plain JSON copy: the patch travels as JSON and must not share structure with the caller.
  return structuredClone(
    networkDenyFilter(FILTER_NAMES.legacyProxy, shootStatPrefix('legacy_proxy', technicalID), {
      [technicalID]: { permissions: [{ any: true }], principals: [principal] },
    }, acl.rule.mode),
  );
}
