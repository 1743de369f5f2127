// The garden ACL's controller in the runtime cluster: caches of what the garden ACL reads (the
// `garden`-class acl Extension in namespace garden, the Garden, the virtual garden's Gateway, the
// ingress gateway Deployments, its ManagedResource) and of the virtual garden's ManagedSeeds and
// their Shoots, one work queue and Gardener's Extension contract around the GardenActuator. There
// is one such Extension per runtime cluster, so every event that can change what it writes
// queues it; a status-only change of a Deployment or a Shoot does not.
import { ApiException, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import type { OperatorConfig } from '../config/operator-config.js';
import { cachedDeployment, cachedExtension, cachedManagedResource, withoutFieldManagement } from '../gardener/cached-views.js';
import { EXTENSION_TYPE } from '../gardener/extension-class.js';
import { gardenletWaits } from '../gardener/extension-contract.js';
import { GARDEN_EXTENSION, hasGardenClass, type GardenInventory } from '../gardener/garden-acl.js';
import { gardenSchema, gardenShootSchema, managedSeedSchema, type Garden, type GardenShoot, type ManagedSeed } from '../gardener/garden-objects.js';
import { deploymentSchema, extensionSchema, gatewaySchema, type Deployment, type Extension, type Gateway } from '../gardener/objects.js';
import { GARDEN_WATCHED } from '../gardener/watched-resources.js';
import { describeError, retryAfterMs } from '../kube/errors.js';
import { ResilientInformer } from '../kube/informer.js';
import { FenceRefusedError } from '../kube/lease-fence.js';
import { createWorkQueueMetrics } from '../kube/metrics.js';
import { keyOf, kubeObjectJsonSchema, type KubeObjectJson } from '../kube/object-json.js';
import { WorkQueue } from '../kube/work-queue.js';
import { WrittenVersions } from '../kube/written-versions.js';
import { jsonEqual } from '../rbac/deep-equal.js';
import type { ClusterClient } from './cluster-client.js';
import { recordWarningEvent } from './events.js';
import { ExtensionReconciler } from './extension-reconciler.js';
import { GARDEN_MANAGED_RESOURCE_NAME, GardenActuator } from './garden-actuator.js';

/** How long a pass's write may take to reach the Extension cache before the next pass goes ahead without it. */
const HOLD_FOR_CACHE_MS = 2_000;
const CACHE_HOLD_POLL_MS = 50;
const NS = GARDEN_EXTENSION.namespace;

export interface GardenControllerOptions {
  /** The runtime cluster. */
  readonly kubeConfig: KubeConfig;
  readonly client: ClusterClient;
  /** The virtual garden, for its ManagedSeeds and their Shoots; absent: not readable (the status says so, nothing is written). */
  readonly virtualGarden?: KubeConfig;
  readonly operator: OperatorConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly resyncPeriodMs: number;
  readonly now?: () => Date;
}

type Informer<T extends { metadata: { name: string; namespace?: string } }> = ResilientInformer<T>;

export class GardenController {
  private readonly queue: WorkQueue;
  private readonly runtime: {
    extensions: Informer<Extension>;
    gardens: Informer<Garden>;
    gateways: Informer<Gateway>;
    deployments: Informer<Deployment>;
    apiServers: Informer<Deployment>;
    managedResources: Informer<KubeObjectJson>;
  };
  private readonly virtual: { managedSeeds: Informer<ManagedSeed>; shoots: Informer<GardenShoot> } | undefined;
  private readonly reconciler: ExtensionReconciler;
  private readonly written = new WrittenVersions({ holdMs: HOLD_FOR_CACHE_MS });
  private readonly reconcileTotal: Counter;
  private worker: Promise<void> | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(private readonly options: GardenControllerOptions) {
    const { logger, registry } = options;
    this.queue = new WorkQueue({ name: 'acl-garden', metrics: createWorkQueueMetrics(registry) });
    const informer = <T extends { metadata: { name: string; namespace?: string } }>(
      kubeConfig: KubeConfig,
      watch: { readonly path: string; readonly labelSelector?: string; readonly fieldSelector?: string },
      parse: (raw: unknown) => T | undefined,
      onChange: (event: 'add' | 'update' | 'delete', obj: T, old?: T) => void,
      keep?: (obj: T) => boolean,
    ): Informer<T> => new ResilientInformer<T>({ kubeConfig, ...watch, parse, onChange, ...(keep ? { keep } : {}), logger });
    const slim = <T extends Parameters<typeof withoutFieldManagement>[0]>(parsed: T | undefined): T | undefined => parsed && withoutFieldManagement(parsed);
    const kc = options.kubeConfig;
    const all = (): void => this.enqueueAll();
    this.runtime = {
      extensions: informer(
        kc,
        GARDEN_WATCHED.extensions,
        (raw) => mapDefined(extensionSchema.safeParse(raw).data, cachedExtension),
        (_e, ext) => this.queue.add(keyOf(ext), gardenletWaits(ext)),
        (ext) => ext.spec.type === EXTENSION_TYPE && hasGardenClass(ext),
      ),
      gardens: informer(kc, GARDEN_WATCHED.gardens, (raw) => slim(gardenSchema.safeParse(raw).data), (event, g, old) => {
        if (event !== 'update' || !jsonEqual(g.spec, old?.spec) || g.metadata.deletionTimestamp !== old?.metadata.deletionTimestamp) all();
      }),
      gateways: informer(
        kc,
        GARDEN_WATCHED.gateways,
        (raw) => slim(gatewaySchema.safeParse(raw).data),
        all,
      ),
      // The cached view has no status: replica counts and readiness change nothing here.
      deployments: informer(kc, GARDEN_WATCHED.gatewayDeployments, (raw) => mapDefined(deploymentSchema.safeParse(raw).data, cachedDeployment), (event, d, old) => {
        if (event !== 'update' || !jsonEqual(d, old)) all();
      }),
      apiServers: informer(
        kc,
        GARDEN_WATCHED.apiServers,
        (raw) => mapDefined(deploymentSchema.safeParse(raw).data, cachedDeployment),
        (event) => {
          if (event !== 'update') all();
        },
      ),
      managedResources: informer(
        kc,
        { path: `/apis/resources.gardener.cloud/v1alpha1/namespaces/${NS}/managedresources`, fieldSelector: `metadata.name=${GARDEN_MANAGED_RESOURCE_NAME}` },
        (raw) => mapDefined(kubeObjectJsonSchema.safeParse(raw).data, cachedManagedResource),
        all,
      ),
    };
    const vg = options.virtualGarden;
    this.virtual = vg
      ? {
          managedSeeds: informer(vg, GARDEN_WATCHED.managedSeeds, (raw) => slim(managedSeedSchema.safeParse(raw).data), (event, s, old) => {
            if (event !== 'update' || s.spec.shoot?.name !== old?.spec.shoot?.name) all();
          }),
          // Shoots change all day (status of every reconcile); only their egress matters here.
          shoots: informer(vg, GARDEN_WATCHED.shoots, (raw) => mapDefined(gardenShootSchema.safeParse(raw).data, egressOnly), (event, s, old) => {
            if (event !== 'update' || !jsonEqual(s.status, old?.status)) all();
          }),
        }
      : undefined;
    const now = options.now ?? (() => new Date());
    const actuator = new GardenActuator({
      client: options.client,
      operator: options.operator,
      logger,
      inventory: () => this.inventory(),
      cachedManagedResource: (namespace) => (this.runtime.managedResources.hasSynced() ? { stored: this.runtime.managedResources.get(GARDEN_MANAGED_RESOURCE_NAME, namespace) } : undefined),
      warn: (ext, reason, message, once) => recordWarningEvent(options.client, ext, reason, message, now(), once),
    });
    this.reconciler = new ExtensionReconciler({
      client: options.client,
      actuator,
      now,
      logger,
      warn: (ext, reason, message) => recordWarningEvent(options.client, ext, reason, message, now()),
      written: this.written,
    });
    this.reconcileTotal = new Counter({ name: 'controller_runtime_reconcile_total', help: 'Reconciliations by result.', labelNames: ['controller', 'result'], registers: [registry] });
  }

  /** What the garden ACL reads, from the caches; the virtual garden's only once its caches have listed. */
  inventory(): GardenInventory {
    const v = this.virtual;
    const read = v !== undefined && v.managedSeeds.hasSynced() && v.shoots.hasSynced();
    return {
      gardens: this.runtime.gardens.list(),
      gateways: this.runtime.gateways.list(),
      deployments: this.runtime.deployments.list(),
      // Until the cache has listed it cannot tell: deployed, so an unreadable virtual garden stops the ACL.
      virtualGardenDeployed: !this.runtime.apiServers.hasSynced() || this.runtime.apiServers.list().length > 0,
      managedSeeds: read ? v.managedSeeds.list() : undefined,
      gardenShoots: read ? v.shoots.list() : undefined,
    };
  }

  /**
   * Starts the caches. The runtime cluster's must list before the controller is ready; the virtual
   * garden's may not be reachable yet (gardener-operator deploys the extension before or while it
   * creates the virtual garden): they start and list on their own, and until they have, the
   * Extension reports that the ManagedSeeds cannot be read.
   */
  async startCaches(): Promise<void> {
    if (this.virtual) for (const cache of Object.values(this.virtual)) void cache.start().catch((error: unknown) => this.options.logger.warn({ err: describeError(error) }, 'virtual garden cache stopped'));
    await Promise.all(Object.values(this.runtime).map((cache) => cache.start()));
  }

  cachesSynced(): boolean {
    return Object.values(this.runtime).every((cache) => cache.hasSynced());
  }

  /** The caches (runtime and virtual garden) that have had no open watch for longer than `thresholdMs`. */
  cachesNotWatchingFor(thresholdMs: number): string[] {
    const caches = { ...this.runtime, ...(this.virtual ? { virtualGardenManagedSeeds: this.virtual.managedSeeds, virtualGardenShoots: this.virtual.shoots } : {}) };
    return Object.entries(caches).filter(([, cache]) => cache.notWatchingForMs() > thresholdMs).map(([name]) => name);
  }

  startWorkers(): void {
    if (this.worker) return;
    this.enqueueAll();
    this.worker = this.workerLoop();
    this.resyncTimer = setInterval(() => this.enqueueAll(), this.options.resyncPeriodMs);
    this.resyncTimer.unref();
  }

  async stopWorkers(timeoutMs = 30_000): Promise<boolean> {
    this.stopping = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.queue.shutDown();
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      (this.worker ?? Promise.resolve()).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
    clearTimeout(timer);
    return finished;
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    await Promise.allSettled([...Object.values(this.runtime), ...Object.values(this.virtual ?? {})].map((cache) => cache.stop()));
  }

  private enqueueAll(): void {
    for (const ext of this.runtime.extensions.list()) this.queue.add(keyOf(ext));
  }

  private async process(key: string): Promise<'done' | 'retry' | 'parked'> {
    const [namespace, name] = key.split('/');
    const ext = this.runtime.extensions.get(name ?? '', namespace);
    if (!ext) {
      this.written.forget(key);
      return 'done';
    }
    if (!this.stopping && this.written.lagging(key, ext.metadata.resourceVersion)) {
      this.queue.addAfter(key, CACHE_HOLD_POLL_MS);
      return 'parked';
    }
    return (await this.reconciler.reconcile(ext)).kind;
  }

  private async workerLoop(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined || this.stopping) return;
      try {
        const result = await this.process(key);
        if (result === 'retry') {
          this.queue.addBackedOff(key);
          this.reconcileTotal.inc({ controller: 'acl-garden', result: 'requeue' });
        } else if (result === 'done') {
          this.queue.forget(key);
          this.reconcileTotal.inc({ controller: 'acl-garden', result: 'success' });
        }
      } catch (error) {
        this.reconcileTotal.inc({ controller: 'acl-garden', result: 'error' });
        const err = error instanceof ApiException ? describeError(error) : error;
        this.options.logger.error({ err, garden: key }, 'garden reconcile failed; retrying with backoff');
        await this.reportFailure(key, error);
        this.queue.addRateLimited(key, retryAfterMs(error) ?? 0);
      } finally {
        this.queue.done(key);
      }
    }
  }

  /** The failure in the Extension's status (not after losing the lease: that replica must not write). */
  private async reportFailure(key: string, error: unknown): Promise<void> {
    if (error instanceof FenceRefusedError || (error instanceof Error && error.cause instanceof FenceRefusedError)) return;
    const [namespace, name] = key.split('/');
    const ext = this.runtime.extensions.get(name ?? '', namespace);
    if (!ext) return;
    try {
      await this.reconciler.reportFailure(ext, `reconcile failed, retrying: ${describeError(error).slice(0, 1024)}`);
    } catch (reportError) {
      this.options.logger.warn({ err: describeError(reportError), garden: key }, 'could not report the failure on the Extension');
    }
  }
}

function mapDefined<T, U>(value: T | undefined, f: (value: T) => U): U | undefined {
  return value === undefined ? undefined : f(value);
}

/** A virtual garden Shoot as the garden ACL reads it: name and egress, nothing of its status churn. */
function egressOnly(shoot: GardenShoot): GardenShoot {
  const egress = shoot.status?.networking?.egressCIDRs;
  return {
    apiVersion: shoot.apiVersion,
    kind: shoot.kind,
    metadata: { name: shoot.metadata.name, namespace: shoot.metadata.namespace, ...(shoot.metadata.resourceVersion ? { resourceVersion: shoot.metadata.resourceVersion } : {}) },
    ...(egress ? { status: { networking: { egressCIDRs: egress } } } : {}),
  };
}
