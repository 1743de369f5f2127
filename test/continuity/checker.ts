// The protection-continuity checker: watches what the API server stores (combined CONNECT
// filters, ManagedResources and their Secrets) and, after EVERY stored change it sees, decides
// with protection-oracle.ts whether every ACL shoot is protected on every path of every gateway.
//
// A fault a test injects (a foreign delete, say) makes the stored state unprotected by itself;
// the test announces it with `fault(key)`, and gaps that appear with the next change of that
// object are charged to the fault: they must close within the repair limit. Any other gap that
// appears is charged to the controller: the goal is none. A shoot new to the expectations is
// not charged until it has been seen fully protected once (the time to get there is measured
// separately, as "new shoot to protected").
//
// A change of a shoot's ManagedResource or Secret can only change that shoot's protection, so only
// that shoot is judged again (a seed of thousands of shoots changes many of them a second); a
// change of a combined filter, of the expectations as a whole or of the topology judges every shoot.
import type { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';

import { manifestsOf } from '../../src/actuator/managed-resource.js';
import { ResilientInformer } from '../../src/kube/informer.js';
import { resourceVersionAtLeast } from '../../src/kube/written-versions.js';
import { MANAGED_BY, MANAGED_BY_LABEL, ROLE_LABEL } from '../../src/rbac/envoy-filter-types.js';
import { testLogger } from '../kube/kube-test-helpers.js';
import { protectionGaps, type ShootExpectation, type Topology } from './protection-oracle.js';

interface Meta {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
}
type Raw = Meta & Record<string, unknown>;

export interface GapRecord {
  readonly gap: string;
  /** The stored change after which it appeared: kind namespace/name@resourceVersion. */
  readonly after: string;
  readonly at: number;
}

export interface ContinuityReport {
  /** Stored states evaluated. */
  readonly states: number;
  /** Gaps that appeared through a change nobody announced as a fault: the controller's. */
  readonly controllerGaps: readonly GapRecord[];
  /** Gaps charged to announced faults, with how long each stayed open (ms; undefined: still open). */
  readonly faultGaps: readonly (GapRecord & { readonly openMs: number | undefined })[];
  /** Gaps open right now. */
  readonly open: readonly string[];
  /** Time spent judging stored states (ms): in all, and the longest single judgement. */
  readonly judging: { readonly totalMs: number; readonly maxMs: number };
}

const parse = (raw: unknown): Raw | undefined => {
  const meta = (raw as Partial<Meta> | undefined)?.metadata;
  return meta && typeof meta.name === 'string' ? (raw as Raw) : undefined;
};

/** "<shoot> <gateway namespace>" of a gap line ("<id> CONNECT <ns>:<port> ..." or "<id> SNI <ns>[:] ..."). */
function gapPair(gap: string): string {
  const [id = '', , where = ''] = gap.split(' ');
  return `${id} ${where.split(':')[0] ?? ''}`;
}

export class ContinuityChecker {
  private readonly combined: ResilientInformer<Raw>;
  private readonly managedResources: ResilientInformer<Raw>;
  private readonly secrets: ResilientInformer<Raw>;
  private expectations: readonly ShootExpectation[] = [];
  private expectationByID = new Map<string, ShootExpectation>();
  private openGaps = new Map<string, { record: GapRecord; fault: boolean }>();
  private readonly controllerGaps: GapRecord[] = [];
  private readonly faultGaps: (GapRecord & { openMs: number | undefined })[] = [];
  private readonly announced = new Set<string>();
  /**
   * "<shoot> <gateway namespace>" pairs seen fully protected at least once: before that the
   * shoot (or a new gateway) is being set up, not lapsing.
   */
  private readonly protectedOnce = new Set<string>();
  private states = 0;
  private judgingMs = 0;
  private longestJudgementMs = 0;

  /** Combined-filter changes not judged yet (only with `coalesceCombinedMs`). */
  private combinedBacklog: { what: string; resourceVersion: string | undefined }[] = [];
  private combinedTimer: NodeJS.Timeout | undefined;

  /**
   * `coalesceCombinedMs`: judge the combined filters' changes at most once per that many ms, on the
   * state stored by then (bench/soak.ts: judging thousands of shoots after each of a sync's writes
   * would fall ever further behind). States in between are not judged; tests leave it unset.
   */
  constructor(kubeConfig: KubeConfig, private topology: Topology, private readonly coalesceCombinedMs?: number) {
    const informer = (path: string, labelSelector: string | undefined, kind: string, perShoot: boolean) =>
      new ResilientInformer<Raw>({
        kubeConfig,
        path,
        ...(labelSelector ? { labelSelector } : {}),
        parse,
        onChange: (_event, obj) => {
          const what = `${kind} ${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
          if (perShoot) {
            if (kind === 'ManagedResource' && this.secretsBehind(obj)) return;
            this.evaluate([what], obj.metadata.resourceVersion, obj.metadata.namespace ?? '');
          }
          else this.combinedChanged(what, obj.metadata.resourceVersion);
        },
        logger: testLogger().child({ component: 'continuity-checker' }),
        initialBackoffMs: 50,
        maxBackoffMs: 500,
      });
    this.combined = informer('/apis/networking.istio.io/v1alpha3/envoyfilters', `${MANAGED_BY_LABEL}=${MANAGED_BY},${ROLE_LABEL}=connect`, 'EnvoyFilter', false);
    this.managedResources = informer('/apis/resources.gardener.cloud/v1alpha1/managedresources', undefined, 'ManagedResource', true);
    this.secrets = informer('/api/v1/secrets', `${MANAGED_BY_LABEL}=${MANAGED_BY}`, 'Secret', true);
  }

  /** Starts watching; `shoots` are the expectations from now on (replace them with `expect`). */
  async start(shoots: readonly ShootExpectation[]): Promise<void> {
    this.setExpectations(shoots);
    await Promise.all([this.combined.start(), this.managedResources.start(), this.secrets.start()]);
    this.evaluate(['start'], undefined);
  }

  expect(shoots: readonly ShootExpectation[]): void {
    this.setExpectations(shoots);
    this.evaluate(['expectations changed'], undefined);
  }

  /** Replaces (or adds) one shoot's expectation and judges that shoot again. */
  expectShoot(shoot: ShootExpectation): void {
    const at = this.expectations.findIndex((e) => e.technicalID === shoot.technicalID);
    this.setExpectations(at < 0 ? [...this.expectations, shoot] : this.expectations.map((e, i) => (i === at ? shoot : e)));
    this.evaluate([`expectation of ${shoot.technicalID} changed`], undefined, shoot.technicalID);
  }

  private setExpectations(shoots: readonly ShootExpectation[]): void {
    this.expectations = shoots;
    this.expectationByID = new Map(shoots.map((e) => [e.technicalID, e]));
  }

  /** A gateway added or removed: gaps on a new gateway count once it was protected there. */
  setTopology(topology: Topology): void {
    this.topology = topology;
    this.evaluate(['topology changed'], undefined);
  }

  /** The next stored change of `key` ("EnvoyFilter ns/name", "ManagedResource ns/name", "Secret ns/name") is an injected fault. */
  fault(key: string): void {
    this.announced.add(key);
  }

  /** Whether the change announced with fault(key) has reached the checker's caches. */
  faultObserved(key: string): boolean {
    return !this.announced.has(key);
  }

  /** Gaps open now (evaluated on the caches as they are), for the expectations or for `shoots`. */
  currentGaps(shoots: readonly ShootExpectation[] = this.expectations): string[] {
    return protectionGaps(this.stored(shoots), shoots, this.topology);
  }

  report(): ContinuityReport {
    return {
      states: this.states,
      controllerGaps: [...this.controllerGaps],
      faultGaps: this.faultGaps.map((g) => ({ ...g })),
      open: [...this.openGaps.keys()].sort(),
      judging: { totalMs: this.judgingMs, maxMs: this.longestJudgementMs },
    };
  }

  /**
   * Whether a ManagedResource names a Secret the Secret watch has not delivered yet, and that
   * watch is behind the ManagedResource's change: the two watches are separate streams, and the
   * controller creates the Secret before it points the ManagedResource at it. The Secret's own
   * event judges the shoot then; a Secret deleted later still opens a gap with its delete event.
   */
  private secretsBehind(mr: Raw): boolean {
    const refs = (mr as Raw & { spec?: { secretRefs?: { name: string }[] } }).spec?.secretRefs ?? [];
    const namespace = mr.metadata.namespace ?? '';
    if (refs.every((ref) => this.secrets.get(ref.name, namespace) !== undefined)) return false;
    const seen = this.secrets.lastResourceVersion();
    const at = mr.metadata.resourceVersion;
    return at !== undefined && !resourceVersionAtLeast(seen, at);
  }

  /** What the checker's caches hold for one shoot: its ManagedResource and the objects of its Secrets (for a look at a gap's cause). */
  storedFor(technicalID: string): { managedResource: unknown; objects: readonly unknown[] | undefined } {
    const expectation = this.expectationByID.get(technicalID);
    return {
      managedResource: this.managedResources.get('extension-acl', technicalID),
      objects: expectation ? this.stored([expectation]).perShoot.get(technicalID) : undefined,
    };
  }

  /** The combined filters as the checker's cache holds them now (for a look at a gap's cause). */
  storedCombined(): readonly unknown[] {
    return this.combined.list();
  }

  async stop(): Promise<void> {
    clearTimeout(this.combinedTimer);
    await Promise.all([this.combined.stop(), this.managedResources.stop(), this.secrets.stop()]);
  }

  private stored(shoots: readonly ShootExpectation[] = this.expectations) {
    const perShoot = new Map<string, unknown[] | undefined>();
    for (const shoot of shoots) {
      const mr = this.managedResources.get('extension-acl', shoot.technicalID) as (Raw & { spec?: { secretRefs?: { name: string }[] } }) | undefined;
      if (!mr) {
        perShoot.set(shoot.technicalID, undefined);
        continue;
      }
      const objects: unknown[] = [];
      let missing = false;
      for (const ref of mr.spec?.secretRefs ?? []) {
        const secret = this.secrets.get(ref.name, shoot.technicalID) as (Raw & { data?: Record<string, string> }) | undefined;
        if (!secret) {
          missing = true;
          continue;
        }
        for (const doc of parseAllDocuments(manifestsOf(secret.data ?? {}))) {
          const obj: unknown = doc.toJS();
          if (obj) objects.push(obj);
        }
      }
      perShoot.set(shoot.technicalID, missing ? undefined : objects);
    }
    return { combined: this.combined.list(), perShoot };
  }

  private combinedChanged(what: string, resourceVersion: string | undefined): void {
    if (this.coalesceCombinedMs === undefined) {
      this.evaluate([what], resourceVersion);
      return;
    }
    this.combinedBacklog.push({ what, resourceVersion });
    this.combinedTimer ??= setTimeout(() => {
      this.combinedTimer = undefined;
      const backlog = this.combinedBacklog;
      this.combinedBacklog = [];
      this.evaluate(backlog.map((b) => b.what), backlog[backlog.length - 1]?.resourceVersion);
    }, this.coalesceCombinedMs);
  }

  /** Judges the stored state after the changes `whats`; `shoot`: only that shoot's protection can have changed. */
  private evaluate(whats: readonly string[], resourceVersion: string | undefined, shoot?: string): void {
    const what = whats.length > 3 ? `${whats.slice(0, 3).join(', ')} and ${whats.length - 3} more` : whats.join(', ');
    if (![this.combined, this.managedResources, this.secrets].every((i) => i.hasSynced())) return;
    let judged = this.expectations;
    if (shoot !== undefined) {
      const expectation = this.expectationByID.get(shoot);
      // Not a shoot the checker judges: nothing it judges changed (an announced fault stays pending).
      if (expectation === undefined) return;
      judged = [expectation];
    }
    this.states++;
    const now = performance.now();
    const all = protectionGaps(this.stored(judged), judged, this.topology);
    const open = new Set(all.map(gapPair));
    for (const shoot of judged) {
      for (const namespace of new Set([...this.topology.gateways, ...shoot.sniGateways])) {
        const pair = `${shoot.technicalID} ${namespace}`;
        if (!open.has(pair)) this.protectedOnce.add(pair);
      }
    }
    const gaps = new Set(all.filter((g) => this.protectedOnce.has(gapPair(g))));
    const fault = whats.map((w) => this.announced.delete(w)).some(Boolean);
    for (const [gap, open] of this.openGaps) {
      if (gaps.has(gap) || (shoot !== undefined && gapPair(gap).split(' ')[0] !== shoot)) continue;
      this.openGaps.delete(gap);
      if (open.fault) {
        const record = this.faultGaps.find((g) => g.gap === gap && g.openMs === undefined);
        if (record) record.openMs = now - record.at;
      }
    }
    for (const gap of gaps) {
      if (this.openGaps.has(gap)) continue;
      const record: GapRecord = { gap, after: `${what}@${resourceVersion ?? '-'}`, at: now };
      this.openGaps.set(gap, { record, fault });
      if (fault) this.faultGaps.push({ ...record, openMs: undefined });
      else this.controllerGaps.push(record);
    }
    const took = performance.now() - now;
    this.judgingMs += took;
    this.longestJudgementMs = Math.max(this.longestJudgementMs, took);
  }
}
