// Wires informers, the work queues and the reconcilers into the running extension controller.
// Keys: `ext:<namespace>/<name>` for one Extension (queue `acl`), `combined` for the seed-wide
// CONNECT filters (queue `acl-combined`, one worker of its own).
import { ApiException, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { GatewayWorkload } from '../acl/model.js';
import type { OperatorConfig } from '../config/operator-config.js';
import {
  clusterSchema,
  configMapSchema,
  deploymentSchema,
  envoyFilterObjectSchema,
  extensionSchema,
  gatewaySchema,
  infrastructureSchema,
  dnsRecordSchema,
  podSchema,
  type Pod,
  type DnsRecord,
  serviceSchema,
  type Cluster,
  type ConfigMap,
  type Deployment,
  type EnvoyFilterObject,
  type Extension,
  type Gateway,
  type Infrastructure,
  type Service,
} from '../gardener/objects.js';
import { PolicyInterner, cachedCluster, cachedManagedResource, cachedDeployment, cachedDnsRecord, cachedExtension, cachedInfrastructure, cachedPod, cachedService, identityOnly, withoutFieldManagement } from '../gardener/cached-views.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import { WATCHED, type WatchedResource } from '../gardener/watched-resources.js';
import { EXTENSION_TYPE, gatewayChangeAffects, seedAclFromInventory, seedGatewayWorkloads, shootInventoryNamespaces, type SeedInventory } from '../gardener/seed-acl.js';
import type { SeedAcl } from '../acl/model.js';
import type { GatewayPod } from '../served/gateway-admin.js';
import { ServedChecker } from '../served/served-checker.js';
import { describeError, retryAfterMs } from '../kube/errors.js';
import { ResilientInformer } from '../kube/informer.js';
import { FenceRefusedError } from '../kube/lease-fence.js';
import { keyOf, kubeObjectJsonSchema, type KubeObjectJson } from '../kube/object-json.js';
import { createWorkQueueMetrics } from '../kube/metrics.js';
import { WorkQueue, type RateLimiterOptions } from '../kube/work-queue.js';
import { WrittenVersions } from '../kube/written-versions.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL } from '../rbac/envoy-filter-types.js';
import { LEGACY_FILTER_PREFIX } from '../rbac/legacy-proxy-patch.js';
import type { ClusterClient } from './cluster-client.js';
import { CombinedSyncer } from './combined-syncer.js';
import { MAX_COMBINED_PACE_MS, combinedSyncDelay, listenerWriteDelay, type CombinedPace } from './combined-pace.js';
import { AclActuator } from './acl-actuator.js';
import { ExtensionReconciler } from './extension-reconciler.js';
import { hasShootClass, shootNeedsForceDeletion, skipReason } from './handled-extensions.js';
import { appliedFromState, stateSchema } from '../gardener/applied-state.js';
import { combinedWaitOver } from './combined-wait.js';
import { MANAGED_RESOURCE_NAME } from './managed-resource.js';
import { CONTROL_PLANE_HEALTHY } from './health-condition.js';
import { REFERENCE_FINALIZER, REFERENCE_MANAGED_RESOURCE, retireReferenceWebhook } from './reference-extension.js';
import { recordWarningEvent } from './events.js';
import { gardenletWaits } from '../gardener/extension-contract.js';

export const COMBINED_KEY = 'combined';

const EXT_PREFIX = 'ext:';
/** How long a pass's write may take to reach the Extension cache before the next pass goes ahead without it. */
const HOLD_FOR_CACHE_MS = 2_000;
/** How often a key woken early (another event) looks again whether the cache shows its last write. */
const CACHE_HOLD_POLL_MS = 20;
/** How long a burst of combined filter events is gathered before the shoots waiting for them look again. */
const AWAITING_COMBINED_WAKE_MS = 200;

export interface ControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly client: ClusterClient;
  readonly operator: OperatorConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  // workers, resyncPeriodMs and combinedMinIntervalMs have no fallback here: the command passes its
  // flags and the tests CONTROLLER_DEFAULTS, so no caller runs a pace the chart does not ship.
  readonly workers: number;
  /** Every Extension is reconciled again this often (no writes when nothing changed). */
  readonly resyncPeriodMs: number;
  /**
   * Least time between two writes that change a stored CONNECT listener: each makes Envoy drain
   * every tunnel on it (docs/developers/envoy-listener-updates.md), so changes of many shoots are coalesced
   * into one write. Every write of the rules and matcher forms is one; of the ecds form only the
   * listener parts (protected headers, ports or bucket count changed). Repairs and objects that
   * are missing never wait for it.
   */
  readonly combinedMinIntervalMs: number;
  /** A watch silent this long is re-opened (default 90 s; tests shorten it to exercise half-open watches). */
  readonly watchIdleTimeoutMs?: number;
  readonly now?: () => Date;
  /**
   * The Extension queue's per-key backoff (default client-go's: 5 ms, doubling up to 1,000 s). A
   * shoot waiting for the combined filters is woken by their events; the backoff is its fallback.
   */
  readonly retryBackoff?: RateLimiterOptions;
  /**
   * The served check (src/served): every `intervalMs` each gateway pod's Envoy is read and every
   * ACL shoot's protection judged on it. Absent: not checked (the status says stored only).
   */
  readonly servedCheck?: {
    readonly intervalMs: number;
    /** Largest read of one gateway pod (default DEFAULT_SERVED_READ_BYTES). */
    readonly maxReadBytes?: number;
    /** Reads a gateway pod's Envoy (default: the API server's port-forward to its admin port). */
    readonly readDump?: (pod: GatewayPod, signal: AbortSignal, maxBytes: number) => Promise<unknown>;
  };
}

/** What every informer offers for start-up, readiness and shutdown. */
interface CacheLifecycle {
  start(): Promise<void>;
  stop(): Promise<void>;
  hasSynced(): boolean;
}

export class AclController {
  /** Extension keys, served by `workers` workers. */
  private readonly queue: WorkQueue;
  /**
   * The combined key alone, served by one worker of its own: behind thousands of Extension keys in
   * one FIFO, a combined sync (which every pending shoot waits for) would run once per pass over
   * the whole seed.
   */
  private readonly combinedQueue: WorkQueue;
  private readonly informers: {
    extensions: ResilientInformer<Extension>;
    clusters: ResilientInformer<Cluster>;
    infrastructures: ResilientInformer<Infrastructure>;
    dnsRecords: ResilientInformer<DnsRecord>;
    gateways: ResilientInformer<Gateway>;
    deployments: ResilientInformer<Deployment>;
    services: ResilientInformer<Service>;
    gatewayPods: ResilientInformer<Pod>;
    configMaps: ResilientInformer<ConfigMap>;
    envoyFilters: ResilientInformer<EnvoyFilterObject>;
    legacyFilters: ResilientInformer<KubeObjectJson>;
    managedResources: ResilientInformer<KubeObjectJson>;
    referenceManagedResources: ResilientInformer<KubeObjectJson>;
  };
  private readonly reconciler: ExtensionReconciler;
  private readonly combined: CombinedSyncer;
  private readonly reconcileTotal: Counter;
  private readonly reconcileErrors: Counter;
  private readonly reconcileTime: Histogram;
  private workersRunning = false;
  private readonly served: ServedChecker | undefined;
  private inFlight = 0;
  private resyncTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  /** When a combined write last changed a CONNECT listener (performance.now()); undefined before the first. */
  private lastListenerWrite: number | undefined;
  /** The last combined sync's end and duration (see combinedSyncDelay). */
  private combinedPace: CombinedPace | undefined;
  /**
   * A stored combined filter changed in a way we did not write (a foreign delete or edit): the
   * next sync repairs it and does not wait for the pace, which only spreads our own work.
   */
  private combinedRepairDue = false;
  private readonly workerLoops: Promise<void>[] = [];
  /** Extension keys whose last reconcile waits for the combined filters to protect them as recorded. */
  private readonly awaitingCombined = new Set<string>();
  /** Per Extension (`namespace/name`), what its last pass wrote, until the cache shows it (see heldForCache). */
  private readonly extensionWrites = new WrittenVersions({ holdMs: HOLD_FOR_CACHE_MS });
  /** Pending wake of the shoots in awaitingCombined (see wakeAwaitingCombinedSoon). */
  private awaitingWake: NodeJS.Timeout | undefined;
  /** The gateways' selectors when a pod last changed them (see gatewayPods). */
  private lastGatewaySelectors: string | undefined;

  constructor(private readonly options: ControllerOptions) {
    const { kubeConfig, logger, registry } = options;
    this.queue = new WorkQueue({ name: 'acl', metrics: createWorkQueueMetrics(registry), ...(options.retryBackoff ? { rateLimiter: options.retryBackoff } : {}) });
    // A failing combined sync is retried at most MAX_COMBINED_PACE_MS apart: every stored change
    // during a lasting refusal counts as a failure, and with client-go's 1,000 s cap a burst of
    // them (a hundred deleted buckets) held the repair for a quarter of an hour after the refusal ended.
    this.combinedQueue = new WorkQueue({ name: 'acl-combined', metrics: createWorkQueueMetrics(registry), rateLimiter: { maxDelayMs: MAX_COMBINED_PACE_MS } });
    const informer = <T extends { metadata: { name: string; namespace?: string } }>(
      watched: WatchedResource,
      parse: (raw: unknown) => T | undefined,
      onChange: (event: 'add' | 'update' | 'delete', obj: T, old?: T) => void,
      keep?: (obj: T) => boolean,
    ): ResilientInformer<T> =>
      new ResilientInformer<T>({
        kubeConfig,
        path: watched.path,
        parse,
        onChange,
        ...(keep ? { keep } : {}),
        ...(watched.labelSelector ? { labelSelector: watched.labelSelector } : {}),
        ...(watched.fieldSelector ? { fieldSelector: watched.fieldSelector } : {}),
        ...(watched.listPageSize ? { listPageSize: watched.listPageSize } : {}),
        logger,
        ...(options.watchIdleTimeoutMs ? { watchIdleTimeoutMs: options.watchIdleTimeoutMs } : {}),
      });
    // The caches keep only what is read (cached-views.ts).
    const policies = new PolicyInterner();
    const slim = <T extends { metadata: Cluster['metadata'] }>(parsed: T | undefined): T | undefined => parsed && withoutFieldManagement(parsed);

    this.informers = {
      // Only acl Extensions are cached: nothing of the other types (four or more per shoot) is read.
      extensions: informer(
        WATCHED.extensions,
        (raw) => mapDefined(extensionSchema.safeParse(raw).data, cachedExtension),
        (_e, ext) => {
          if (!hasShootClass(ext)) return;
          // What gardenlet waits for (3 minutes at most) goes before resyncs and repairs of nothing.
          this.queue.add(`${EXT_PREFIX}${ext.metadata.namespace}/${ext.metadata.name}`, gardenletWaits(ext));
          this.combinedQueue.add(COMBINED_KEY);
        },
        (ext) => ext.spec.type === EXTENSION_TYPE,
      ),
      clusters: informer(WATCHED.clusters, (raw) => mapDefined(clusterSchema.safeParse(raw).data, cachedCluster), (_e, c) => this.enqueueNamespace(c.metadata.name)),
      infrastructures: informer(WATCHED.infrastructures, (raw) => mapDefined(infrastructureSchema.safeParse(raw).data, cachedInfrastructure), (event, infra, old) => {
        const egress = (i?: typeof infra) => JSON.stringify([...(i?.status?.egressCIDRs ?? [])].sort());
        if (event !== 'update' || egress(infra) !== egress(old)) this.enqueueNamespace(infra.metadata.namespace);
      }),
      // Only a shoot without a Gateway reads them, but a new name must reach it before the Gateway does.
      dnsRecords: informer(WATCHED.dnsRecords, (raw) => mapDefined(dnsRecordSchema.safeParse(raw).data, cachedDnsRecord), (event, record, old) => {
        if (event !== 'update' || record.spec.name !== old?.spec.name) this.enqueueNamespace(record.metadata.namespace);
      }),
      gateways: informer(WATCHED.gateways, (raw) => slim(gatewaySchema.safeParse(raw).data), (_e, g) => {
        if (g.metadata.namespace.startsWith('shoot-')) this.enqueueNamespace(g.metadata.namespace);
        else this.enqueueAll();
      }),
      // A gateway's status changes all day (replicas, readiness, HPA): the cached views leave it out,
      // so only a change of what is read (selector, labels, existence, load balancer mode) requeues,
      // and only the shoots whose written filters can depend on that gateway (gatewayChangeAffects).
      deployments: informer(WATCHED.gatewayDeployments, (raw) => mapDefined(deploymentSchema.safeParse(raw).data, cachedDeployment), (event, d, old) => {
        if (event !== 'update' || !jsonEqual(d, old)) this.enqueueShootsOfGateways([d, ...(old ? [old] : [])]);
      }),
      services: informer(WATCHED.gatewayServices, (raw) => mapDefined(serviceSchema.safeParse(raw).data, cachedService), (event, svc, old) => {
        if (event !== 'update' || !jsonEqual(svc, old)) this.enqueueShootsOfGateways(this.informers.deployments.list(svc.metadata.namespace));
      }),
      // Pods come and go with every rollout and scale: only a change of a gateway's selector matters.
      gatewayPods: informer(WATCHED.gatewayPods, (raw) => mapDefined(podSchema.safeParse(raw).data, cachedPod), () => {
        const selectors = JSON.stringify(this.gateways());
        if (selectors === this.lastGatewaySelectors) return;
        this.lastGatewaySelectors = selectors;
        this.enqueueAll();
        this.combinedQueue.add(COMBINED_KEY);
      }),
      configMaps: informer(WATCHED.kubeSystemConfigMaps, (raw) => slim(configMapSchema.safeParse(raw).data), (_e, cm) => {
        if (cm.metadata.name === 'shoot-info') this.enqueueAll();
      }),
      envoyFilters: informer(
        { ...WATCHED.envoyFilters, labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY},${ROLE_LABEL}=connect` },
        (raw) => mapDefined(slim(envoyFilterObjectSchema.safeParse(raw).data), (filter) => policies.intern(filter)),
        (event, filter) => {
          if (!this.combined.isOwnWrite(event, filter)) this.combinedRepairDue = true;
          this.combinedQueue.add(COMBINED_KEY);
          this.wakeAwaitingCombinedSoon();
        },
      ),
      // Gardener's legacy apiserver-proxy filters (`<id>`, `<id>-apiserver-proxy`): the webhook puts
      // an ACL shoot's ranges only into an update of a stored one (a create gets a filter that
      // refuses everyone), so a new or rewritten one brings the shoot back for the controller's
      // update; its reconcile writes only a filter that does not carry the recorded ACL.
      legacyFilters: informer(
        WATCHED.foreignEnvoyFilters,
        (raw) => mapDefined(kubeObjectJsonSchema.safeParse(raw).data, identityOnly),
        (_e, filter) => this.enqueueNamespace(filter.metadata.name.replace(/-apiserver-proxy$/, '')),
        (filter) => filter.metadata.name.startsWith(LEGACY_FILTER_PREFIX),
      ),
      // Any change to our ManagedResources (a foreign delete or edit, the resource manager's
      // status) makes the shoot converge again on what is stored.
      // The actuator reads the stored ManagedResource from here (cachedManagedResource).
      managedResources: informer(WATCHED.managedResources, (raw) => mapDefined(kubeObjectJsonSchema.safeParse(raw).data, cachedManagedResource), (_e, mr) => this.enqueueNamespace(mr.metadata.namespace ?? '')),
      // The reference extension's, which the shoot's reconcile retires once this controller protects it.
      referenceManagedResources: informer(WATCHED.referenceManagedResources, (raw) => mapDefined(kubeObjectJsonSchema.safeParse(raw).data, identityOnly), (_e, mr) =>
        this.enqueueNamespace(mr.metadata.namespace ?? ''),
      ),
    };

    const now = options.now ?? (() => new Date());
    const actuator = new AclActuator({
      client: options.client,
      operator: options.operator,
      inventory: (namespace) => this.inventory(namespace),
      logger,
      combinedHolds: (technicalID) => this.combined.holds(technicalID),
      combinedChanged: () => this.combinedQueue.add(COMBINED_KEY),
      combinedProtection: (shoot) => this.combined.protection(shoot),
      tunnelHopMissing: (technicalID, generation) => this.combined.tunnelHopMissing(technicalID, generation),
      awaitCombined: (ext) => this.awaitingCombined.add(`${EXT_PREFIX}${ext.metadata.namespace}/${ext.metadata.name}`),
      warn: (ext, reason, message, once) => recordWarningEvent(options.client, ext, reason, message, now(), once),
      surelyAbsent: (ref) => this.surelyAbsent(ref),
      cachedManagedResource: (namespace) =>
        this.informers.managedResources.hasSynced() ? { stored: this.informers.managedResources.get(MANAGED_RESOURCE_NAME, namespace) } : undefined,
    });
    this.served = options.servedCheck
      ? new ServedChecker({
          kubeConfig,
          seed: () => this.servedSeed(),
          intervalMs: options.servedCheck.intervalMs,
          logger,
          registry,
          onChange: (shoots, everyShoot) => {
            if (everyShoot) this.enqueueAll();
            else for (const id of shoots) this.enqueueNamespace(id);
          },
          ...(options.servedCheck.readDump ? { readDump: options.servedCheck.readDump } : {}),
          ...(options.servedCheck.maxReadBytes ? { maxReadBytes: options.servedCheck.maxReadBytes } : {}),
        })
      : undefined;
    this.reconciler = new ExtensionReconciler({
      client: options.client,
      actuator,
      now,
      logger,
      warn: (ext, reason, message) => recordWarningEvent(options.client, ext, reason, message, now()),
      adoptedFinalizers: [REFERENCE_FINALIZER],
      written: this.extensionWrites,
      ...(this.served ? { served: this.served } : {}),
    });
    this.combined = new CombinedSyncer({
      client: options.client,
      operator: options.operator,
      extensions: () => this.informers.extensions.list(),
      gateways: () => this.gateways(),
      existing: () => this.informers.envoyFilters.list(),
      cacheProgress: () => this.informers.envoyFilters.lastResourceVersion(),
      // An unsynced cache looks empty; the syncer writes and deletes nothing until these have listed.
      cachesSynced: () => [this.informers.extensions, this.informers.deployments, this.informers.envoyFilters].every((i) => i.hasSynced()),
      logger,
      registry,
    });
    this.reconcileTotal = new Counter({ name: 'controller_runtime_reconcile_total', help: 'Reconciliations by result.', labelNames: ['controller', 'result'], registers: [registry] });
    this.reconcileErrors = new Counter({ name: 'controller_runtime_reconcile_errors_total', help: 'Reconciliations that failed.', labelNames: ['controller'], registers: [registry] });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Time per reconciliation.',
      labelNames: ['controller'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  }

  /** Starts the caches; resolves once all have listed (readiness). */
  async startCaches(): Promise<void> {
    await Promise.all(this.caches().map((i) => i.start()));
  }

  private caches(): CacheLifecycle[] {
    return Object.values(this.informers);
  }

  cachesSynced(): boolean {
    return this.caches().every((i) => i.hasSynced());
  }

  /** Every cache has an open watch (none is backing off after a failure), so it follows the server. */
  cachesWatching(): boolean {
    return this.cachesNotWatching().length === 0;
  }

  /** The caches that have had no open watch for longer than `thresholdMs`. */
  cachesNotWatchingFor(thresholdMs: number): string[] {
    return Object.entries(this.informers).filter(([, i]) => i.notWatchingForMs() > thresholdMs).map(([name]) => name);
  }

  /** The caches without an open watch right now (for diagnostics). */
  cachesNotWatching(): string[] {
    return Object.entries(this.informers).filter(([, i]) => !i.isWatching()).map(([name]) => name);
  }

  /** Starts the workers (only the leader does this). */
  startWorkers(): void {
    if (this.workersRunning) return;
    this.workersRunning = true;
    void retireReferenceWebhook(this.options.client, this.options.logger);
    this.enqueueAll();
    const count = this.options.workers;
    for (let i = 0; i < count; i++) this.workerLoops.push(this.workerLoop(this.queue));
    this.workerLoops.push(this.workerLoop(this.combinedQueue));
    const resync = this.options.resyncPeriodMs;
    const timer = setInterval(() => this.enqueueAll(), resync);
    timer.unref();
    this.resyncTimer = timer;
    this.served?.start();
  }


  /**
   * Takes no more work and waits for the reconciles in flight (at most `timeoutMs`; their
   * requests have their own deadlines). Resolves true when every worker has finished. A leader
   * calls this before it releases the Lease, so that nothing it still writes can land after a
   * successor's first write.
   */
  async stopWorkers(timeoutMs = 30_000): Promise<boolean> {
    this.stopping = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    clearTimeout(this.awaitingWake);
    await this.served?.stop();
    this.queue.shutDown();
    this.combinedQueue.shutDown();
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      Promise.allSettled(this.workerLoops).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
    clearTimeout(timer);
    return finished;
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    await Promise.allSettled(this.caches().map((i) => i.stop()));
  }

  /**
   * Seed inventory straight from the caches, for one shoot namespace: what its ACL reads (the
   * seed-wide kinds whole, the namespaced ones of `shootInventoryNamespaces`), so a reconcile
   * costs the same on a seed of 10 shoots as of 5,000.
   */
  inventory(namespace: string): SeedInventory {
    const i = this.informers;
    const namespaces = shootInventoryNamespaces(namespace);
    const cluster = i.clusters.get(namespace);
    return {
      // The shoot's ACL reads no Extension from the inventory (it is given its own).
      extensions: [],
      clusters: cluster ? [cluster] : [],
      infrastructures: namespaces.flatMap((ns) => i.infrastructures.list(ns)),
      dnsRecords: i.dnsRecords.list(namespace),
      gateways: namespaces.flatMap((ns) => i.gateways.list(ns)),
      deployments: i.deployments.list(),
      services: i.services.list(),
      configMaps: i.configMaps.list(),
      gatewayPods: i.gatewayPods.list(),
    };
  }

  /**
   * What the served check judges against: every shoot whose Extension records an applied ACL,
   * with its hosts from the caches; undefined until the caches have listed (an empty cache would
   * look like a seed without shoots).
   */
  private servedSeed(): SeedAcl | undefined {
    if (!this.cachesSynced()) return undefined;
    const i = this.informers;
    const inventory: SeedInventory = {
      extensions: i.extensions.list().filter((e) => appliedFromState(e.metadata.namespace, e.status?.['state']) !== undefined),
      clusters: i.clusters.list(),
      infrastructures: i.infrastructures.list(),
      dnsRecords: i.dnsRecords.list(),
      gateways: i.gateways.list(),
      deployments: i.deployments.list(),
      services: i.services.list(),
      configMaps: i.configMaps.list(),
      gatewayPods: i.gatewayPods.list(),
    };
    return seedAclFromInventory(inventory, this.options.operator).seed;
  }

  private gateways(): GatewayWorkload[] {
    return seedGatewayWorkloads(this.informers.deployments.list(), this.informers.gatewayPods.list());
  }

  /** See AclActuatorDeps.surelyAbsent: only the kinds whose cache holds every object of that name. */
  private surelyAbsent(ref: { readonly kind: string; readonly name: string; readonly namespace?: string | undefined }): boolean {
    const cache =
      ref.kind === 'EnvoyFilter' && ref.name.startsWith(LEGACY_FILTER_PREFIX)
        ? this.informers.legacyFilters
        : ref.kind === 'ManagedResource' && ref.name === REFERENCE_MANAGED_RESOURCE
          ? this.informers.referenceManagedResources
          : undefined;
    if (!cache?.hasSynced()) return false;
    return !cache.list(ref.namespace ?? '').some((o) => o.metadata.name === ref.name);
  }

  /**
   * Shoots waiting to be protected as recorded look again at what is now stored, once per burst
   * of combined filter events, and only those the stored filters now protect (or whose wait has a
   * problem to report): a sync writes a hundred filters, and waking every waiting shoot on each of
   * their events kept hundreds of reconciles that could not succeed yet in front of new edits.
   * The ones woken go first: gardenlet waits for them, one step from Succeeded.
   */
  private wakeAwaitingCombinedSoon(): void {
    if (this.awaitingWake || this.awaitingCombined.size === 0) return;
    this.awaitingWake = setTimeout(() => {
      this.awaitingWake = undefined;
      for (const key of this.awaitingCombined) if (this.awaitOver(key)) this.queue.add(key, true);
    }, AWAITING_COMBINED_WAKE_MS);
    this.awaitingWake.unref();
  }

  /** Whether the combined filters now hold (or no longer hold) what `key`'s shoot waits for, or its wait has a problem to report. */
  private awaitOver(key: string): boolean {
    const [namespace, name] = key.slice(EXT_PREFIX.length).split('/');
    return combinedWaitOver(this.informers.extensions.get(name ?? '', namespace), this.combined);
  }

  private enqueueNamespace(namespace: string): void {
    for (const ext of this.informers.extensions.list(namespace)) {
      if (ext.spec.type === EXTENSION_TYPE) this.queue.add(`${EXT_PREFIX}${namespace}/${ext.metadata.name}`);
    }
  }

  /** Nothing queued and nothing being processed (keys parked by addAfter do not count). */
  idle(): boolean {
    return this.queue.len() === 0 && this.combinedQueue.len() === 0 && this.inFlight === 0;
  }

  /** A full resync now: every Extension and the combined filters. */
  resync(): void {
    this.enqueueAll();
  }

  /** The ACL shoots a change of these gateway Deployments can affect (gatewayChangeAffects), and the combined filters. */
  private enqueueShootsOfGateways(changed: readonly Deployment[]): void {
    for (const ext of this.informers.extensions.list()) {
      if (ext.spec.type !== EXTENSION_TYPE) continue;
      const namespace = ext.metadata.namespace;
      const read = shootInventoryNamespaces(namespace).flatMap((ns) => this.informers.gateways.list(ns));
      const recorded = stateSchema.safeParse(ext.status?.['state'] ?? {}).data?.gatewayNamespaces ?? [];
      if (gatewayChangeAffects(changed, read, this.informers.gateways.list(namespace).length > 0, recorded)) this.queue.add(`${EXT_PREFIX}${namespace}/${ext.metadata.name}`);
    }
    this.combinedQueue.add(COMBINED_KEY);
  }

  private enqueueAll(): void {
    for (const ext of this.informers.extensions.list()) {
      if (ext.spec.type === EXTENSION_TYPE) this.queue.add(`${EXT_PREFIX}${ext.metadata.namespace}/${ext.metadata.name}`);
    }
    this.combinedQueue.add(COMBINED_KEY);
  }

  private async syncCombined(repair: boolean): Promise<void> {
    const listenerWriteDelayMs = listenerWriteDelay(performance.now(), this.lastListenerWrite, this.options.combinedMinIntervalMs, repair);
    const result = await this.combined.sync({ listenerWriteDelayMs });
    if (result.listenerWrites > 0) this.lastListenerWrite = performance.now();
    // Our last writes are not in the cache yet: decide again once they are (a few ms, usually).
    if (result.waitingForCache) this.combinedQueue.addAfter(COMBINED_KEY, 100);
    if (result.heldForMs !== undefined) this.combinedQueue.addAfter(COMBINED_KEY, result.heldForMs);
  }

  /**
   * The combined filters live outside any ManagedResource: after each combined sync (or failed
   * attempt), every shoot whose reported ControlPlaneHealthy no longer matches what is stored is
   * reconciled, so a foreign delete or a write the API server refuses shows on the Shoot. One pass
   * over the stored filters; shoots whose report still holds are not touched.
   */
  private recheckReportedHealth(): void {
    const shoots = this.informers.extensions.list().filter((ext) => ext.spec.type === EXTENSION_TYPE && hasShootClass(ext) && !ext.metadata.deletionTimestamp);
    const applied = shoots.flatMap((ext) => appliedFromState(ext.metadata.namespace, ext.status?.['state']) ?? []);
    const unprotected = this.combined.unprotected(applied);
    for (const ext of shoots) {
      const conditions = ext.status?.['conditions'];
      const reported = Array.isArray(conditions) ? (conditions as { type?: string; status?: string }[]).find((c) => c.type === CONTROL_PLANE_HEALTHY)?.status : undefined;
      if (reported === undefined) continue;
      if ((reported === 'True') === unprotected.has(ext.metadata.namespace)) this.queue.add(`${EXT_PREFIX}${ext.metadata.namespace}/${ext.metadata.name}`);
    }
  }

  /**
   * Whether `key` waits for the Extension cache to show the version its last pass wrote (for at
   * most HOLD_FOR_CACHE_MS): the next pass then decides on what is stored, not on an older copy
   * that would make it repeat writes already made. The key is parked meanwhile instead of holding
   * a worker: the write's own watch event brings it back, usually within milliseconds.
   */
  private heldForCache(key: string, ext: Extension): boolean {
    if (this.stopping) {
      this.extensionWrites.forget(keyOf(ext));
      return false;
    }
    if (!this.extensionWrites.lagging(keyOf(ext), ext.metadata.resourceVersion)) return false;
    this.queue.addAfter(key, CACHE_HOLD_POLL_MS);
    return true;
  }

  /** The failure of an Extension's reconcile in its status (not after losing the lease: that replica must not write). */
  private async reportFailure(key: string, error: unknown): Promise<void> {
    if (!key.startsWith(EXT_PREFIX) || error instanceof FenceRefusedError || (error instanceof Error && error.cause instanceof FenceRefusedError)) return;
    const [namespace, name] = key.slice(EXT_PREFIX.length).split('/');
    const ext = this.informers.extensions.get(name ?? '', namespace);
    if (!ext) return;
    await this.reconciler.reportFailure(ext, `reconcile failed, retrying: ${describeError(error).slice(0, 1024)}`);
  }

  /** 'parked': not due yet and put back for later; neither a success nor a retry. */
  private async process(key: string): Promise<'done' | 'retry' | 'parked'> {
    if (key === COMBINED_KEY) {
      const start = performance.now();
      const repair = this.combinedRepairDue;
      const wait = combinedSyncDelay(start, this.combinedPace, repair);
      if (wait > 0) {
        this.combinedQueue.addAfter(COMBINED_KEY, wait);
        return 'parked';
      }
      this.combinedRepairDue = false;
      try {
        await this.syncCombined(repair);
      } finally {
        // A failed sync is paced too: with the webhook down, every write fails after the same O(shoots) work.
        const end = performance.now();
        this.combinedPace = { endedAt: end, tookMs: end - start };
        this.recheckReportedHealth();
      }
      return 'done';
    }
    const [namespace, name] = key.slice(EXT_PREFIX.length).split('/');
    const ext = this.informers.extensions.get(name ?? '', namespace);
    if (!ext) {
      this.extensionWrites.forget(key.slice(EXT_PREFIX.length));
      return 'done';
    }
    if (this.heldForCache(key, ext)) return 'parked';
    const cluster = this.informers.clusters.get(ext.metadata.namespace);
    const skip = skipReason(ext, cluster);
    if (skip !== undefined) {
      this.options.logger.debug({ shoot: ext.metadata.namespace, reason: skip }, 'Extension left alone');
      return 'done';
    }
    const outcome = await this.reconciler.reconcile(ext, { forceDelete: shootNeedsForceDeletion(cluster) });
    return outcome.kind;
  }

  private async workerLoop(queue: WorkQueue): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined || this.stopping) return;
      const controller = key === COMBINED_KEY ? 'acl-combined' : 'acl';
      const end = this.reconcileTime.startTimer({ controller });
      let parked = false;
      this.inFlight++;
      try {
        const result = await this.process(key);
        if (result === 'parked') {
          // Its backoff stays, and no reconcile is counted: nothing was tried.
          parked = true;
        } else if (result === 'retry') {
          // Waiting (for the combined filters, the resource manager, a webhook's cache), not failed:
          // the event it waits for brings it back; the backoff is only the fallback.
          queue.addBackedOff(key);
          this.reconcileTotal.inc({ controller, result: 'requeue' });
        } else {
          this.awaitingCombined.delete(key);
          queue.forget(key);
          this.reconcileTotal.inc({ controller, result: 'success' });
        }
      } catch (error) {
        this.reconcileErrors.inc({ controller });
        this.reconcileTotal.inc({ controller, result: 'error' });
        const shoot = key.startsWith(EXT_PREFIX) ? key.slice(EXT_PREFIX.length).split('/')[0] : undefined;
        // An API error's own message carries headers and body; one line says what matters.
        const err = error instanceof ApiException ? describeError(error) : error;
        this.options.logger.error({ err, key, ...(shoot ? { shoot } : {}) }, 'reconcile failed; retrying with backoff');
        await this.reportFailure(key, error);
        queue.addRateLimited(key, retryAfterMs(error) ?? 0);
      } finally {
        if (!parked) end();
        this.inFlight--;
        queue.done(key);
      }
    }
  }
}

/** f(value) for a parsed object; undefined (unparsable, logged by the informer) stays undefined. */
function mapDefined<T, U>(value: T | undefined, f: (value: T) => U): U | undefined {
  return value === undefined ? undefined : f(value);
}
