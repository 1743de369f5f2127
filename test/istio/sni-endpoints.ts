// Where each TLS host of the fixture seed must be served in an era, derived from Gardener's rules
// (gardener-seed-networking.md sections 3 and 8), not from what Istio rendered: which gateway,
// whether Istio terminates TLS (and with which credential), which cluster it leads to, and whose
// ACL governs it. The suites compare Istio's output and a real Envoy's behaviour against this.

import type { GardenerEraFixture } from './eras.js';
import {
  FIXTURE_SHOOTS,
  INGRESS_DOMAIN,
  shootHosts,
  shortID,
  usesTlsTermination,
  type FixtureShoot,
  type GatewayKey,
} from './seed-fixture.js';

export interface SniEndpoint {
  readonly gateway: GatewayKey;
  readonly sni: string;
  /** Technical ID of the shoot whose ACL governs this host. */
  readonly owner: string;
  /** The server names of the filter chain that serves it (Istio: one chain per Gateway server). */
  readonly chain: readonly string[];
  /** TLS passthrough, or terminated by Istio with this credential's certificate. */
  readonly tls: { readonly mode: 'passthrough' } | { readonly mode: 'terminate'; readonly credentialName: string };
  /** The Envoy cluster an admitted connection (or request) reaches. */
  readonly cluster: string;
  readonly kind: 'api' | 'api-wildcard' | 'observability' | 'observability-wildcard';
}

export const NGINX_CLUSTER = 'outbound|443||nginx-ingress-controller.garden.svc.cluster.local';

const kubeApiserver = (id: string): string => `outbound|443||kube-apiserver.${id}.svc.cluster.local`;

function apiEndpoints(era: GardenerEraFixture, shoot: FixtureShoot): SniEndpoint[] {
  const hosts = shootHosts(shoot);
  const cluster = kubeApiserver(shoot.id);
  if (usesTlsTermination(era, shoot)) {
    const terminate = (credentialName: string) => ({ mode: 'terminate', credentialName }) as const;
    const regular = [hosts.internal, hosts.external];
    return [
      ...regular.map((sni) => ({ gateway: shoot.gateway, sni, owner: shoot.id, chain: regular, tls: terminate(`${shoot.id}-kube-apiserver-tls`), cluster, kind: 'api' as const })),
      { gateway: 'default', sni: hosts.wildcard, owner: shoot.id, chain: [hosts.wildcard], tls: terminate(`${shoot.id}-kube-apiserver-wildcard-tls`), cluster, kind: 'api-wildcard' },
    ];
  }
  const passthrough = { mode: 'passthrough' } as const;
  // 1.114+: the wildcard host shares the chain on the default gateway; other gateways get
  // `kube-apiserver-wildcard` on the default one. <= 1.113: `kube-apiserver-ingress` on the
  // shoot's non-zonal gateway.
  const sharedChain = era.wildcardGateway === 'kube-apiserver-wildcard' && shoot.gateway === 'default';
  const regular = sharedChain ? [hosts.internal, hosts.external, hosts.wildcard] : [hosts.internal, hosts.external];
  const wildcardGateway: GatewayKey = era.wildcardGateway === 'kube-apiserver-ingress' ? (shoot.gateway === 'zonal' ? 'default' : shoot.gateway) : 'default';
  return [
    ...regular.map((sni) => ({ gateway: shoot.gateway, sni, owner: shoot.id, chain: regular, tls: passthrough, cluster, kind: sni === hosts.wildcard ? ('api-wildcard' as const) : ('api' as const) })),
    ...(sharedChain ? [] : [{ gateway: wildcardGateway, sni: hosts.wildcard, owner: shoot.id, chain: [hosts.wildcard], tls: passthrough, cluster, kind: 'api-wildcard' as const }]),
  ];
}

function observabilityEndpoints(era: GardenerEraFixture, shoot: FixtureShoot): SniEndpoint[] {
  const endpoints: SniEndpoint[] = [];
  const hosts = shootHosts(shoot);
  const wildcardChain = [`*.${INGRESS_DOMAIN}`];
  if (era.observabilityGateways) {
    endpoints.push({
      gateway: 'default',
      sni: hosts.plutono,
      owner: shoot.id,
      chain: [hosts.plutono],
      tls: { mode: 'terminate', credentialName: `${shoot.id}-plutono-seed-ingress-wildcard` },
      cluster: `outbound|3000||plutono.${shoot.id}.svc.cluster.local`,
      kind: 'observability',
    });
  }
  if (era.nginxWildcard) {
    // Hosts without an exact chain of their own end up on nginx's wildcard chain.
    const prefixes = era.observabilityGateways ? ['p', 'au'] : ['p', 'au', 'gu'];
    for (const prefix of prefixes) {
      endpoints.push({
        gateway: 'default',
        sni: `${prefix}-${shortID(shoot.id)}.${INGRESS_DOMAIN}`,
        owner: shoot.id,
        chain: wildcardChain,
        tls: { mode: 'passthrough' },
        cluster: NGINX_CLUSTER,
        kind: 'observability-wildcard',
      });
    }
  }
  return endpoints;
}

/** Every TLS host of every shoot in this era, where it is served and who governs it. */
export function sniEndpoints(era: GardenerEraFixture): SniEndpoint[] {
  return FIXTURE_SHOOTS.flatMap((shoot) => [...apiEndpoints(era, shoot), ...observabilityEndpoints(era, shoot)]);
}
