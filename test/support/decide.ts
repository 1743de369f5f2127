// Decisions of the generated filters for one request, via the RBAC evaluator.
import type { SeedAcl } from '../../src/acl/model.js';
import type { GeneratedEnvoyFilter } from '../../src/rbac/envoy-filter-types.js';
import { allEnvoyFilters, buildSeedEnvoyFilters } from '../../src/rbac/seed-envoy-filters.js';
import { addr } from '../oracle/addresses.js';
import { connectRules, sniChainRules } from '../oracle/placement.js';
import { evalRbac } from '../oracle/rbac-evaluator.js';
import { rulesFormOnly } from './rules-form.js';

export type Headers = readonly (readonly [string, string])[];

export class Decider {
  readonly filters: readonly GeneratedEnvoyFilter[];
  constructor(readonly seed: SeedAcl) {
    this.filters = rulesFormOnly(allEnvoyFilters(buildSeedEnvoyFilters(seed)));
  }

  /** Does a CONNECT with these headers from `remote` pass every protected port of `namespace`? */
  connect(headers: Headers, remote: string, options: { direct?: string; namespace?: string } = {}): boolean {
    const ctx = { remote: addr(remote), direct: addr(options.direct ?? remote), headers };
    const ns = options.namespace ?? 'istio-ingress';
    const verdicts = this.seed.operator.protectedPorts.map((port) => connectRules(this.filters, ns, port).every((r) => evalRbac(r, ctx)));
    if (new Set(verdicts).size !== 1) throw new Error(`ports disagree: ${verdicts.join(',')}`);
    return verdicts[0] as boolean;
  }

  /** Does a TLS connection with this SNI reach the chain whose server names are `chainHosts`? */
  sni(chainHosts: readonly string[], sni: string, remote: string, options: { direct?: string; namespace?: string } = {}): boolean {
    const ctx = { remote: addr(remote), direct: addr(options.direct ?? remote), sni };
    return sniChainRules(this.filters, options.namespace ?? 'istio-ingress', this.seed.operator.sniPort, chainHosts).every((r) => evalRbac(r, ctx));
  }
}

export const vpn = (id: string, i?: number): string => `outbound|1194||vpn-seed-server${i === undefined ? '' : `-${i}`}.${id}.svc.cluster.local`;
export const kapi = (id: string): string => `outbound|443||kube-apiserver.${id}.svc.cluster.local`;
export const socket = (id: string): string => `${id}--kube-apiserver-socket`;
