// The Gardener seed the Istio suites render: three ingress gateways (default, zonal, exposure
// class) and the conformance matrix's shoots spread over them, in Gardener's object shapes for
// one release at a time. Objects come from the templates under fixtures/gardener (shared parts)
// and are chosen and filled per era here (era parts); nothing is copied per era.

import { MATRIX_SHOOTS, type MatrixRule } from '../support/conformance-matrix.js';
import type { JsonObject, JsonValue } from '../envoy/json.js';
import type { GardenerEraFixture } from './eras.js';
import { instantiate, instantiateObjects } from './fixture-templates.js';

export const INGRESS_DOMAIN = 'ingress.seed.example.test';

export type GatewayKey = 'default' | 'zonal' | 'exposure';

export interface IngressGateway {
  readonly key: GatewayKey;
  readonly namespace: string;
  /** Pod labels = Gateway selector = EnvoyFilter workloadSelector (without `istio-role`, added per era). */
  readonly labels: Readonly<Record<string, string>>;
  readonly loadBalancerIP: string;
}

export const INGRESS_GATEWAYS: readonly IngressGateway[] = [
  { key: 'default', namespace: 'istio-ingress', labels: { app: 'istio-ingressgateway', istio: 'ingressgateway' }, loadBalancerIP: '198.18.10.1' },
  { key: 'zonal', namespace: 'istio-ingress--z1', labels: { app: 'istio-ingressgateway', istio: 'ingressgateway--zone--z1' }, loadBalancerIP: '198.18.10.2' },
  {
    key: 'exposure',
    namespace: 'istio-ingress-handler-internet',
    labels: {
      app: 'istio-ingressgateway',
      'gardener.cloud/role': 'exposureclass-handler',
      'handler.exposureclass.gardener.cloud/name': 'internet',
    },
    loadBalancerIP: '198.18.10.3',
  },
];

export interface FixtureShoot {
  readonly id: string;
  readonly project: string;
  readonly name: string;
  readonly gateway: GatewayKey;
  readonly rule?: MatrixRule;
  /** Istio TLS termination (HTTPS servers `tls` + `wildcard-tls`) where the era has it; else passthrough. */
  readonly tlsTermination: boolean;
  /** HA VPN: servers `vpn-seed-server-0..n-1`; else one `vpn-seed-server`. */
  readonly haVpnServers?: number;
  /** The destination the shoot's apiserver-proxy writes into its PROXY header (legacy port, <= 1.122). */
  readonly apiserverIP: string;
  readonly egressCIDRs: readonly string[];
}

interface Placement {
  readonly gateway: GatewayKey;
  readonly tlsTermination?: boolean;
  readonly haVpnServers?: number;
}

// The matrix shoots (their IDs and rules are what the matrix's clients are named after), placed
// so that every path shape occurs: default gateway with and without ACL, TLS termination, a zonal
// and an exposure-class shoot with an ACL (wildcard host on the default gateway), HA VPN.
const PLACEMENT: Readonly<Record<string, Placement>> = {
  'shoot--p--foo': { gateway: 'default', haVpnServers: 2 },
  'shoot--p--foo-bar': { gateway: 'default' },
  'shoot--bar--a': { gateway: 'zonal' },
  'shoot--x-bar--a': { gateway: 'exposure' },
  'shoot-q--foo': { gateway: 'default', tlsTermination: true },
  'shoot--xshoot-q--foo': { gateway: 'exposure' },
};

function projectAndName(id: string): { project: string; name: string } {
  const match = /^shoot--?(.+)--([^-].*)$/.exec(id);
  if (match?.[1] === undefined || match[2] === undefined) throw new Error(`not a technical ID: ${id}`);
  return { project: match[1], name: match[2] };
}

export const FIXTURE_SHOOTS: readonly FixtureShoot[] = MATRIX_SHOOTS.map((shoot, index) => {
  const placement = PLACEMENT[shoot.id];
  if (placement === undefined) throw new Error(`no placement for matrix shoot ${shoot.id}`);
  return {
    id: shoot.id,
    ...projectAndName(shoot.id),
    gateway: placement.gateway,
    ...(shoot.rule === undefined ? {} : { rule: shoot.rule }),
    tlsTermination: placement.tlsTermination ?? false,
    ...(placement.haVpnServers === undefined ? {} : { haVpnServers: placement.haVpnServers }),
    apiserverIP: `240.0.0.${10 + index}`,
    egressCIDRs: [`198.18.${index}.0/24`],
  };
});

export function shortID(id: string): string {
  return id.replace(/^shoot--?/, '');
}

export function shootHosts(shoot: FixtureShoot): { internal: string; external: string; wildcard: string; plutono: string } {
  return {
    internal: `api.${shoot.name}.${shoot.project}.internal.example.test`,
    external: `api.${shoot.name}.${shoot.project}.example.test`,
    wildcard: `api-${shortID(shoot.id)}.${INGRESS_DOMAIN}`,
    plutono: `gu-${shortID(shoot.id)}.${INGRESS_DOMAIN}`,
  };
}

export function vpnServerNames(shoot: FixtureShoot): string[] {
  return shoot.haVpnServers === undefined ? ['vpn-seed-server'] : Array.from({ length: shoot.haVpnServers }, (_unused, i) => `vpn-seed-server-${i}`);
}

// ---------------------------------------------------------------------------------------------
// Composition

/** The gateway's labels in this era (its pods, and every selector that targets it). */
export function gatewayLabels(era: GardenerEraFixture, gateway: IngressGateway): Record<string, string> {
  return era.istioRoleLabel ? { ...gateway.labels, 'istio-role': 'seed' } : { ...gateway.labels };
}

export function ingressGateway(key: GatewayKey): IngressGateway {
  const gateway = INGRESS_GATEWAYS.find((g) => g.key === key);
  if (gateway === undefined) throw new Error(`no gateway ${key}`);
  return gateway;
}

function gatewayObjects(era: GardenerEraFixture, gateway: IngressGateway): JsonObject[] {
  const base = { namespace: gateway.namespace, labels: gatewayLabels(era, gateway) };
  return [
    ...instantiateObjects('seed/ingress-gateway.yaml', { ...base, servicePorts: [...era.servicePorts], fromWorldToPorts: fromWorldToPorts(era), loadBalancerIP: gateway.loadBalancerIP }),
    ...instantiateObjects('gateway/proxy-protocol-sni.yaml', base),
    ...(era.tlsTunnel
      ? instantiateObjects('gateway/tls-tunnel.yaml', {
          ...base,
          tunnelGateway: era.tlsTunnel.gateway,
          tunnelGatewayHost: era.tlsTunnel.gatewayHost,
          tunnelVirtualHost: era.tlsTunnel.virtualHost,
          destinationRegex: era.destinationRegex,
        })
      : []),
    ...(era.httpProxy ? instantiateObjects('gateway/http-proxy.yaml', { ...base, destinationRegex: era.destinationRegex }) : []),
    ...(era.legacyApiserverProxy ? instantiateObjects('gateway/legacy-proxy-protocol.yaml', base) : []),
    ...(era.istioTLSTermination ? instantiateObjects('gateway/apiserver-tls-termination.yaml', base) : []),
    ...(era.observabilityGateways ? instantiateObjects('gateway/misdirected-requests.yaml', { namespace: gateway.namespace }) : []),
    ...(era.hstsFilter ? instantiateObjects('gateway/hsts.yaml', { namespace: gateway.namespace }) : []),
  ];
}

/** The Service annotation with the listener ports the world may reach: its ports' targets, in order. */
function fromWorldToPorts(era: GardenerEraFixture): string {
  const ports = [...new Set(era.servicePorts.map((p) => Number(p['targetPort'])))].sort((a, b) => a - b);
  return JSON.stringify(ports.map((port) => ({ port, protocol: 'TCP' })));
}

/** Does the shoot use Istio TLS termination in this era? */
export function usesTlsTermination(era: GardenerEraFixture, shoot: FixtureShoot): boolean {
  return era.istioTLSTermination && shoot.tlsTermination;
}

/** Namespaces a shoot's kube-apiserver objects are exported to (1.143+), or everything. */
function exportTo(era: GardenerEraFixture, namespaces: readonly string[]): string[] {
  return era.exportToAll ? ['*'] : [...new Set(namespaces)].sort();
}

function serviceObjects(era: GardenerEraFixture, shoot: FixtureShoot): JsonObject[] {
  const own = ingressGateway(shoot.gateway).namespace;
  const apiserverExport = exportTo(era, [own, ingressGateway('default').namespace]).join(',');
  const apiserverServices = usesTlsTermination(era, shoot) ? ['kube-apiserver', 'kube-apiserver-mtls', 'kube-apiserver-connection-upgrade'] : ['kube-apiserver'];
  return [
    ...apiserverServices.flatMap((name) =>
      instantiateObjects('shoot/service.yaml', { namespace: shoot.id, name, portName: 'kube-apiserver', port: 443, exportTo: apiserverExport }),
    ),
    ...vpnServerNames(shoot).flatMap((name) =>
      instantiateObjects('shoot/service.yaml', { namespace: shoot.id, name, portName: 'openvpn', port: 1194, exportTo: exportTo(era, [own]).join(',') }),
    ),
  ];
}

/** The Gateways (and VirtualServices) exposing the API server, one per Gateway server configuration. */
function apiserverExposure(era: GardenerEraFixture, shoot: FixtureShoot): JsonObject[] {
  const own = ingressGateway(shoot.gateway);
  const fallback = ingressGateway('default');
  const hosts = shootHosts(shoot);
  const exported = exportTo(era, [own.namespace, fallback.namespace]);
  if (usesTlsTermination(era, shoot)) {
    if (shoot.gateway !== 'default') throw new Error('the TLS-termination fixture covers shoots on the default gateway only');
    return instantiateObjects('shoot/kube-apiserver-tls-termination.yaml', {
      namespace: shoot.id,
      gatewaySelector: gatewayLabels(era, own),
      gatewayNamespace: own.namespace,
      internalHost: hosts.internal,
      externalHost: hosts.external,
      wildcardHost: hosts.wildcard,
      exportTo: exported,
    });
  }
  const passthrough = (gatewayName: string, gateway: IngressGateway, serverHosts: string[]): JsonObject[] =>
    instantiateObjects('shoot/kube-apiserver-passthrough.yaml', {
      namespace: shoot.id,
      gatewayName,
      gatewaySelector: gatewayLabels(era, gateway),
      hosts: serverHosts,
      exportTo: exported,
    });
  const destinationRule = instantiateObjects('shoot/kube-apiserver-destination-rule.yaml', { namespace: shoot.id, exportTo: exported });
  if (era.wildcardGateway === 'kube-apiserver-ingress') {
    // <= 1.113: the wildcard host has its own Gateway on the shoot's non-zonal gateway.
    const nonZonal = shoot.gateway === 'zonal' ? fallback : own;
    return [...destinationRule, ...passthrough('kube-apiserver', own, [hosts.internal, hosts.external]), ...passthrough('kube-apiserver-ingress', nonZonal, [hosts.wildcard])];
  }
  if (shoot.gateway === 'default') return [...destinationRule, ...passthrough('kube-apiserver', own, [hosts.internal, hosts.external, hosts.wildcard])];
  return [...destinationRule, ...passthrough('kube-apiserver', own, [hosts.internal, hosts.external]), ...passthrough('kube-apiserver-wildcard', fallback, [hosts.wildcard])];
}

/** The Envoy cluster the shoot's legacy 8443 chain and the socket CONNECT value lead to. */
export function socketCluster(id: string): string {
  return `${id}--kube-apiserver-socket`;
}

function apiserverProxyFilter(era: GardenerEraFixture, shoot: FixtureShoot): JsonObject[] {
  const tls = usesTlsTermination(era, shoot);
  if (!era.legacyApiserverProxy && !tls) return [];
  const own = ingressGateway(shoot.gateway);
  const legacyChains: JsonValue[] = era.legacyApiserverProxy
    ? instantiate('fragments/legacy-apiserver-proxy-chain.yaml', {
        cluster: tls ? socketCluster(shoot.id) : `outbound|443||kube-apiserver.${shoot.id}.svc.cluster.local`,
        apiserverIP: shoot.apiserverIP,
      })
    : [];
  const socketPatches = tls ? instantiate('fragments/apiserver-proxy-socket-patches.yaml', { namespace: shoot.id }).flatMap((d) => (Array.isArray(d) ? d : [d])) : [];
  return instantiateObjects('shoot/apiserver-proxy.yaml', {
    name: era.apiserverProxyFilterName(shoot.id),
    gatewayNamespace: own.namespace,
    gatewaySelector: gatewayLabels(era, own),
    legacyChains,
    socketPatches,
  });
}

function shootObjects(era: GardenerEraFixture, shoot: FixtureShoot): JsonObject[] {
  const fallback = ingressGateway('default');
  const optOut: Record<string, string> = era.istioTLSTermination && !shoot.tlsTermination ? { 'shoot.gardener.cloud/disable-istio-tls-termination': 'true' } : {};
  return [
    ...instantiateObjects('shoot/control-plane.yaml', {
      namespace: shoot.id,
      shootName: shoot.name,
      project: shoot.project,
      ingressDomain: INGRESS_DOMAIN,
      egressCIDRs: [...shoot.egressCIDRs],
      shootAnnotations: optOut,
    }),
    ...(shoot.rule === undefined ? [] : instantiateObjects('shoot/extension.yaml', { namespace: shoot.id, rule: { ...shoot.rule, cidrs: [...shoot.rule.cidrs] } })),
    ...serviceObjects(era, shoot),
    ...apiserverExposure(era, shoot),
    ...apiserverProxyFilter(era, shoot),
    ...(era.observabilityGateways
      ? instantiateObjects('shoot/observability.yaml', {
          namespace: shoot.id,
          host: shootHosts(shoot).plutono,
          defaultGatewayLabels: gatewayLabels(era, fallback),
          defaultGatewayNamespace: fallback.namespace,
        })
      : []),
  ];
}

/** Gardener's objects of the whole seed in this era (what gardenlet and Gardener's charts create). */
export function gardenerSeedObjects(era: GardenerEraFixture, shoots: readonly FixtureShoot[] = FIXTURE_SHOOTS): JsonObject[] {
  const fallback = ingressGateway('default');
  return [
    ...INGRESS_GATEWAYS.flatMap((gateway) => gatewayObjects(era, gateway)),
    ...(era.nginxWildcard ? instantiateObjects('seed/nginx-ingress.yaml', { ingressDomain: INGRESS_DOMAIN, defaultGatewayLabels: gatewayLabels(era, fallback) }) : []),
    ...shoots.flatMap((shoot) => shootObjects(era, shoot)),
  ];
}
