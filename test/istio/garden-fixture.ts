// The runtime cluster's objects around the virtual garden as gardener-operator v1.149 writes them
// (research notes in the commit of this file; gardener v1.149.0 pkg/operator/controller/garden/
// garden/components.go newIstio and newSNI): the ingress gateway `istio-ingressgateway` in
// `virtual-garden-istio-ingress` (pods `istio: ingressgateway`, `istio-role: garden`; Service port
// 443 -> 9443 only, no 8443 or 8132: the garden has no VPN or apiserver-proxy), PROXY protocol on
// 9443 when the Garden allows it, and the kube-apiserver's Gateway, VirtualService,
// DestinationRules and Services in `garden`. Plus the Garden and the `garden-acl` Extension
// gardener-operator writes from the Garden's spec.extensions.
import type { JsonObject, JsonValue } from '../envoy/json.js';
import { instantiateObjects } from './fixture-templates.js';

export const GARDEN_GATEWAY_NAMESPACE = 'virtual-garden-istio-ingress';
export const GARDEN_GATEWAY_LABELS = { app: 'istio-ingressgateway', istio: 'ingressgateway', 'istio-role': 'garden' } as const;
export const KUBE_APISERVER_CLUSTER = 'outbound|443||virtual-garden-kube-apiserver.garden.svc.cluster.local';
/** Two virtual garden domains (spec.virtualCluster.dns.domains): api.<d> and gardener.<d> of each. */
export const GARDEN_DOMAINS = ['garden.example.test', 'garden2.example.test'] as const;
/** With TLS termination a host that matches kubeAPIServer.sni.domainPatterns moves to the `wildcard-tls` server. */
export const WILDCARD_HOST = 'api.garden2.example.test';
export const RUNTIME_NODES = ['10.1.0.0/16', 'fd00:10:1::/64'] as const;
export const RUNTIME_PODS = ['100.96.0.0/11'] as const;

export type GardenExposure = 'tls-termination' | 'passthrough';

export function gardenHosts(): string[] {
  return GARDEN_DOMAINS.flatMap((d) => [`api.${d}`, `gardener.${d}`]);
}

function service(name: string): JsonObject[] {
  return instantiateObjects('shoot/service.yaml', { namespace: 'garden', name, portName: 'kube-apiserver', port: 443, exportTo: '*' });
}

export function virtualGardenRuntimeObjects(exposure: GardenExposure): JsonObject[] {
  const base = { namespace: GARDEN_GATEWAY_NAMESPACE, labels: { ...GARDEN_GATEWAY_LABELS } };
  const servicePorts: JsonValue = [{ name: 'tcp', port: 443, targetPort: 9443, protocol: 'TCP' }];
  const gatewaySelector = { istio: 'ingressgateway', 'istio-role': 'garden' };
  const exportTo = [GARDEN_GATEWAY_NAMESPACE];
  const hosts = gardenHosts();
  return [
    ...instantiateObjects('seed/ingress-gateway.yaml', { ...base, servicePorts, fromWorldToPorts: JSON.stringify([{ port: 9443, protocol: 'TCP' }]), loadBalancerIP: '198.18.20.1' }),
    ...instantiateObjects('gateway/proxy-protocol-sni.yaml', base),
    ...instantiateObjects('gateway/hsts.yaml', { namespace: GARDEN_GATEWAY_NAMESPACE }),
    ...service('virtual-garden-kube-apiserver'),
    ...(exposure === 'tls-termination'
      ? [
          ...instantiateObjects('gateway/apiserver-tls-termination.yaml', base),
          ...service('virtual-garden-kube-apiserver-mtls'),
          ...service('virtual-garden-kube-apiserver-connection-upgrade'),
          ...instantiateObjects('garden/kube-apiserver-tls-termination.yaml', {
            gatewaySelector,
            tlsHosts: hosts.filter((h) => h !== WILDCARD_HOST),
            wildcardHosts: [WILDCARD_HOST],
            exportTo,
          }),
        ]
      : instantiateObjects('garden/kube-apiserver-passthrough.yaml', { gatewaySelector, hosts, exportTo })),
  ];
}

export function gardenObject(settings: { readonly proxyProtocol?: boolean } = {}): JsonObject {
  return {
    apiVersion: 'operator.gardener.cloud/v1alpha1',
    kind: 'Garden',
    metadata: { name: 'garden' },
    spec: {
      runtimeCluster: {
        networking: { nodes: [...RUNTIME_NODES], pods: [...RUNTIME_PODS], services: ['100.64.0.0/13'] },
        settings: { loadBalancerServices: { proxyProtocol: { allowed: settings.proxyProtocol ?? true } } },
      },
      virtualCluster: { dns: { domains: GARDEN_DOMAINS.map((name) => ({ name })) } },
      extensions: [],
    },
  };
}

/** The Garden as gardener-operator's CRD requires it: gardenObject's networking plus the fields its schema makes required. */
export function storableGardenObject(extensions: readonly JsonObject[] = []): JsonObject {
  const garden = gardenObject() as { spec: { runtimeCluster: JsonObject; virtualCluster: JsonObject } } & JsonObject;
  return {
    ...garden,
    spec: {
      ...garden.spec,
      runtimeCluster: { ...garden.spec.runtimeCluster, ingress: { controller: { kind: 'nginx' } }, provider: {} },
      virtualCluster: {
        ...garden.spec.virtualCluster,
        gardener: { clusterIdentity: 'test-garden' },
        kubernetes: { version: '1.33.0' },
        maintenance: { timeWindow: { begin: '220000+0100', end: '230000+0100' } },
        // Gardener refuses a virtual cluster service network that intersects the runtime cluster's.
        networking: { services: ['10.112.0.0/13'] },
      },
      extensions: [...extensions],
    },
  };
}

/** The Extension gardener-operator writes for spec.extensions[type=acl] (pkg/component/extensions/extension, NamePrefix garden-). */
export function gardenExtension(providerConfig: unknown, namespace = 'garden'): JsonObject {
  return {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: 'garden-acl', namespace },
    spec: { type: 'acl', class: 'garden', providerConfig: providerConfig as JsonValue },
  };
}

export function managedSeedObjects(seeds: readonly { readonly name: string; readonly egressCIDRs?: readonly string[] }[]): { managedSeeds: JsonObject[]; shoots: JsonObject[] } {
  return {
    managedSeeds: seeds.map((s) => ({ apiVersion: 'seedmanagement.gardener.cloud/v1alpha1', kind: 'ManagedSeed', metadata: { name: s.name, namespace: 'garden' }, spec: { shoot: { name: s.name } } })),
    shoots: seeds.map((s) => ({
      apiVersion: 'core.gardener.cloud/v1beta1',
      kind: 'Shoot',
      metadata: { name: s.name, namespace: 'garden' },
      ...(s.egressCIDRs ? { status: { networking: { egressCIDRs: [...s.egressCIDRs] } } } : {}),
    })),
  };
}
