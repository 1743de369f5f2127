// Whether a set of STORED objects protects every ACL shoot on every path, decided by DESIGN
// section 3's oracle (test/oracle/acl-semantics.ts) and an RBAC evaluator that reads the stored
// filters as Envoy would (test/oracle/rbac-evaluator.ts), never by the generator's own code.
//
// Paths: the CONNECT ports of every gateway (the combined filters, both routing headers) and the
// SNI chains of the shoot's own filters as its ManagedResource lists them (what the resource
// manager applies). A gap is either "open" (a client the owner's rule refuses is admitted) or
// "cut off" (a client every acceptable rule admits, e.g. the shoot's own nodes, is refused).
import { formatCidr, parseCidr, type Cidr } from '../../src/acl/cidr.js';
import type { AclRule } from '../../src/acl/provider-config.js';
import type { GeneratedEnvoyFilter } from '../../src/rbac/envoy-filter-types.js';
import type { RbacRules } from '../../src/rbac/envoy-rbac-types.js';
import { admits } from '../oracle/acl-semantics.js';
import { addr } from '../oracle/addresses.js';
import { connectRules } from '../oracle/placement.js';
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

/** Every gap of the stored state, as stable one-line descriptions (sorted). */
export function protectionGaps(state: StoredState, shoots: readonly ShootExpectation[], topology: Topology): string[] {
  const gaps = new Set<string>();
  const combined = asFilters(state.combined);
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
  for (const shoot of shoots) {
    const clients = probes(shoot);
    for (const namespace of topology.gateways) {
      for (const port of topology.connectPorts) {
        const rules = connectRules(combined, namespace, port);
        for (const headers of [[['x-gardener-destination', kapi(shoot.technicalID)]], [['reversed-vpn', vpn(shoot.technicalID)]]] as const) {
          for (const client of clients) {
            const a = addr(client);
            judge(`CONNECT ${namespace}:${port} ${headers[0][0]}`, shoot, client, () => rules.every((r) => evalRbac(r, { remote: a, direct: a, headers })));
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
