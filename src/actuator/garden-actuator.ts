// The garden ACL behind Gardener's Extension contract (a `garden`-class Extension that
// gardener-operator writes into the runtime cluster): computes the virtual garden's ACL, writes
// its EnvoyFilter in a ManagedResource of class `seed` in namespace `garden` (which the runtime
// cluster's gardener-resource-manager applies), and is done only once that is applied. Nothing
// is removed because an input is missing: a Gateway not written yet or an unreadable virtual
// garden leaves what is stored as it is.
import type { Logger } from 'pino';
import { normalizeCidrSet } from '../acl/cidr.js';
import { MAX_LISTED_ERRORS } from '../acl/field-errors.js';
import type { GardenAcl } from '../acl/model.js';
import { boundedLines } from '../acl/quote-input.js';
import type { OperatorConfig } from '../config/operator-config.js';
import { stateFor, stateSchema, type ExtensionState } from '../gardener/applied-state.js';
import { GARDEN_EXTENSION, gardenAclFromInventory, type GardenInventory } from '../gardener/garden-acl.js';
import type { Extension } from '../gardener/objects.js';
import { hostsOnEveryGateway } from '../gardener/predicted-api-hosts.js';
import { formatProblem, type Problem } from '../gardener/problems.js';
import type { KubeObjectJson } from '../kube/object-json.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { buildGardenEnvoyFilters, GARDEN_FILTER_NAME } from '../rbac/garden-envoy-filter.js';
import { ReportedProblem, type Actuator, type ActuatorResult } from './actuator.js';
import type { ClusterClient } from './cluster-client.js';
import { ManagedResourceWriter } from './managed-resource-writer.js';

/** In namespace `garden`, next to gardener-operator's own; class `seed` is the runtime cluster's resource manager. */
export const GARDEN_MANAGED_RESOURCE_NAME = 'extension-acl-virtual-garden';

export interface GardenActuatorDeps {
  readonly client: ClusterClient;
  readonly operator: OperatorConfig;
  readonly logger: Logger;
  readonly inventory: () => GardenInventory;
  /** The informer's copy of the ManagedResource in `namespace`, or undefined while it cannot answer. */
  readonly cachedManagedResource?: (namespace: string) => { readonly stored: KubeObjectJson | undefined } | undefined;
  /** A Warning Event on the Extension (`once`: one Event per reason and message). */
  readonly warn: (ext: Extension, reason: string, message: string, once?: boolean) => Promise<void>;
}

export class GardenActuator implements Actuator {
  private readonly managedResources: ManagedResourceWriter;

  constructor(private readonly deps: GardenActuatorDeps) {
    this.managedResources = new ManagedResourceWriter(deps.client, deps.cachedManagedResource, GARDEN_MANAGED_RESOURCE_NAME);
  }

  async reconcile(ext: Extension): Promise<ActuatorResult> {
    const log = this.deps.logger.child({ garden: `${ext.metadata.namespace}/${ext.metadata.name}` });
    const result = gardenAclFromInventory(ext, this.deps.inventory(), this.deps.operator);
    if (result.kind === 'waiting') {
      log.info({ reason: result.reason }, 'the garden ACL waits for an input; what is stored stays');
      return { kind: 'pending', reason: `waiting: ${result.reason}` };
    }
    if (result.kind === 'problem') {
      const description = boundedLines(result.problems.map(formatProblem), MAX_LISTED_ERRORS).join('\n') || 'the garden ACL could not be computed';
      log.warn({ problems: result.problems.length, description }, 'garden ACL not applied; the previous protection stays in place');
      throw new ReportedProblem(description, result.configuration);
    }
    const recorded = stateSchema.safeParse(ext.status?.['state'] ?? {});
    const kept = result.kind === 'egress-unknown' ? keptInForce(result.acl, result.unknown, recorded.data?.applied) : undefined;
    if (kept?.kind === 'not-applicable') {
      log.warn({ description: kept.description }, 'garden ACL not applied: a ManagedSeed’s egress is unknown; the previous protection stays in place');
      throw new ReportedProblem(kept.description, false);
    }
    const known = kept?.acl ?? result.acl;
    if (kept) log.warn({ unknown: kept.description }, 'a ManagedSeed’s egress is unknown: the rule in force stays, with every range it admitted');
    // Without a Gateway the hosts written before stay protected too (a Gateway deleted and written again).
    const gateways = [...new Map(known.sniChains.map((c) => [c.gateway.namespace, c.gateway])).values()];
    const acl = result.ahead ? { ...known, sniChains: [...known.sniChains, ...hostsOnEveryGateway(recorded.data?.sniHosts ?? [], gateways)] } : known;
    if (result.ahead) log.info({ hosts: stateFor(acl).sniHosts }, 'no Gateway for the virtual garden yet; its filter is written ahead for the hosts it will have');
    const state = stateFor(acl);
    const warnings = result.warnings.map(formatProblem);
    // Told once per new ACL (when it is recorded), not on every resync.
    if (warnings.length > 0 && !jsonEqual(recorded.data?.applied ?? null, stateSchema.parse(state).applied ?? null)) {
      log.warn({ warnings }, 'garden ACL applied with warnings');
      await this.deps.warn(ext, 'ACLWarning', boundedLines(warnings, MAX_LISTED_ERRORS).join('\n'));
    }
    // The namespaces written before stay recorded, so a deletion still finds leftovers there.
    const gatewayNamespaces = [...new Set([...state.gatewayNamespaces, ...(recorded.data?.gatewayNamespaces ?? [])])].sort();
    const progress = await this.managedResources.converge(GARDEN_EXTENSION.namespace, buildGardenEnvoyFilters(acl, this.deps.operator.sniPort));
    // Recorded while some egress is unknown: the status changes when it is known again.
    const written = { ...state, gatewayNamespaces, ...(kept ? { managedSeedEgressUnknown: true } : {}) };
    if (progress.kind !== 'applied') {
      const mr = `${GARDEN_EXTENSION.namespace}/${GARDEN_MANAGED_RESOURCE_NAME}`;
      log.info({ managedResource: mr, detail: progress.detail }, 'the virtual garden’s filter is not applied yet');
      return {
        kind: 'pending',
        reason: `ACL recorded; waiting for gardener-resource-manager to apply ManagedResource ${mr}`,
        state: written,
        ...(progress.kind === 'failed' ? { problem: `gardener-resource-manager could not apply ManagedResource ${mr} (the virtual garden’s SNI filter): ${progress.detail}` } : {}),
      };
    }
    if (kept) {
      await this.deps.warn(ext, 'ManagedSeedEgressUnknown', kept.description, true);
      return { kind: 'done', state: written, description: `the ACL in force stays, admitting every range it admitted, until every ManagedSeed’s egress is known: ${kept.description}` };
    }
    return { kind: 'done', state: written };
  }

  restore(ext: Extension): Promise<ActuatorResult> {
    return this.reconcile(ext);
  }

  delete(ext: Extension): Promise<ActuatorResult> {
    return this.remove(ext, false);
  }

  forceDelete(ext: Extension): Promise<ActuatorResult> {
    return this.remove(ext, true);
  }

  /** A garden does not migrate; should gardener-operator ever ask, the filter goes as on delete. */
  migrate(ext: Extension): Promise<ActuatorResult> {
    return this.remove(ext, false);
  }

  private async remove(ext: Extension, force: boolean): Promise<ActuatorResult> {
    if ((await this.managedResources.remove(GARDEN_EXTENSION.namespace)) === 'deleting' && !force) {
      return { kind: 'pending', reason: `waiting for gardener-resource-manager to delete the filter of ManagedResource ${GARDEN_EXTENSION.namespace}/${GARDEN_MANAGED_RESOURCE_NAME}` };
    }
    // A ManagedResource someone else deleted kept its filter (keepObjects): it goes now.
    const recorded = stateSchema.safeParse(ext.status?.['state'] ?? {});
    for (const namespace of recorded.success ? recorded.data.gatewayNamespaces : []) {
      await this.deps.client.delete({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: GARDEN_FILTER_NAME, namespace });
    }
    this.deps.logger.info({ garden: `${ext.metadata.namespace}/${ext.metadata.name}`, force }, 'the virtual garden’s ACL filter removed');
    return { kind: 'done' };
  }
}

type Kept = { readonly kind: 'kept'; readonly acl: GardenAcl; readonly description: string } | { readonly kind: 'not-applicable'; readonly description: string };

/**
 * While some ManagedSeed's egress is unknown, an ACL computed without it could lock that gardenlet
 * out; refusing to reconcile would instead hold up gardener-operator's Garden reconcile before the
 * virtual garden's kube-apiserver (lifecycle BeforeKubeAPIServer), which may be what needs
 * repairing. So the rule in force stays in force, admitting every range it admitted (a seed's last
 * known egress among them) plus what is known now; only a changed rule waits.
 */
function keptInForce(acl: GardenAcl, unknown: readonly Problem[], inForce: ExtensionState['applied']): Kept {
  const description = boundedLines(unknown.map(formatProblem), MAX_LISTED_ERRORS).join('\n');
  if (!inForce) return { kind: 'not-applicable', description };
  const ruleOf = (rule: GardenAcl['rule']) => stateFor({ rule, alwaysAllowed: [], sniChains: [] }).applied.rule;
  if (!jsonEqual(ruleOf(acl.rule), ruleOf(inForce.rule))) {
    return { kind: 'not-applicable', description: `${description}\nthe changed rule is applied once every ManagedSeed’s egress is known; until then the rule in force stays` };
  }
  return { kind: 'kept', acl: { ...acl, alwaysAllowed: normalizeCidrSet([...acl.alwaysAllowed, ...inForce.alwaysAllowed]) }, description };
}
