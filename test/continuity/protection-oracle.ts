// Whether a set of STORED objects protects every ACL shoot on every path, decided by docs/design.md
// section 3's oracle (test/oracle/acl-semantics.ts) and by the oracle's model of how Envoy runs
// the stored filters (test/oracle/envoy-chain-evaluator.ts for the CONNECT listeners, whatever
// form or mix of forms is stored; test/oracle/rbac-evaluator.ts for the SNI chains), never by the
// generator's own code.
//
// Paths: the CONNECT ports of every gateway (every stored combined object of the gateway's
// namespace in the chain, in Istio's order, ECDS buckets resolved by name, on Envoy 1.37 and 1.40;
// both routing headers) and the SNI chains of the shoot's own filters as its ManagedResource lists
// them (what the resource manager applies). A gap is either "open" (a client the owner's rule
// refuses is admitted) or "cut off" (a client every acceptable rule admits, e.g. the shoot's own
// nodes, is refused, by a 403 or, for a listener naming a missing ECDS resource without a default,
// a 500). What the objects hold decides, not whether a shoot's name appears in them.
import { formatCidr, parseCidr, type Cidr } from '../../src/acl/cidr.js';
import type { AclRule } from '../../src/acl/acl-rule.js';
import type { GeneratedEnvoyFilter } from '../../src/rbac/envoy-filter-types.js';
import type { RbacRules } from '../../src/rbac/envoy-rbac-types.js';
import { admits } from '../oracle/acl-semantics.js';
import { addr } from '../oracle/addresses.js';
import { ENVOY_BEHAVIOURS, EnvoyConnectChain, type ConnectRequest, type EnvoyBehaviour } from '../oracle/envoy-chain-evaluator.js';
import { isRecord } from '../oracle/placement.js';
import { evalRbac } from '../oracle/rbac-evaluator.js';
import { kapi, vpn } from '../support/decide.js';

/** What one ACL shoot must get; any of `rules` is acceptable (an ACL change in flight has two). */
export interface ShootExpectation {
  readonly technicalID: string;
  readonly rules: readonly AclRule[];
  readonly alwaysAllowed: readonly Cidr[];
  /** Gateway namespaces holding the shoot's SNI chains (its own filters). */
  readonly sniGateways: readonly string[];
}

export interface StoredState {
  /** The combined CONNECT filters as stored. */
  readonly combined: readonly unknown[];
  /** Per shoot: the EnvoyFilters its ManagedResource's Secret lists (undefined: no MR or no Secret). */
  readonly perShoot: ReadonlyMap<string, readonly unknown[] | undefined>;
}

export interface Topology {
  readonly gateways: readonly string[];
  readonly connectPorts: readonly number[];
  readonly sniPort: number;
}

/** Addresses outside every range the fixtures use, one per family plus an IPv4-mapped one. */
const OUTSIDERS = ['100.64.0.77', '192.0.2.77', '203.0.113.77', '198.51.100.77', '2001:db8:ffff::77', '2001:db9::77', '::ffff:100.64.0.77'];

const firstAddress = (cidr: Cidr): string => formatCidr(cidr).split('/')[0] ?? '';

/** Probe clients for a shoot: inside each rule range, inside each always-allowed range, outside all. */
function probes(shoot: ShootExpectation): string[] {
  const inside = shoot.rules.flatMap((r) => r.cidrs.map(firstAddress));
  return [...new Set([...inside, ...shoot.alwaysAllowed.map(firstAddress), ...OUTSIDERS])];
}

/** The verdict every acceptable rule agrees on, or undefined where they differ. */
function expected(shoot: ShootExpectation, client: string): boolean | undefined {
  const a = addr(client);
  const verdicts = new Set(shoot.rules.map((rule) => admits({ technicalID: shoot.technicalID, rule, alwaysAllowed: shoot.alwaysAllowed }, { remote: a, direct: a })));
  return verdicts.size === 1 ? [...verdicts][0] : undefined;
}

function asFilters(objects: readonly unknown[]): GeneratedEnvoyFilter[] {
  return objects as GeneratedEnvoyFilter[];
}

/** SNI chains (host -> rules) the shoot's own filters put on `namespace`. */
function sniChains(filters: readonly GeneratedEnvoyFilter[], namespace: string, port: number): Map<string, RbacRules[]> {
  const chains = new Map<string, RbacRules[]>();
  for (const f of filters) {
    if (f.metadata.namespace !== namespace) continue;
    for (const p of f.spec.configPatches) {
      if (p.applyTo !== 'NETWORK_FILTER' || p.match.listener.portNumber !== port || !('sni' in p.match.listener.filterChain)) continue;
      const host = p.match.listener.filterChain.sni;
      chains.set(host, [...(chains.get(host) ?? []), ...(p.patch.value.typed_config.rules ? [p.patch.value.typed_config.rules] : [])]);
    }
  }
  return chains;
}

/**
 * The CONNECT chain of one gateway and port on every supported Envoy, the later ones built only
 * when a request needs them, and the verdicts it gave (the checker asks the same questions after
 * every stored change, and its caller polls: while the stored objects stay the same, the answers do).
 */
class ChainsAt {
  private readonly chains: (EnvoyConnectChain | undefined)[];
  private readonly answered = new Map<string, { version: string; admitted: boolean }[]>();
  constructor(
    private readonly objects: readonly unknown[],
    private readonly namespace: string,
    private readonly port: number,
  ) {
    this.chains = ENVOY_BEHAVIOURS.map((behaviour, i) => (i === 0 ? this.build(behaviour) : undefined));
  }

  /** Whether this chain was built from exactly these objects (the informers replace an object on every change, never edit it). */
  builtFrom(objects: readonly unknown[]): boolean {
    return objects.length === this.objects.length && objects.every((o, i) => o === this.objects[i]);
  }

  private build(behaviour: EnvoyBehaviour): EnvoyConnectChain {
    return new EnvoyConnectChain(this.objects, { namespace: this.namespace, port: this.port }, behaviour);
  }

  private chain(i: number): EnvoyConnectChain {
    const chain = this.chains[i] ?? this.build(ENVOY_BEHAVIOURS[i] as EnvoyBehaviour);
    this.chains[i] = chain;
    return chain;
  }

  verdicts(request: ConnectRequest): { version: string; admitted: boolean }[] {
    const key = JSON.stringify([request.headers, String(request.remote.value), request.remote.family, String(request.direct.value), request.direct.family]);
    const known = this.answered.get(key);
    if (known !== undefined) return known;
    const verdicts = this.decide(request);
    this.answered.set(key, verdicts);
    return verdicts;
  }

  private decide(request: ConnectRequest): { version: string; admitted: boolean }[] {
    const first = this.chain(0);
    const run = first.run(request);
    const verdicts = [{ version: first.behaviour.version, admitted: run.outcome.kind === 'passed' }];
    if (run.versionNeutral) return verdicts;
    for (let i = 1; i < ENVOY_BEHAVIOURS.length; i++) {
      const chain = this.chain(i);
      verdicts.push({ version: chain.behaviour.version, admitted: chain.admits(request) });
    }
    return verdicts;
  }
}

/** The chains last built per gateway namespace and port, reused while the stored objects there are the same objects. */
const chainCache = new Map<string, ChainsAt>();

/** Every gap of the stored state, as stable one-line descriptions (sorted). */
export function protectionGaps(state: StoredState, shoots: readonly ShootExpectation[], topology: Topology): string[] {
  const gaps = new Set<string>();
  const judge = (where: string, shoot: ShootExpectation, client: string, admitted: () => boolean) => {
    const want = expected(shoot, client);
    if (want === undefined) return;
    let got: boolean;
    try {
      got = admitted();
    } catch (error) {
      gaps.add(`${shoot.technicalID} ${where}: stored filter cannot be evaluated (${(error as Error).message})`);
      return;
    }
    if (got && !want) gaps.add(`${shoot.technicalID} ${where}: open (admits ${client})`);
    if (!got && want) gaps.add(`${shoot.technicalID} ${where}: cut off (refuses ${client})`);
  };
  // Per gateway and port: the chain as the first supported Envoy runs it, the others' only when a
  // request could tell them apart (ChainRun.versionNeutral; the probes here never do). Objects the
  // model cannot read make every shoot's verdict there unknown.
  const chainsAt = (namespace: string, port: number): ChainsAt | Error => {
    const key = `${namespace}:${port}`;
    const objects = state.combined.filter((o) => isRecord(o) && isRecord(o['metadata']) && o['metadata']['namespace'] === namespace);
    const cached = chainCache.get(key);
    if (cached !== undefined && !(cached instanceof Error) && cached.builtFrom(objects)) return cached;
    let found: ChainsAt | Error;
    try {
      found = new ChainsAt(objects, namespace, port);
    } catch (error) {
      found = error as Error;
    }
    // An unreadable state is not cached: it is judged again (and reported again) until it changes.
    if (!(found instanceof Error)) chainCache.set(key, found);
    return found;
  };
  for (const shoot of shoots) {
    const clients = probes(shoot);
    for (const namespace of topology.gateways) {
      for (const port of topology.connectPorts) {
        const at = chainsAt(namespace, port);
        for (const headers of [[['x-gardener-destination', kapi(shoot.technicalID)]], [['reversed-vpn', vpn(shoot.technicalID)]]] as const) {
          const where = `CONNECT ${namespace}:${port} ${headers[0][0]}`;
          for (const client of clients) {
            const a = addr(client);
            let verdicts: { version: string; admitted: boolean }[];
            try {
              if (at instanceof Error) throw at;
              verdicts = at.verdicts({ headers, remote: a, direct: a });
            } catch (error) {
              judge(where, shoot, client, () => {
                throw error;
              });
              continue;
            }
            // The same verdict on every Envoy is one line; where they differ, each says which Envoy.
            if (verdicts.every((v) => v.admitted === verdicts[0]?.admitted)) judge(where, shoot, client, () => verdicts[0]?.admitted ?? true);
            else for (const v of verdicts) judge(`${where} on Envoy ${v.version}`, shoot, client, () => v.admitted);
          }
        }
      }
    }
    const own = state.perShoot.get(shoot.technicalID);
    for (const namespace of shoot.sniGateways) {
      const chains = own ? sniChains(asFilters(own), namespace, topology.sniPort) : new Map<string, RbacRules[]>();
      if (chains.size === 0) {
        gaps.add(`${shoot.technicalID} SNI ${namespace}: no stored SNI filter (ManagedResource ${own ? 'lists none here' : 'or its Secret missing'})`);
        continue;
      }
      for (const [host, rules] of chains) {
        for (const client of clients) {
          const a = addr(client);
          judge(`SNI ${namespace} ${host}`, shoot, client, () => rules.every((r) => evalRbac(r, { remote: a, direct: a, sni: host })));
        }
      }
    }
  }
  return [...gaps].sort();
}

/** CIDR strings as the oracle wants them; throws on a fixture typo. */
export function cidrs(texts: readonly string[]): Cidr[] {
  return texts.map((t) => {
    const r = parseCidr(t);
    if (!r.ok) throw new Error(`fixture CIDR ${t}: ${r.reason}`);
    return r.cidr;
  });
}
