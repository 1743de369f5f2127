// The controller's served check: every interval, one pod of each gateway (in turn: the pods take
// the same config from istiod, and one read of a large gateway is tens of MiB) has its Envoy read
// (listeners, routes, ECDS names through the API server's port-forward, see gateway-admin.ts) and
// judged by checkServedProtection against the ACL shoots the Extensions record as applied. A
// shoot whose protection is stored but not served (exposed or cut off on some path) is reported
// once seen on two reads of the gateway in a row (a push in flight is not a fault); a pass that
// sees a new fault is followed by the next one after `confirmDelayMs`, not the whole interval.
// The caller turns reports into the Extension's status and an Event; this class keeps the metrics.
//
// What cannot be read is never taken as "served" nor as "not served": a gateway none of whose
// pods could be read keeps its previous findings and is named as unchecked.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { SeedAcl } from '../acl/model.js';
import { describeError } from '../kube/errors.js';
import { ReadBudgetExceeded, readGatewayConfigDump, readyGatewayPods, type GatewayPod } from './gateway-admin.js';
import { servedGateway } from './served-config.js';
import { checkServedProtection, isProtectionFault, type ServedFinding } from './served-protection.js';

/** A finding on one pod of one gateway. */
export interface ServedFault extends ServedFinding {
  readonly gateway: string;
  readonly pod: string;
}

export interface ServedCheckerDeps {
  readonly kubeConfig: KubeConfig;
  /** The ACL shoots as applied, with the seed's gateways; undefined while the caches are not ready. */
  readonly seed: () => SeedAcl | undefined;
  readonly intervalMs: number;
  readonly logger: Logger;
  readonly registry: Registry;
  /** Shoots whose reported faults changed (appeared, changed or cleared); `everyShoot` when the set of unchecked gateways changed, which every shoot's status names. */
  readonly onChange: (technicalIDs: ReadonlySet<string>, everyShoot: boolean) => void;
  /** Reads a pod's Envoy (default: through the API server's port-forward). */
  readonly readDump?: (pod: GatewayPod, signal: AbortSignal, maxBytes: number) => Promise<unknown>;
  readonly readTimeoutMs?: number;
  /** Largest read of one pod (listeners and routes); a larger gateway is reported unchecked rather than parsed. */
  readonly maxReadBytes?: number;
  /** Delay of the pass that confirms a new fault (default 5 s). */
  readonly confirmDelayMs?: number;
}

/** Default read budget per pod: a gateway of about 2,500 ACL shoots (bench/served-check.ts: 18 MiB at 1,000), parsed with well under the chart's 256 MiB heap. */
export const DEFAULT_SERVED_READ_BYTES = 48 * 2 ** 20;

/** The key of findings about every shoot alike (a patch target a gateway does not serve). */
const GATEWAY_WIDE = '';

const faultKey = (f: ServedFault): string => `${f.gateway}|${f.pod}|${f.path}|${f.severity}|${f.where}|${f.cause}`;
/** The same fault on any pod of the gateway. */
const gatewayKey = (f: ServedFault): string => `${f.gateway}|${f.path}|${f.severity}|${f.where}|${f.cause}`;

export class ServedChecker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly abort = new AbortController();
  /** Reported faults per shoot (seen on two passes in a row). */
  private reported = new Map<string, readonly ServedFault[]>();
  /** Faults of the last pass, per shoot, by key. */
  private lastSeen = new Map<string, Map<string, ServedFault>>();
  /** Gateway namespace → why none of its pods could be read in the last pass. */
  private unchecked = new Map<string, string>();
  private checked = false;
  /** Per gateway namespace, the index of the pod read next. */
  private readonly turn = new Map<string, number>();
  /** The last pass saw faults not yet reported: confirm them soon. */
  private confirming = false;
  private readonly faultsGauge: Gauge;
  private readonly absentGauge: Gauge;
  private readonly readErrors: Counter;
  private readonly passSeconds: Histogram;

  constructor(private readonly deps: ServedCheckerDeps) {
    this.faultsGauge = new Gauge({
      name: 'gardener_acl_protection_not_served',
      help: 'Paths on which a gateway pod serves a shoot without its ACL filter (exposed) or refuses it whole (cut-off), by shoot.',
      labelNames: ['shoot', 'gateway', 'pod', 'path', 'severity'],
      registers: [deps.registry],
    });
    this.absentGauge = new Gauge({ name: 'gardener_acl_served_patch_targets_absent', help: 'Patch targets (ports, chains) a gateway does not serve at all: the patches match nothing there.', labelNames: ['gateway'], registers: [deps.registry] });
    this.readErrors = new Counter({ name: 'gardener_acl_served_check_read_errors_total', help: 'Gateway pods whose Envoy could not be read.', labelNames: ['gateway'], registers: [deps.registry] });
    this.passSeconds = new Histogram({ name: 'gardener_acl_served_check_duration_seconds', help: 'Time of one served check over every gateway pod.', buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120], registers: [deps.registry] });
  }

  /** The shoot's reported faults (empty: none known). */
  faultsOf(technicalID: string): readonly ServedFault[] {
    return (this.reported.get(technicalID) ?? []).filter(isProtectionFault);
  }

  /** Patch targets the gateways do not serve (no exposure): the shoot's own and every gateway-wide one. */
  absentFor(technicalID: string): readonly ServedFault[] {
    return [...(this.reported.get(GATEWAY_WIDE) ?? []), ...(this.reported.get(technicalID) ?? []).filter((f) => !isProtectionFault(f))];
  }

  /** Why the check could not judge some gateway (undefined: every gateway was read, or no pass has run yet). */
  uncheckedReason(): string | undefined {
    if (!this.checked || this.unchecked.size === 0) return undefined;
    return [...this.unchecked].map(([ns, why]) => `${ns}: ${why}`).join('; ');
  }

  start(): void {
    if (this.timer) return;
    const tick = (): void => {
      this.running = this.checkOnce().catch((error: unknown) => this.deps.logger.warn({ err: describeError(error) }, 'served check failed'));
      void this.running.finally(() => {
        if (!this.abort.signal.aborted) this.timer = setTimeout(tick, this.confirming ? (this.deps.confirmDelayMs ?? 5_000) : this.deps.intervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every gateway pod. */
  async checkOnce(): Promise<void> {
    const seed = this.deps.seed();
    if (!seed) return;
    const started = performance.now();
    const seen = new Map<string, Map<string, ServedFault>>();
    const unchecked = new Map<string, string>();
    const kept = new Set<string>();
    const read = this.deps.readDump ?? ((pod: GatewayPod, signal: AbortSignal, maxBytes: number) => readGatewayConfigDump(this.deps.kubeConfig, pod, signal, maxBytes));
    const maxBytes = this.deps.maxReadBytes ?? DEFAULT_SERVED_READ_BYTES;
    for (const gateway of seed.gateways) {
      let pods: string[];
      try {
        pods = await readyGatewayPods(this.deps.kubeConfig, gateway, this.abort.signal);
      } catch (error) {
        unchecked.set(gateway.namespace, `cannot list its pods: ${describeError(error)}`);
        continue;
      }
      if (pods.length === 0) {
        unchecked.set(gateway.namespace, 'no running and ready gateway pod');
        continue;
      }
      let judged = false;
      let lastError = '';
      // One pod per pass, in turn; the next one only when a read fails.
      const first = (this.turn.get(gateway.namespace) ?? 0) % pods.length;
      this.turn.set(gateway.namespace, first + 1);
      for (const pod of [...pods.slice(first), ...pods.slice(0, first)]) {
        if (this.abort.signal.aborted) return;
        let dump: unknown;
        try {
          dump = await read({ namespace: gateway.namespace, name: pod }, AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.deps.readTimeoutMs ?? 60_000)]), maxBytes);
        } catch (error) {
          this.readErrors.inc({ gateway: gateway.namespace });
          lastError =
            error instanceof ReadBudgetExceeded
              ? `${pod}: its config is larger than the served check's read budget of ${Math.round(maxBytes / 2 ** 20)} MiB (--served-check-max-read-mib; raise it together with the controller's heap)`
              : `${pod}: ${describeError(error)}`;
          continue;
        }
        const served = servedGateway(dump);
        if (served.listeners.length === 0) {
          lastError = `${pod}: its Envoy serves no listener`;
          continue;
        }
        judged = true;
        const report = checkServedProtection(seed, gateway.namespace, served);
        for (const finding of report.findings) {
          const fault: ServedFault = { ...finding, gateway: gateway.namespace, pod };
          const id = finding.technicalID ?? GATEWAY_WIDE;
          const byKey = seen.get(id) ?? new Map<string, ServedFault>();
          byKey.set(faultKey(fault), fault);
          seen.set(id, byKey);
        }
        break;
      }
      if (!judged) {
        unchecked.set(gateway.namespace, `no pod's Envoy could be read (${lastError})`);
        kept.add(gateway.namespace);
      }
    }
    // A gateway not read this time keeps what was seen on it before.
    for (const [id, byKey] of this.lastSeen) {
      for (const [key, fault] of byKey) {
        if (!kept.has(fault.gateway)) continue;
        const into = seen.get(id) ?? new Map<string, ServedFault>();
        into.set(key, fault);
        seen.set(id, into);
      }
    }
    const uncheckedBefore = this.checked ? [...this.unchecked].join('\n') : '';
    const changed = this.publish(seen);
    this.lastSeen = seen;
    this.unchecked = unchecked;
    this.checked = true;
    // What concerns every shoot (an unchecked gateway, a gateway-wide absent target) is in every shoot's status.
    const everyShoot = [...unchecked].join('\n') !== uncheckedBefore || changed.delete(GATEWAY_WIDE);
    if (changed.size > 0 || everyShoot) this.deps.onChange(changed, everyShoot);
    this.passSeconds.observe((performance.now() - started) / 1000);
  }

  /** Reports what was seen on this pass and the one before; returns whose reported faults changed. */
  private publish(seen: ReadonlyMap<string, ReadonlyMap<string, ServedFault>>): Set<string> {
    const next = new Map<string, readonly ServedFault[]>();
    let unconfirmed = false;
    for (const [id, byKey] of seen) {
      const known = new Set([...(this.lastSeen.get(id)?.values() ?? []), ...(this.reported.get(id) ?? [])].map(gatewayKey));
      // A fault already reported stays as reported (its pod too) while another pod shows it: the
      // pods are read in turn, and a report naming a new pod each pass would rewrite the status.
      const reported = new Map((this.reported.get(id) ?? []).map((f) => [gatewayKey(f), f]));
      const confirmed = [...byKey.values()].filter((f) => known.has(gatewayKey(f))).map((f) => reported.get(gatewayKey(f)) ?? f);
      if (confirmed.length < byKey.size) unconfirmed = true;
      if (confirmed.length > 0) next.set(id, confirmed.sort((a, b) => faultKey(a).localeCompare(faultKey(b))));
    }
    this.confirming = unconfirmed;
    const changed = new Set<string>();
    for (const id of new Set([...next.keys(), ...this.reported.keys()])) {
      const a = (this.reported.get(id) ?? []).map(faultKey).join('\n');
      const b = (next.get(id) ?? []).map(faultKey).join('\n');
      if (a !== b) changed.add(id);
    }
    this.faultsGauge.reset();
    this.absentGauge.reset();
    for (const findings of next.values()) {
      for (const f of findings) {
        if (isProtectionFault(f)) this.faultsGauge.inc({ shoot: f.technicalID ?? '', gateway: f.gateway, pod: f.pod, path: f.path, severity: f.severity });
        else this.absentGauge.inc({ gateway: f.gateway });
      }
    }
    for (const id of changed) {
      const faults = (next.get(id) ?? []).filter(isProtectionFault);
      if (id === GATEWAY_WIDE) continue;
      if (faults.length > 0) this.deps.logger.warn({ shoot: id, faults: faults.map((f) => `${f.severity} ${f.path} ${f.gateway}/${f.pod} ${f.where}: ${f.cause}`) }, 'protection stored but not served');
      else if ((this.reported.get(id) ?? []).some(isProtectionFault)) this.deps.logger.info({ shoot: id }, 'protection served again');
    }
    this.reported = next;
    return changed;
  }
}

/** The note on a protected shoot's condition for patch targets the gateways do not serve. */
export function describeAbsentTargets(absent: readonly ServedFault[], shown = 3): string {
  const lines = absent.slice(0, shown).map((f) => `${f.gateway} ${f.where}: ${f.cause}`);
  const more = absent.length > shown ? ` (and ${absent.length - shown} more)` : '';
  return `Patches that match nothing (nothing exposed): ${lines.join('; ')}${more}.`;
}

/** The condition text for a shoot's reported faults: the first few, and how many more. */
export function describeServedFaults(faults: readonly ServedFault[], shown = 3): string {
  const lines = faults.slice(0, shown).map((f) => `${f.severity} on ${f.path} at ${f.gateway}/${f.pod} ${f.where}: ${f.cause}`);
  const more = faults.length > shown ? ` (and ${faults.length - shown} more)` : '';
  return `The ACL is stored but not served: ${lines.join('; ')}${more}.`;
}
