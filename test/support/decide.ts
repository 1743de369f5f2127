// Decisions of the generated filters for one request, through the oracle's model of Envoy
// (test/oracle/envoy-chain-evaluator.ts), for whichever combined form the seed's operator
// configuration names (the default form unless a test pins another).
import type { CombinedFormName } from '../../src/config/operator-config.js';
import type { SeedAcl } from '../../src/acl/model.js';
import { allEnvoyFilters, buildSeedEnvoyFilters, type AnyGeneratedEnvoyFilter } from '../../src/rbac/seed-envoy-filters.js';
import type { TargetReading } from '../oracle/acl-semantics.js';
import { addr } from '../oracle/addresses.js';
import { ENVOY_BEHAVIOURS, EnvoyConnectChain, type EnvoyBehaviour } from '../oracle/envoy-chain-evaluator.js';
import { sniChainRules } from '../oracle/placement.js';
import { evalRbac } from '../oracle/rbac-evaluator.js';

export type Headers = readonly (readonly [string, string])[];

/** How a form of the combined filters reads "the request targets S" (docs/design.md section 3). */
export function readingOf(form: CombinedFormName): TargetReading {
  return form === 'rules' ? 'mentions' : 'routable';
}

export class Decider {
  readonly filters: readonly AnyGeneratedEnvoyFilter[];
  private readonly chains = new Map<string, EnvoyConnectChain[]>();

  constructor(
    readonly seed: SeedAcl,
    /** The Envoys whose verdicts must agree (default: every supported version). */
    private readonly behaviours: readonly EnvoyBehaviour[] = ENVOY_BEHAVIOURS,
  ) {
    this.filters = allEnvoyFilters(buildSeedEnvoyFilters(seed));
  }

  get form(): CombinedFormName {
    return this.seed.operator.combinedForm;
  }

  get reading(): TargetReading {
    return readingOf(this.form);
  }

  private chainsFor(namespace: string, port: number): EnvoyConnectChain[] {
    const key = `${namespace}:${port}`;
    let chains = this.chains.get(key);
    if (chains === undefined) {
      chains = this.behaviours.map((b) => new EnvoyConnectChain(this.filters, { namespace, port }, b));
      this.chains.set(key, chains);
    }
    return chains;
  }

  /** Does a CONNECT with these headers from `remote` pass every protected port of `namespace`, on every supported Envoy? */
  connect(headers: Headers, remote: string, options: { direct?: string; namespace?: string } = {}): boolean {
    const request = { headers, remote: addr(remote), direct: addr(options.direct ?? remote) };
    const ns = options.namespace ?? 'istio-ingress';
    const verdicts = this.seed.operator.protectedPorts.flatMap((port) =>
      this.chainsFor(ns, port).map((chain) => ({ where: `port ${port} on Envoy ${chain.behaviour.version}`, outcome: chain.decide(request) })),
    );
    const admitted = new Set(verdicts.map((v) => v.outcome.kind === 'passed'));
    if (admitted.size !== 1) throw new Error(`ports or Envoy versions disagree on ${JSON.stringify(headers)} from ${remote}: ${verdicts.map((v) => `${v.where}: ${JSON.stringify(v.outcome)}`).join('; ')}`);
    return [...admitted][0] as boolean;
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
