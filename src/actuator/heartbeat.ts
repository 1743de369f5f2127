// Gardener's extension heartbeat (extensions/pkg/controller/heartbeat): a Lease named
// gardener-extension-heartbeat in the extension's namespace, renewed every 30 s. gardenlet's shoot
// care reads its renewTime next to every condition an Extension reports
// (pkg/gardenlet/controller/shoot/care/health.go, getLastHeartbeatTimeForExtension); without it,
// with the gardenlet chart's default staleExtensionHealthChecks (enabled, 5m), every condition we
// report would turn the shoot's ControlPlaneHealthy Unknown ("outdated health check report").
import type { Logger } from 'pino';
import { describeError } from '../kube/errors.js';
import { microTime } from '../kube/leader-election.js';
import type { ClusterClient, ObjectRef } from './cluster-client.js';

export const HEARTBEAT_LEASE = 'gardener-extension-heartbeat';
export const HEARTBEAT_INTERVAL_MS = 30_000;

export class ExtensionHeartbeat {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: ClusterClient,
    private readonly namespace: string,
    private readonly holder: string,
    private readonly logger: Logger,
  ) {}

  private get ref(): ObjectRef {
    return { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: HEARTBEAT_LEASE, namespace: this.namespace };
  }

  /** Renews now and every 30 s until stop(); a failed renewal is logged and tried at the next tick. */
  start(): void {
    if (this.timer) return;
    void this.renew();
    this.timer = setInterval(() => void this.renew(), HEARTBEAT_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  async renew(): Promise<void> {
    const spec = { holderIdentity: this.holder, leaseDurationSeconds: HEARTBEAT_INTERVAL_MS / 1000, renewTime: microTime(Date.now()) };
    try {
      if (await this.client.get(this.ref)) {
        await this.client.mergePatch(this.ref, { spec });
      } else {
        const lease = { apiVersion: this.ref.apiVersion, kind: 'Lease', metadata: { name: HEARTBEAT_LEASE, namespace: this.namespace }, spec };
        await this.client.createIfAbsent(lease);
      }
    } catch (error) {
      this.logger.warn({ err: describeError(error), lease: `${this.namespace}/${HEARTBEAT_LEASE}` }, 'could not renew the extension heartbeat');
    }
  }
}
