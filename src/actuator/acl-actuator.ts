// The ACL work behind Gardener's Extension contract: computes a shoot's ACL, writes its
// ManagedResource and checks that every path holds it as stored (the per-shoot filters through
// the resource manager, the combined CONNECT filters, the legacy apiserver-proxy filters); delete
// and migrate take the shoot's filters away. The generic reconciler turns the results into the
// Extension's status; nothing here writes the Extension.
import type { Logger } from 'pino';
import { MAX_LISTED_ERRORS } from '../acl/field-errors.js';
import type { OperatorConfig } from '../config/operator-config.js';
import { boundedLines } from '../acl/quote-input.js';
import type { ShootAcl } from '../acl/model.js';
import type { Extension } from '../gardener/objects.js';
import { hostsOnEveryGateway } from '../gardener/predicted-api-hosts.js';
import { formatProblem } from '../gardener/problems.js';
import { seedContext, shootAclFromInventory, type SeedInventory } from '../gardener/seed-acl.js';
import { isNotFound } from '../kube/errors.js';
import type { KubeObjectJson } from '../kube/object-json.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { legacyProxyPatch, type LegacyProxyAcl } from '../rbac/legacy-proxy-patch.js';
import { buildShootEnvoyFilters, shootFilterName, tunnelHopFilterName } from '../rbac/shoot-envoy-filters.js';
import { ReportedProblem, type Actuator, type ActuatorResult } from './actuator.js';
import { appliedFromState, stateFor, stateSchema, type AppliedAcl } from '../gardener/applied-state.js';
import type { ClusterClient, ObjectRef } from './cluster-client.js';
import type { CombinedProtection } from './combined-syncer.js';
import { MANAGED_RESOURCE_NAME, type ManagedResourceProgress } from './managed-resource.js';
import { ManagedResourceWriter } from './managed-resource-writer.js';
import { retireReferenceManagedResource } from './reference-extension.js';
import { nextTunnelState, recordedTunnelState, tunnelStateFromRecord, type TunnelState } from './tunnel-generation.js';

export interface AclActuatorDeps {
  readonly client: ClusterClient;
  readonly operator: OperatorConfig;
  /** The informer caches as a seed inventory for one shoot namespace: the seed-wide objects and those `shootInventoryNamespaces` names. */
  readonly inventory: (namespace: string) => SeedInventory;
  readonly logger: Logger;
  /** Whether some stored combined CONNECT filter still holds a policy of this shoot. */
  readonly combinedHolds: (technicalID: string) => boolean;
  /** Ask for a combined rebuild soon (coalesced). */
  readonly combinedChanged: () => void;
  /** Where the stored combined filters do not protect `shoot` as recorded, and why, if known. */
  readonly combinedProtection: (shoot: AppliedAcl) => CombinedProtection;
  /** Reconcile `ext` again when the stored combined filters change. */
  readonly awaitCombined: (ext: Extension) => void;
  /** Gateway namespaces whose stored tunnel hop lacks the shoot's chain of `generation` (tunnelRevocation hop). */
  readonly tunnelHopMissing: (technicalID: string, generation: number) => readonly string[];
  /** A Warning Event on the Extension: admitted, but the owner should know. */
  readonly warn: (ext: Extension, reason: string, message: string, once?: boolean) => Promise<void>;
  /**
   * True when an informer has listed objects of this kind and holds none at `ref`: a live GET
   * would only confirm the absence, and one created later brings the shoot back through the
   * watch. False whenever the caches cannot tell (not listed yet, a kind not cached).
   */
  readonly surelyAbsent?: (ref: ObjectRef) => boolean;
  /**
   * The informer's copy of the shoot's ManagedResource (`stored` undefined: it holds none), or
   * undefined while the cache cannot answer (not listed yet).
   */
  readonly cachedManagedResource?: (namespace: string) => { readonly stored: KubeObjectJson | undefined } | undefined;
}

/** Names Gardener gave its per-shoot EnvoyFilter for the legacy apiserver-proxy port over the releases. */
function legacyProxyFilterNames(technicalID: string): string[] {
  return [technicalID, `${technicalID}-apiserver-proxy`];
}


const DONE: ActuatorResult = { kind: 'done' };

export class AclActuator implements Actuator {
  private readonly managedResources: ManagedResourceWriter;

  constructor(private readonly deps: AclActuatorDeps) {
    this.managedResources = new ManagedResourceWriter(deps.client, deps.cachedManagedResource);
  }

  private log(ext: Extension): Logger {
    return this.deps.logger.child({ shoot: ext.metadata.namespace });
  }

  /**
   * Succeeded means protected as stored: the result is `pending` until the stored combined
   * CONNECT filters (built from the recorded state) and the legacy apiserver-proxy filters
   * (admitted by the webhook from the recorded state) hold the ACL computed now.
   */
  async reconcile(ext: Extension): Promise<ActuatorResult> {
    const log = this.log(ext);
    const ctx = seedContext(this.deps.inventory(ext.metadata.namespace), this.deps.operator);
    const result = shootAclFromInventory(ext, ctx);
    const errors = [...ctx.problems, ...result.problems].filter((p) => p.severity === 'error');
    if (!result.acl || errors.length > 0) {
      const description = boundedLines(errors.map(formatProblem), MAX_LISTED_ERRORS).join('\n') || 'the ACL could not be computed';
      log.warn({ problems: errors.length, description }, 'ACL not applied; the previous protection stays in place');
      throw new ReportedProblem(description, result.configurationProblem);
    }
    const acl = result.acl;
    const recorded = stateSchema.safeParse(ext.status?.['state'] ?? {});
    let state: ReturnType<typeof stateFor> & { tunnels?: unknown; hopNamespaces?: string[] } = stateFor(acl);
    // Per-shoot hops of earlier versions: where the deletion still looks for leftovers.
    if (recorded.success && recorded.data.hopNamespaces.length > 0) state = { ...state, hopNamespaces: recorded.data.hopNamespaces };
    let perShoot: ManagedResourceProgress = { kind: 'applied' };
    const applied = appliedFromState(ext.metadata.namespace, state);
    const protection: CombinedProtection = applied ? this.deps.combinedProtection(applied) : { uncovered: [], problem: undefined };
    // Registered before the writes below, so a change of the combined filters meanwhile wakes this shoot.
    if (protection.uncovered.length > 0) this.deps.awaitCombined(ext);
    // Without a Gateway nothing is written, so the generation is not moved either (see below).
    const tunnels =
      this.deps.operator.tunnelRevocation === 'hop' && applied && !result.noGateways ? this.nextTunnels(ext, recorded.data?.tunnels, applied, protection.uncovered.length === 0) : undefined;
    const warnings = result.problems.filter((p) => p.severity === 'warning').map(formatProblem);
    // Told once per new ACL (when it is recorded), not on every resync.
    if (warnings.length > 0 && !jsonEqual(recorded.data?.applied ?? null, stateSchema.parse(state).applied ?? null)) {
      log.warn({ warnings }, 'ACL applied with warnings');
      await this.deps.warn(ext, 'ACLWarning', boundedLines(warnings, MAX_LISTED_ERRORS).join('\n'));
    }
    // The shoot's own filters need the seed's gateways and observability chain, no other shoot.
    const filterSeed = { operator: this.deps.operator, gateways: ctx.gateways, observabilityWildcards: ctx.observabilityWildcards, shoots: [] };
    if (result.noGateways) {
      // Not yet deployed (or being deleted): the filters go on every gateway for the hosts the
      // Gateway will have, so its chain is protected from the moment Istio serves it.
      // The recorded tunnel generation stays as recorded: the tightening is compared once the
      // shoot is deployed (tunnels opened before still count as admitted by the earlier ACL).
      // The hosts written before stay too (a Gateway the cache has not seen yet, a restored shoot).
      const previous = recorded.success ? recorded.data : undefined;
      const ahead: ShootAcl = { ...acl, sniChains: [...acl.sniChains, ...hostsOnEveryGateway(previous?.sniHosts ?? [], ctx.gateways)] };
      perShoot = await this.managedResources.converge(ext.metadata.namespace, buildShootEnvoyFilters(ahead, filterSeed));
      const written = stateFor(ahead);
      state = {
        ...state,
        gatewayNamespaces: [...new Set([...written.gatewayNamespaces, ...(previous?.gatewayNamespaces ?? [])])].sort(),
        sniHosts: written.sniHosts,
        ...(previous?.tunnels !== undefined ? { tunnels: previous.tunnels } : {}),
      };
      log.info({ hosts: written.sniHosts }, 'no Gateway in the shoot namespace yet; its filter is written ahead on every gateway for the hosts it will have');
    } else {
      perShoot = await this.managedResources.converge(ext.metadata.namespace, buildShootEnvoyFilters(acl, filterSeed));
      // The combined syncer writes the shoot's hop chain of this generation from the recorded state.
      if (tunnels) state = { ...state, tunnels: recordedTunnelState(tunnels) };
    }

    if (applied) {
      const { uncovered, problem } = protection;
      if (uncovered.length > 0) {
        this.deps.awaitCombined(ext);
        this.deps.combinedChanged();
        const paths = boundedLines(uncovered, 4).join(', ');
        // Told once, when it first shows on the Extension: it lasts until the operator acts.
        const reported = (ext.status?.['lastError'] as { description?: unknown } | undefined)?.description;
        if (protection.unplaced !== undefined && (typeof reported !== 'string' || !reported.includes(protection.unplaced))) {
          log.error({ paths: uncovered.length }, `the shoot fits no part of the combined CONNECT filters: ${protection.unplaced}`);
          await this.deps.warn(ext, 'ACLNotEnforced', `the ACL is not enforced on the CONNECT paths (${paths}): ${protection.unplaced}; the seed's operator can fix it`, true);
        }
        return {
          kind: 'pending',
          reason: `ACL recorded; waiting for the combined CONNECT filters on ${paths}`,
          state,
          ...(problem !== undefined ? { problem: `the combined CONNECT filters do not protect this shoot as recorded on ${paths}: ${problem}` } : {}),
        };
      }
    }
    if (tunnels) {
      // A raised generation closes the tunnels only once the gateways' hop holds it.
      const missing = this.deps.tunnelHopMissing(ext.metadata.namespace, tunnels.generation);
      if (missing.length > 0) {
        this.deps.awaitCombined(ext);
        this.deps.combinedChanged();
        return { kind: 'pending', reason: `ACL recorded; waiting for the tunnel hop (generation ${tunnels.generation}) on ${boundedLines(missing, 4).join(', ')}`, state };
      }
    }
    const unverified = await this.triggerLegacyProxyFilters(ext.metadata.namespace, state.gatewayNamespaces, applied);
    if (unverified.length > 0) {
      log.info({ filters: unverified }, 'legacy apiserver-proxy filters not yet admitted with the recorded ACL (the webhook’s cache lags); nudging them again');
      return { kind: 'pending', reason: `ACL recorded; waiting for the legacy apiserver-proxy filters ${unverified.join(', ')}`, state };
    }
    // Stored is not served: the SNI and observability filters exist only once the resource manager
    // has applied this generation. Until then the reference's filters (if any) must stay too.
    if (perShoot.kind !== 'applied') {
      const mr = `${ext.metadata.namespace}/${MANAGED_RESOURCE_NAME}`;
      log.info({ managedResource: mr, detail: perShoot.detail }, 'the per-shoot filters are not applied yet');
      return {
        kind: 'pending',
        // One reason for the whole wait (the detail changes as the resource manager proceeds; each change would be a status write).
        reason: `ACL recorded; waiting for gardener-resource-manager to apply ManagedResource ${mr}`,
        state,
        ...(perShoot.kind === 'failed' ? { problem: `gardener-resource-manager could not apply ManagedResource ${mr} (the per-shoot SNI and observability filters): ${perShoot.detail}` } : {}),
      };
    }
    // Add before remove: only now may the reference extension's filters of this shoot go.
    if (await retireReferenceManagedResource(this.deps.client, ext.metadata.namespace, this.deps.surelyAbsent)) {
      log.info('deleted the reference extension’s ManagedResource acl-seed; this controller protects the shoot');
    }
    return { kind: 'done', state };
  }

  /** The shoot's tunnel generation after this reconcile (tunnelRevocation hop); a raise is logged. */
  private nextTunnels(ext: Extension, recordedTunnels: unknown, applied: AppliedAcl, stored: boolean): TunnelState {
    const previous = tunnelStateFromRecord(recordedTunnels);
    const tunnels = nextTunnelState({ previous, recordedBefore: appliedFromState(ext.metadata.namespace, ext.status?.['state']), now: applied, stored });
    if (previous !== undefined && tunnels.generation !== previous.generation) {
      this.log(ext).info(
        { generation: tunnels.generation },
        tunnels.raiseFrom === undefined
          ? 'the rule admits fewer clients than before and the CONNECT filters hold it: the shoot’s VPN tunnels close at the end of the gateways’ drain time'
          : 'the rule admits fewer clients than before: the shoot’s VPN tunnels close at the end of the gateways’ drain time once the CONNECT filters hold it',
      );
    }
    return tunnels;
  }

  /** status.state came along from the previous seed; the combined filters are rebuilt from it first. */
  restore(ext: Extension): Promise<ActuatorResult> {
    return this.reconcile(ext);
  }

  delete(ext: Extension): Promise<ActuatorResult> {
    return this.remove(ext, false);
  }

  forceDelete(ext: Extension): Promise<ActuatorResult> {
    return this.remove(ext, true);
  }

  migrate(ext: Extension): Promise<ActuatorResult> {
    return this.remove(ext, false);
  }

  /**
   * Gardener's legacy apiserver-proxy EnvoyFilters (< 1.123) get the shoot's RBAC filter from
   * the mutating webhook, which only runs when they are written: an empty merge patch makes
   * the API server admit them again with the ACL the Extension now records (or without it, when
   * the Extension is going away). A filter the webhook created with its refuse-everyone
   * placeholder gets the ACL this way too. Filters that do not exist (newer Gardener), or that
   * already carry exactly the recorded ACL, are skipped without a write.
   *
   * The webhook runs in another process with its own cache, which may still hold the previous ACL
   * (or none): the admitted object is read back and checked against `expected`. Returns the
   * filters that do not carry exactly the RBAC filter `expected` calls for.
   */
  async triggerLegacyProxyFilters(technicalID: string, gatewayNamespaces: readonly string[], expected: LegacyProxyAcl | undefined): Promise<string[]> {
    const unverified: string[] = [];
    for (const namespace of gatewayNamespaces) {
      for (const name of legacyProxyFilterNames(technicalID)) {
        const ref: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name, namespace };
        // Gardener ≥ 1.123 writes none of them: the cache answers, no GET per gateway and name.
        if (this.deps.surelyAbsent?.(ref)) continue;
        // Read live: the webhook's admission (not the cache) decides what the write below must fix.
        const stored = await this.deps.client.get(ref);
        if (!stored) continue;
        const toDo = (filter: unknown) => legacyProxyPatch(filter, (id) => (id === technicalID ? expected : undefined), this.deps.operator.legacyProxyPort);
        // Already as recorded: no write (the watch on these filters would bring the shoot back for nothing).
        if (toDo(stored).length === 0) continue;
        try {
          await this.deps.client.mergePatch(ref, {});
        } catch (error) {
          if (isNotFound(error)) continue;
          throw error;
        }
        const admitted = await this.deps.client.get(ref);
        if (!admitted) continue;
        if (toDo(admitted).length > 0) unverified.push(`${namespace}/${name}`);
      }
    }
    return unverified;
  }

  /** Delete and migrate: the shoot's filters disappear from this seed. */
  private async remove(ext: Extension, force: boolean): Promise<ActuatorResult> {
    const { client } = this.deps;
    const namespace = ext.metadata.namespace;
    // The resource manager deletes the applied filters, then its finalizer: until the
    // ManagedResource is gone the filters may still be stored (its informer brings the
    // Extension back here when the ManagedResource goes).
    if ((await this.managedResources.remove(namespace)) === 'deleting' && !force) {
      return { kind: 'pending', reason: `waiting for gardener-resource-manager to delete the filters of ManagedResource ${namespace}/${MANAGED_RESOURCE_NAME}` };
    }
    // The rebuild itself runs under the work queue's single combined key, never from here: two
    // computations racing could otherwise store the older one last.
    if (!force && this.deps.combinedHolds(namespace)) {
      this.deps.awaitCombined(ext);
      this.deps.combinedChanged();
      return { kind: 'pending', reason: 'waiting for the combined CONNECT filters to drop this shoot' };
    }
    await retireReferenceManagedResource(client, namespace, this.deps.surelyAbsent);
    const recorded = stateSchema.safeParse(ext.status?.['state'] ?? {});
    const gatewayNamespaces = recorded.success ? recorded.data.gatewayNamespaces : [];
    // A ManagedResource someone else deleted kept its filters (keepObjects): they go now, wherever
    // either kind was written (deleting what is not there is harmless).
    const hopNamespaces = recorded.success ? recorded.data.hopNamespaces : [];
    for (const gatewayNamespace of [...new Set([...gatewayNamespaces, ...hopNamespaces])]) {
      await client.delete({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: shootFilterName(namespace), namespace: gatewayNamespace });
    }
    for (const gatewayNamespace of hopNamespaces) {
      await client.delete({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: tunnelHopFilterName(namespace), namespace: gatewayNamespace });
    }
    // Taking the RBAC filter out is not a protection: a lagging webhook that keeps it only delays that.
    await this.triggerLegacyProxyFilters(namespace, gatewayNamespaces, undefined);
    if (force) this.deps.combinedChanged();
    this.log(ext).info({ force }, 'ACL filters removed from this seed');
    return DONE;
  }
}
