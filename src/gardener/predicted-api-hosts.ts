// The host names Gardener will give a shoot's API server Gateway, known before the Gateway exists.
// gardenlet reconciles the acl Extension before kube-apiserver and creates the Gateway only once
// kube-apiserver is ready; Istio serves the new SNI chain as soon as it sees the Gateway. A filter
// written only after the controller saw the Gateway leaves the chain open until controller,
// resource manager and istiod catch up. A patch for a host that has no chain yet matches nothing
// and costs nothing, so the shoot's filter is written ahead for every host it will have.
import type { GatewayWorkload, SniChain } from '../acl/model.js';
import type { Cluster, DnsRecord } from './objects.js';

/** Gardener's DNSRecords of a shoot's API server: `<shoot>-internal` and `<shoot>-external`. */
const API_DNS_RECORD_SUFFIXES = ['-internal', '-external'] as const;
/** Shoot.status.advertisedAddresses that name the API server (not the service-account issuer, whose host may be shared). */
const API_ADDRESS_NAMES = new Set(['external', 'internal', 'wildcard-tls-seed-bound']);

function hostOfUrl(url: string): string | undefined {
  try {
    const host = new URL(url).hostname;
    return host === '' ? undefined : host;
  } catch {
    return undefined;
  }
}

/** A DNS name a TLS client can send as SNI (no wildcard, no trailing dot, lower case). */
function sniName(name: string | null | undefined): string | undefined {
  if (name === undefined || name === null) return undefined;
  const host = name.trim().toLowerCase().replace(/\.$/, '');
  return host === '' || host.includes('*') || host.includes('/') ? undefined : host;
}

/**
 * The API server hosts of the shoot in `cluster`, sorted: `api.<spec.dns.domain>`, the names of its
 * API server DNSRecords (the internal domain is known on the seed only through them), the hosts of
 * its advertised API server addresses (a restored shoot), and `api-<shortID>.<seed ingress
 * domain>` (the wildcard endpoint, where the seed has one).
 */
export function predictedApiHosts(cluster: Cluster, technicalShortID: string, dnsRecords: readonly DnsRecord[]): string[] {
  const shoot = cluster.spec.shoot;
  const hosts = new Set<string>();
  const add = (name: string | null | undefined) => {
    const host = sniName(name);
    if (host !== undefined) hosts.add(host);
  };
  const domain = shoot.spec.dns?.domain;
  if (domain) add(`api.${domain}`);
  for (const record of dnsRecords) {
    if (record.metadata.namespace !== cluster.metadata.name) continue;
    if (API_DNS_RECORD_SUFFIXES.some((suffix) => record.metadata.name === `${shoot.metadata.name}${suffix}`)) add(record.spec.name);
  }
  for (const address of shoot.status?.advertisedAddresses ?? []) {
    if (API_ADDRESS_NAMES.has(address.name)) add(hostOfUrl(address.url));
  }
  const ingressDomain = cluster.spec.seed?.spec.ingress?.domain;
  if (ingressDomain) add(`api-${technicalShortID}.${ingressDomain}`);
  return [...hosts].sort();
}

/** One chain per host on every gateway: which gateway will serve the shoot, and how Istio groups the hosts into chains, is not known yet. */
export function hostsOnEveryGateway(hosts: readonly string[], gateways: readonly GatewayWorkload[]): SniChain[] {
  return gateways.flatMap((gateway) => hosts.map((host) => ({ gateway, hosts: [host] })));
}
