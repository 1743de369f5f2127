// API paths (and selectors) of the seed objects the controller and the webhook cache, in one place.
export const WATCHED = {
  extensions: { path: '/apis/extensions.gardener.cloud/v1alpha1/extensions' },
  clusters: { path: '/apis/extensions.gardener.cloud/v1alpha1/clusters' },
  infrastructures: { path: '/apis/extensions.gardener.cloud/v1alpha1/infrastructures' },
  // v1beta1 is served by every Istio that Gardener has shipped; v1 only by newer ones.
  gateways: { path: '/apis/networking.istio.io/v1beta1/gateways' },
  gatewayDeployments: { path: '/apis/apps/v1/deployments', labelSelector: 'app=istio-ingressgateway' },
  gatewayServices: { path: '/api/v1/services', labelSelector: 'app=istio-ingressgateway' },
  // Only shoot-info is read; the other kube-system ConfigMaps are not worth a cache.
  kubeSystemConfigMaps: { path: '/api/v1/namespaces/kube-system/configmaps', fieldSelector: 'metadata.name=shoot-info' },
  envoyFilters: { path: '/apis/networking.istio.io/v1alpha3/envoyfilters' },
  // Only the controller's own (labelled): a foreign delete or edit is repaired at once.
  managedResources: { path: '/apis/resources.gardener.cloud/v1alpha1/managedresources', labelSelector: 'app.kubernetes.io/managed-by=gardener-acl' },
} as const;
