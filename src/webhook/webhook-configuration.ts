// The registration objects for the API servers: a MutatingWebhookConfiguration for EnvoyFilters
// (seed) and a ValidatingWebhookConfiguration for Shoots (garden). Produced by
// `gardener-acl webhook-config` for tests, and to be templated by the Helm charts.
//
// failurePolicy is Fail for both, deliberately:
// - EnvoyFilters: with Ignore, a legacy apiserver-proxy filter written while the webhook is
//   down would be stored without the shoot's RBAC filter, i.e. the control plane would be open
//   on that path until the next reconcile; and a stale combined filter could land unchecked.
//   Gardener and the controller retry failed writes, so Fail only delays. The matchConditions
//   keep the blast radius to the names the webhook cares about.
// - Shoots: with Ignore, an invalid ACL would be accepted and only show up as the Extension's
//   lastError; Fail keeps the error where the owner writes it. Only Shoots that use the acl
//   extension are sent to the webhook.
export const MUTATING_WEBHOOK_PATH = '/mutate-envoyfilter';
export const VALIDATING_WEBHOOK_PATH = '/validate-shoot';
export const GARDEN_WEBHOOK_PATH = '/validate-garden';
export const CONFIGURATION_NAME = 'gardener-acl';
/** In the runtime cluster, next to the admission server's own (the Shoot webhook's is in the virtual garden). */
export const GARDEN_CONFIGURATION_NAME = 'gardener-acl-garden';

export type ClientTarget = { readonly url: string } | { readonly service: { readonly name: string; readonly namespace: string; readonly port: number } };

export interface WebhookConfigurationOptions {
  readonly target: ClientTarget;
  /** PEM of the CA that signed the serving certificate. */
  readonly caBundlePem: string;
  readonly timeoutSeconds?: number;
  /** Leave writes by this user (the controller's) out of the EnvoyFilter webhook. */
  readonly controllerUsername?: string;
  /** The legacy PROXY-protocol apiserver-proxy port (OperatorConfiguration legacyProxyPort, 8443). */
  readonly legacyProxyPort?: number;
}

function clientConfig(target: ClientTarget, path: string, caBundlePem: string): Record<string, unknown> {
  const caBundle = Buffer.from(caBundlePem).toString('base64');
  if ('url' in target) return { url: `${target.url.replace(/\/+$/, '')}${path}`, caBundle };
  return { service: { ...target.service, path }, caBundle };
}

const COMMON = { sideEffects: 'None', admissionReviewVersions: ['v1'], failurePolicy: 'Fail', matchPolicy: 'Equivalent' } as const;

/**
 * CEL on the object: Gardener's per-shoot filters that add a chain to the legacy apiserver-proxy
 * port (Gardener < 1.123; `has()` guards CREATE with generateName and every optional field), the
 * only `shoot-` filters the webhook patches, and the combined CONNECT filters. On a newer Gardener
 * no `shoot-` filter has such a chain, so none of Gardener's writes waits for the webhook.
 */
function envoyFilterMatch(legacyPort: number): string {
  const onLegacyPort =
    `has(p.match) && has(p.match.listener) && ((has(p.match.listener.portNumber) && p.match.listener.portNumber == ${legacyPort}) || ` +
    `(has(p.match.listener.name) && p.match.listener.name == '0.0.0.0_${legacyPort}'))`;
  const legacyChain = `has(object.spec) && has(object.spec.configPatches) && object.spec.configPatches.exists(p, has(p.applyTo) && p.applyTo == 'FILTER_CHAIN' && ${onLegacyPort})`;
  return `has(object.metadata.name) && ((object.metadata.name.startsWith('shoot-') && ${legacyChain}) || object.metadata.name.startsWith('acl-connect-'))`;
}
const USES_ACL = "has(object.spec) && has(object.spec.extensions) && object.spec.extensions.exists(e, e.type == 'acl')";
/**
 * The API server calls the Shoot webhook only when the acl extension entries are created or
 * changed: Gardener's own metadata and status writes on an ACL Shoot (with `Fail`) need no call,
 * and the handler would let an unchanged ACL through anyway.
 */
export const ACL_CHANGED =
  "request.operation != 'UPDATE' || !has(oldObject.spec) || !has(oldObject.spec.extensions) || " +
  "object.spec.extensions.filter(e, e.type == 'acl') != oldObject.spec.extensions.filter(e, e.type == 'acl')";

/** Shoots and Gardens: the webhook is called only when an acl entry is created or changed. */
const ACL_ENTRY_CHANGED = [
  { name: 'uses-acl-extension', expression: USES_ACL },
  { name: 'acl-extension-created-or-changed', expression: ACL_CHANGED },
];

function configuration(kind: string, webhook: Record<string, unknown>, options: WebhookConfigurationOptions, path: string, name = CONFIGURATION_NAME): Record<string, unknown> {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind,
    metadata: { name },
    webhooks: [{ ...webhook, clientConfig: clientConfig(options.target, path, options.caBundlePem), ...COMMON, timeoutSeconds: options.timeoutSeconds ?? 10 }],
  };
}

export function mutatingWebhookConfiguration(options: WebhookConfigurationOptions): Record<string, unknown> {
  const matchConditions = [{ name: 'legacy-proxy-or-combined-connect-filter', expression: envoyFilterMatch(options.legacyProxyPort ?? 8443) }];
  if (options.controllerUsername) {
    // Only the controller's combined filters are exempt: its empty patches to Gardener's legacy
    // filters exist precisely to run this webhook.
    matchConditions.push({
      name: 'not-a-combined-filter-written-by-the-controller',
      expression: `!object.metadata.name.startsWith('acl-connect-') || request.userInfo.username != ${JSON.stringify(options.controllerUsername)}`,
    });
  }
  const webhook = {
    name: 'envoyfilters.acl.gardener.cloud',
    rules: [{ apiGroups: ['networking.istio.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['envoyfilters'], scope: 'Namespaced' }],
    matchConditions,
    // Our patch only rewrites our own filter entries; another webhook changing the object
    // afterwards must not leave it without them.
    reinvocationPolicy: 'IfNeeded',
  };
  return configuration('MutatingWebhookConfiguration', webhook, options, MUTATING_WEBHOOK_PATH);
}

export function validatingWebhookConfiguration(options: WebhookConfigurationOptions): Record<string, unknown> {
  const webhook = {
    name: 'shoots.acl.gardener.cloud',
    rules: [{ apiGroups: ['core.gardener.cloud'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['shoots'], scope: 'Namespaced' }],
    matchConditions: ACL_ENTRY_CHANGED,
  };
  return configuration('ValidatingWebhookConfiguration', webhook, options, VALIDATING_WEBHOOK_PATH);
}

/** The Garden's acl entry (runtime cluster): called only when it is created or changed (garden-validator.ts). */
export function gardenWebhookConfiguration(options: WebhookConfigurationOptions): Record<string, unknown> {
  const webhook = {
    name: 'gardens.acl.gardener.cloud',
    rules: [{ apiGroups: ['operator.gardener.cloud'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['gardens'], scope: 'Cluster' }],
    matchConditions: ACL_ENTRY_CHANGED,
  };
  return configuration('ValidatingWebhookConfiguration', webhook, options, GARDEN_WEBHOOK_PATH, GARDEN_CONFIGURATION_NAME);
}
