// checkServedProtection on hand-made config dumps, for the adversarial shapes a real gateway
// rarely shows at once (the real shapes are judged on a real Envoy fed by Istio in
// served-protection-live.test.ts): shoots whose names are prefixes of others, a second chain
// for the same host, a filter after the router, an internal listener, the rules form inline,
// ECDS resources read by name only, a missing ECDS resource, and input that is not
// a config dump.
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import type { SeedAcl, ShootAcl } from '../../src/acl/model.js';
import { ecdsBucketOf, ecdsResourceName } from '../../src/rbac/connect-matcher-ecds.js';
import { HTTP_RBAC_TYPE, NETWORK_RBAC_TYPE } from '../../src/rbac/envoy-rbac-types.js';
import { FILTER_NAMES, shootStatPrefix } from '../../src/rbac/filter-values.js';
import { HCM_TYPE, ROUTER_TYPE, servedGateway } from '../../src/served/served-config.js';
import { TCP_PROXY_TYPE } from '../../src/rbac/shared-tunnel-hop.js';
import { checkServedProtection } from '../../src/served/served-protection.js';

const NS = 'istio-ingress';
const GATEWAY = { namespace: NS, selector: { app: 'istio-ingressgateway' } };
const FOO = 'shoot--p--foo';
const FOO_BAR = 'shoot--p--foo-bar';
const LEGACY = 'shoot-q--foo';

function shoot(id: string, hosts: string[]): ShootAcl {
  return { technicalID: id, rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [], mode: 'enforce' }, alwaysAllowed: [], legacyProxyAllowed: [], sniChains: [{ gateway: GATEWAY, hosts }] } as unknown as ShootAcl;
}

function seed(shoots: ShootAcl[], operator = defaultOperatorConfig()): SeedAcl {
  return { operator, gateways: [GATEWAY], observabilityWildcards: [], shoots };
}

const sniFilter = (id: string) => ({ name: FILTER_NAMES.sni, typed_config: { '@type': NETWORK_RBAC_TYPE, stat_prefix: shootStatPrefix('sni', id), rules: { action: 'DENY', policies: {} } } });
const tcp = (id: string) => ({ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY_TYPE, cluster: `outbound|443||kube-apiserver.${id}.svc.cluster.local` } });
const sniChain = (hosts: string[], filters: unknown[]) => ({ filter_chain_match: { server_names: hosts }, filters });
const listener = (name: string, port: number, chains: unknown[], extra: Record<string, unknown> = {}) => ({
  '@type': 'type.googleapis.com/envoy.admin.v3.ListenersConfigDump.DynamicListener',
  name,
  active_state: { listener: { name, address: { socket_address: { address: '0.0.0.0', port_value: port } }, filter_chains: chains, ...extra } },
});
const connectHcm = (httpFilters: unknown[]) => ({
  name: 'envoy.filters.network.http_connection_manager',
  typed_config: {
    '@type': HCM_TYPE,
    route_config: { virtual_hosts: [{ routes: [{ match: { connect_matcher: {} }, route: { cluster_header: 'X-Gardener-Destination' } }] }] },
    http_filters: [...httpFilters, { name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER_TYPE } }],
  },
});
const rulesFilter = (ids: string[]) => ({ name: 'gardener-acl-connect-8443-000', typed_config: { '@type': HTTP_RBAC_TYPE, rules: { action: 'DENY', policies: Object.fromEntries(ids.map((id) => [id, {}])) } } });
const discovered = (name: string) => ({ name, config_discovery: { config_source: { ads: {} }, type_urls: [HTTP_RBAC_TYPE] } });
const ecdsName = (name: string) => ({ '@type': 'type.googleapis.com/envoy.admin.v3.EcdsConfigDump.EcdsFilterConfig', ecds_filter: { name } });
const dump = (...configs: unknown[]) => ({ configs });

const findings = (s: SeedAcl, d: unknown) => checkServedProtection(s, NS, servedGateway(d)).findings.map((f) => `${f.severity} ${f.technicalID ?? '*'} ${f.path} ${f.where}`);

describe('checkServedProtection on hand-made dumps', () => {
  const sni = listener('0.0.0.0_9443', 9443, [
    sniChain(['api.foo.p.example.test'], [sniFilter(FOO), tcp(FOO)]),
    // The shoot whose name has foo's as a prefix: foo's filter does not protect it.
    sniChain(['api.foo-bar.p.example.test'], [sniFilter(FOO), tcp(FOO_BAR)]),
  ]);
  const ports = [listener('0.0.0.0_8132', 8132, [{ filters: [connectHcm([rulesFilter([FOO, FOO_BAR, LEGACY])])] }]), listener('0.0.0.0_8443', 8443, [{ filters: [connectHcm([rulesFilter([FOO, FOO_BAR, LEGACY])])] }])];

  it('a filter of a shoot whose name is a prefix does not count for the longer one; the stat prefix ends the ID', () => {
    const s = seed([shoot(FOO, ['api.foo.p.example.test']), shoot(FOO_BAR, ['api.foo-bar.p.example.test'])], { ...defaultOperatorConfig(), combinedForm: 'rules' });
    expect(findings(s, dump(sni, ...ports))).toEqual([`exposed ${FOO_BAR} api 0.0.0.0_9443 [api.foo-bar.p.example.test]`]);
  });

  it('a second chain for the same host without the filter (e.g. another listener) is exposed; the first one does not hide it', () => {
    const s = seed([shoot(FOO, ['api.foo.p.example.test'])], { ...defaultOperatorConfig(), combinedForm: 'rules' });
    const moved = listener('0.0.0.0_9444', 9444, [sniChain(['api.foo.p.example.test'], [tcp(FOO)])]);
    expect(findings(s, dump(sni, moved, ...ports))).toEqual([`exposed ${FOO} api 0.0.0.0_9444 [api.foo.p.example.test]`]);
  });

  it('a chain forwarding to the shoot without any of its filters is exposed even without a server name (legacy port); internal listeners are not judged', () => {
    const s = seed([shoot(LEGACY, [])], { ...defaultOperatorConfig(), combinedForm: 'rules' });
    const legacy = listener('0.0.0.0_8443', 8443, [{ filter_chain_match: { destination_port: 443 }, filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY_TYPE, cluster: `${LEGACY}--kube-apiserver-socket` } }] }]);
    const internal = { ...listener('gardener-acl-hop', 0, [{ filters: [tcp(LEGACY)] }], { internal_listener: {} }) };
    // 8443 carries no connection manager here (Gardener <= 1.122): the CONNECT patches for it match nothing.
    expect(findings(s, dump(legacy, internal, ports[0]))).toEqual(['absent * connect port 8443', `exposed ${LEGACY} legacy 0.0.0.0_8443 [port 8443]`]);
  });

  it('a filter after the router protects nobody', () => {
    const s = seed([shoot(FOO, [])]);
    const afterRouter = connectHcm([]);
    (afterRouter.typed_config.http_filters as unknown[]).push(rulesFilter([FOO]));
    expect(findings(s, dump(listener('0.0.0.0_8443', 8443, [{ filters: [afterRouter] }]), ports[0]))).toEqual([`exposed ${FOO} connect 0.0.0.0_8443`]);
  });

  it('ECDS read by name only: the shoot counts as covered by its own bucket when Envoy holds it; a bucket Envoy does not hold cuts the shoot off', () => {
    const s = seed([shoot(FOO, [])]);
    const bucket = ecdsResourceName(ecdsBucketOf(FOO, s.operator.ecdsBuckets));
    const other = ecdsResourceName((ecdsBucketOf(FOO, s.operator.ecdsBuckets) + 1) % s.operator.ecdsBuckets);
    const hcmPorts = [8132, 8443].map((port) => listener(`0.0.0.0_${port}`, port, [{ filters: [connectHcm([discovered(bucket), discovered(other)])] }]));
    expect(findings(s, dump(...hcmPorts, ecdsName(bucket), ecdsName(other)))).toEqual([]);
    expect(findings(s, dump(...hcmPorts, ecdsName(other)))).toEqual([`cut-off ${FOO} connect 0.0.0.0_8132`, `cut-off ${FOO} connect 0.0.0.0_8443`]);
    // Held, but only another bucket names it: not covered.
    const onlyOther = [8132, 8443].map((port) => listener(`0.0.0.0_${port}`, port, [{ filters: [connectHcm([discovered(other)])] }]));
    expect(findings(s, dump(...onlyOther, ecdsName(other)))).toEqual([`exposed ${FOO} connect 0.0.0.0_8132`, `exposed ${FOO} connect 0.0.0.0_8443`]);
  });

  it('not a config dump, or a dump without listeners, gives no listeners (verify and the controller refuse to judge it)', () => {
    for (const input of [null, 'text', [], {}, { configs: 'x' }, { configs: [{ '@type': 42 }] }]) expect(servedGateway(input).listeners).toEqual([]);
  });
});
