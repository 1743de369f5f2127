// API paths (and selectors) of the seed objects the controller and the webhook cache, and of what the
// garden controller reads, in one place.
import { GARDEN_EXTENSION, VIRTUAL_GARDEN_APISERVER, VIRTUAL_GARDEN_GATEWAY } from './garden-acl.js';

export interface WatchedResource {
  readonly path: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /**
   * Objects per list page where the default (500) would hold too much at once: a page is parsed
   * whole. Real Clusters embed the whole Shoot, Seed and CloudProfile (tens to hundreds of KB),
   * Extensions of every type carry providerConfig and status, and a combined CONNECT filter may be
   * close to maxObjectBytes (512 KiB by default).
   */
  readonly listPageSize?: number;
}

export const WATCHED = {
  extensions: { path: '/apis/extensions.gardener.cloud/v1alpha1/extensions', listPageSize: 100 },
  clusters: { path: '/apis/extensions.gardener.cloud/v1alpha1/clusters', listPageSize: 25 },
  infrastructures: { path: '/apis/extensions.gardener.cloud/v1alpha1/infrastructures', listPageSize: 100 },
  // A new shoot's API server host names, before its Gateway exists (predicted-api-hosts.ts).
  dnsRecords: { path: '/apis/extensions.gardener.cloud/v1alpha1/dnsrecords', listPageSize: 100 },
  // v1beta1 is served by every Istio that Gardener has shipped; v1 only by newer ones.
  gateways: { path: '/apis/networking.istio.io/v1beta1/gateways' },
  gatewayDeployments: { path: '/apis/apps/v1/deployments', labelSelector: 'app=istio-ingressgateway' },
  gatewayServices: { path: '/api/v1/services', labelSelector: 'app=istio-ingressgateway' },
  // Which labels the gateway pods that may still serve carry (a Deployment recreated with another selector).
  gatewayPods: { path: '/api/v1/pods', labelSelector: 'app=istio-ingressgateway' },
  // Only shoot-info is read; the other kube-system ConfigMaps are not worth a cache.
  kubeSystemConfigMaps: { path: '/api/v1/namespaces/kube-system/configmaps', fieldSelector: 'metadata.name=shoot-info' },
  envoyFilters: { path: '/apis/networking.istio.io/v1alpha3/envoyfilters', listPageSize: 10 },
  // Everyone's but ours (Gardener's legacy apiserver-proxy filters among them, which carry no label
  // of their own): a new or rewritten one brings its shoot back, so the ACL follows in seconds.
  foreignEnvoyFilters: { path: '/apis/networking.istio.io/v1alpha3/envoyfilters', labelSelector: 'app.kubernetes.io/managed-by!=gardener-acl' },
  // Only the controller's own (labelled): a foreign delete or edit is repaired at once.
  managedResources: { path: '/apis/resources.gardener.cloud/v1alpha1/managedresources', labelSelector: 'app.kubernetes.io/managed-by=gardener-acl' },
  // The reference extension's (acl-seed), retired once this controller protects the shoot: whether one exists.
  referenceManagedResources: { path: '/apis/resources.gardener.cloud/v1alpha1/managedresources', fieldSelector: 'metadata.name=acl-seed' },
} as const satisfies Record<string, WatchedResource>;

/** The garden controller's: the runtime cluster's (namespace garden) and the virtual garden's ManagedSeeds and their Shoots. */
export const GARDEN_WATCHED = {
  extensions: { path: `/apis/extensions.gardener.cloud/v1alpha1/namespaces/${GARDEN_EXTENSION.namespace}/extensions` },
  gardens: { path: '/apis/operator.gardener.cloud/v1alpha1/gardens' },
  gateways: { path: `/apis/networking.istio.io/v1beta1/namespaces/${VIRTUAL_GARDEN_GATEWAY.namespace}/gateways`, fieldSelector: `metadata.name=${VIRTUAL_GARDEN_GATEWAY.name}` },
  gatewayDeployments: WATCHED.gatewayDeployments,
  // Only its existence is read (see GardenInventory.virtualGardenDeployed).
  apiServers: { path: `/apis/apps/v1/namespaces/${VIRTUAL_GARDEN_APISERVER.namespace}/deployments`, fieldSelector: `metadata.name=${VIRTUAL_GARDEN_APISERVER.name}` },
  managedSeeds: { path: `/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/${GARDEN_EXTENSION.namespace}/managedseeds` },
  shoots: { path: `/apis/core.gardener.cloud/v1beta1/namespaces/${GARDEN_EXTENSION.namespace}/shoots` },
} as const satisfies Record<string, WatchedResource>;
