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
import type { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';

import { manifestsOf } from '../../src/actuator/managed-resource.js';
import { ResilientInformer } from '../../src/kube/informer.js';
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

  constructor(kubeConfig: KubeConfig, private topology: Topology) {
    const informer = (path: string, labelSelector: string | undefined, kind: string) =>
      new ResilientInformer<Raw>({
        kubeConfig,
        path,
        ...(labelSelector ? { labelSelector } : {}),
        parse,
        onChange: (_event, obj) => this.evaluate(`${kind} ${obj.metadata.namespace ?? ''}/${obj.metadata.name}`, obj.metadata.resourceVersion),
        logger: testLogger().child({ component: 'continuity-checker' }),
        initialBackoffMs: 50,
        maxBackoffMs: 500,
      });
    this.combined = informer('/apis/networking.istio.io/v1alpha3/envoyfilters', `${MANAGED_BY_LABEL}=${MANAGED_BY},${ROLE_LABEL}=connect`, 'EnvoyFilter');
    this.managedResources = informer('/apis/resources.gardener.cloud/v1alpha1/managedresources', undefined, 'ManagedResource');
    this.secrets = informer('/api/v1/secrets', `${MANAGED_BY_LABEL}=${MANAGED_BY}`, 'Secret');
  }

  /** Starts watching; `shoots` are the expectations from now on (replace them with `expect`). */
  async start(shoots: readonly ShootExpectation[]): Promise<void> {
    this.expectations = shoots;
    await Promise.all([this.combined.start(), this.managedResources.start(), this.secrets.start()]);
    this.evaluate('start', undefined);
  }

  expect(shoots: readonly ShootExpectation[]): void {
    this.expectations = shoots;
    this.evaluate('expectations changed', undefined);
  }

  /** A gateway added or removed: gaps on a new gateway count once it was protected there. */
  setTopology(topology: Topology): void {
    this.topology = topology;
    this.evaluate('topology changed', undefined);
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
    };
  }

  async stop(): Promise<void> {
    await Promise.all([this.combined.stop(), this.managedResources.stop(), this.secrets.stop()]);
  }

  private stored(shoots: readonly ShootExpectation[] = this.expectations) {
    const secrets = new Map(this.secrets.list().map((s) => [`${s.metadata.namespace ?? ''}/${s.metadata.name}`, s]));
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
        const secret = secrets.get(`${shoot.technicalID}/${ref.name}`) as (Raw & { data?: Record<string, string> }) | undefined;
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

  private evaluate(what: string, resourceVersion: string | undefined): void {
    if (![this.combined, this.managedResources, this.secrets].every((i) => i.hasSynced())) return;
    this.states++;
    const now = performance.now();
    const all = protectionGaps(this.stored(), this.expectations, this.topology);
    const open = new Set(all.map(gapPair));
    for (const shoot of this.expectations) {
      for (const namespace of new Set([...this.topology.gateways, ...shoot.sniGateways])) {
        const pair = `${shoot.technicalID} ${namespace}`;
        if (!open.has(pair)) this.protectedOnce.add(pair);
      }
    }
    const gaps = new Set(all.filter((g) => this.protectedOnce.has(gapPair(g))));
    const fault = this.announced.delete(what);
    for (const [gap, open] of this.openGaps) {
      if (gaps.has(gap)) continue;
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
  }
}
