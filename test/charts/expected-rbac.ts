// What the code sends, rule by rule (derived from src/actuator, src/kube, src/webhook). The
// chart must grant exactly this: the render test compares the rendered rules with it, and the
// integration test runs the controller with a token bound to them.
export interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
}

/** The served check (controller.servedCheckInterval not 0s, the default): gateway pods, and their Envoy's admin port through a port-forward. */
export const SERVED_CHECK_CLUSTER_RULES: readonly Rule[] = [{ apiGroups: [''], resources: ['pods/portforward'], verbs: ['create'] }];

export const CLUSTER_RULES: readonly Rule[] = [
  { apiGroups: ['extensions.gardener.cloud'], resources: ['extensions'], verbs: ['list', 'watch', 'patch'] },
  { apiGroups: ['extensions.gardener.cloud'], resources: ['extensions/status'], verbs: ['patch'] },
  { apiGroups: ['extensions.gardener.cloud'], resources: ['clusters', 'infrastructures', 'dnsrecords'], verbs: ['list', 'watch'] },
  { apiGroups: ['networking.istio.io'], resources: ['gateways'], verbs: ['list', 'watch'] },
  { apiGroups: ['networking.istio.io'], resources: ['envoyfilters'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['list', 'watch'] },
  { apiGroups: [''], resources: ['services'], verbs: ['list', 'watch'] },
  { apiGroups: ['resources.gardener.cloud'], resources: ['managedresources'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
  { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
  { apiGroups: [''], resources: ['secrets'], resourceNames: ['managedresource-acl-seed'], verbs: ['delete'] },
  { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: ['acl'], verbs: ['get', 'delete'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
  ...SERVED_CHECK_CLUSTER_RULES,
];

/** webhook.enabled false: the controller deletes the MutatingWebhookConfiguration an earlier managed install made. */
export const WEBHOOK_DISABLED_CLUSTER_RULES: readonly Rule[] = [
  { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: ['gardener-acl'], verbs: ['get', 'delete'] },
];

/** webhook.tls.mode managed (the default): the controller owns the MutatingWebhookConfiguration. */
export const MANAGED_CERTIFICATE_CLUSTER_RULES: readonly Rule[] = [
  { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], verbs: ['create'] },
  { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: ['gardener-acl'], verbs: ['get', 'patch'] },
  { apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], resourceNames: ['gardener-acl'], verbs: ['get'] },
];

/** ... and its two Secrets in the release namespace. */
export const MANAGED_CERTIFICATE_RULES: readonly Rule[] = [
  { apiGroups: [''], resources: ['secrets'], resourceNames: ['gardener-acl-webhook-ca', 'gardener-acl-webhook-tls'], verbs: ['get', 'patch'] },
  { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
];

/** The seed webhook's own ServiceAccount: what its cache lists and watches, nothing else. */
export const WEBHOOK_RULES: readonly Rule[] = [
  { apiGroups: ['extensions.gardener.cloud'], resources: ['extensions'], verbs: ['list', 'watch'] },
  { apiGroups: ['networking.istio.io'], resources: ['envoyfilters'], verbs: ['get'] },
];

export const KUBE_SYSTEM_RULES: readonly Rule[] = [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] }];

export const leaderElectionRules = (leaseName: string): readonly Rule[] => [
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [leaseName], verbs: ['get', 'update'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['gardener-extension-heartbeat'], verbs: ['get', 'patch'] },
];
