// Istio ingress gateways as Gardener deploys them (an `istio-ingressgateway` Deployment per
// ingress namespace) and the TLS chains an Istio Gateway object puts on them: shared by the seed's
// shoots and the virtual garden.
import type { GatewayWorkload, Labels, SniChain } from '../acl/model.js';
import type { Deployment, Gateway } from './objects.js';

export const GATEWAY_DEPLOYMENT = 'istio-ingressgateway';

export function sortedLabels(labels: Labels): Labels {
  return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));
}

export function isSubset(selector: Labels, labels: Labels): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

export function podLabels(d: Deployment): Labels {
  return { ...d.spec.selector.matchLabels, ...(d.spec.template?.metadata.labels ?? {}) };
}

/** The gateway a Gateway object's selector picks, the way Istio does: pods whose labels include it. */
export function resolveGateway(gateway: Gateway, deployments: readonly Deployment[], gateways: readonly GatewayWorkload[]): GatewayWorkload | string {
  if (Object.keys(gateway.spec.selector).length === 0) return 'spec.selector is empty; cannot tell which ingress gateway serves it';
  const matches = deployments.filter((d) => d.metadata.name === GATEWAY_DEPLOYMENT && isSubset(gateway.spec.selector, podLabels(d)));
  const namespaces = [...new Set(matches.map((d) => d.metadata.namespace))];
  const found = gateways.find((g) => namespaces.length === 1 && g.namespace === namespaces[0]);
  if (found) return found;
  const selector = JSON.stringify(gateway.spec.selector);
  return namespaces.length === 0
    ? `spec.selector ${selector} matches no ${GATEWAY_DEPLOYMENT} Deployment`
    : `spec.selector ${selector} matches ${GATEWAY_DEPLOYMENT} Deployments in ${namespaces.length} namespaces (${namespaces.join(', ')}); expected exactly one`;
}

function stripNamespace(host: string): string {
  const slash = host.indexOf('/');
  return slash >= 0 ? host.slice(slash + 1) : host;
}

export function isTlsServer(server: Gateway['spec']['servers'][number]): boolean {
  const protocol = (server.port.protocol ?? '').toUpperCase();
  return protocol === 'TLS' || protocol === 'HTTPS' || Boolean(server.tls);
}

/** A Gateway server's host names as SNI names: the `namespace/` prefix stripped. */
export function serverHosts(server: Gateway['spec']['servers'][number]): string[] {
  return server.hosts.map(stripNamespace);
}

/** One chain per TLS server of `gateway` on `workload` (Istio renders one filter chain per server); `*` matches no SNI name. */
export function tlsChains(gateway: Gateway, workload: GatewayWorkload): SniChain[] {
  return gateway.spec.servers
    .filter(isTlsServer)
    .map((server) => serverHosts(server).filter((h) => h !== '*'))
    .filter((hosts) => hosts.length > 0)
    .map((hosts) => ({ gateway: workload, hosts }));
}
