// The objects a Gardener operator applies to install the extension (shapes:
// docs/gardener-seed-networking.md 11.5). Pure functions; the command does the I/O.
import { EXTENSION_TYPE } from '../gardener/seed-acl.js';

export type DeploymentPolicy = 'OnDemand' | 'Always' | 'AlwaysExceptNoShoots';
export type HelmValues = Record<string, unknown>;

// The ACL is opt-in per shoot, hence no autoEnable. The lifecycle keeps the filters in place for
// as long as the API server can be reached (docs/operators/lifecycle.md): reconcile before the
// kube-apiserver is deployed (gardenlet scales it down before such extensions on hibernation),
// delete and migrate after it is gone (docs/extensions/registration.md of gardener/gardener).
const RESOURCE = {
  kind: 'Extension',
  type: EXTENSION_TYPE,
  primary: true,
  reconcileTimeout: '3m',
  lifecycle: { reconcile: 'BeforeKubeAPIServer', delete: 'AfterKubeAPIServer', migrate: 'AfterKubeAPIServer' },
  workerlessSupported: true,
} as const;

// The pods meet the `restricted` Pod Security Standard (non-root, no privilege escalation,
// all capabilities dropped, RuntimeDefault seccomp); Gardener labels the extension namespace
// with this level.
const POD_SECURITY = { 'security.gardener.cloud/pod-security-enforce': 'restricted' } as const;

export interface RegistrationOptions {
  readonly name: string;
  readonly chartArchive: Buffer;
  readonly values: HelmValues;
  readonly policy: DeploymentPolicy;
}

export function controllerRegistration(o: RegistrationOptions): Record<string, unknown> {
  return {
    apiVersion: 'core.gardener.cloud/v1beta1',
    kind: 'ControllerRegistration',
    metadata: { name: o.name, annotations: { ...POD_SECURITY } },
    spec: {
      resources: [{ ...RESOURCE, lifecycle: { ...RESOURCE.lifecycle } }],
      deployment: { policy: o.policy, deploymentRefs: [{ name: o.name }] },
    },
  };
}

export function controllerDeployment(o: RegistrationOptions): Record<string, unknown> {
  return {
    apiVersion: 'core.gardener.cloud/v1',
    kind: 'ControllerDeployment',
    metadata: { name: o.name },
    helm: { rawChart: o.chartArchive.toString('base64'), values: o.values },
  };
}

export interface OperatorExtensionOptions {
  readonly name: string;
  readonly policy: DeploymentPolicy;
  readonly values: HelmValues;
  /** The seed chart's values for gardener-operator's render in the runtime cluster (the garden ACL). */
  readonly runtimeClusterValues?: HelmValues;
  /** OCI references of the pushed charts (gardener-operator's Extension takes only OCI charts). */
  readonly chartRef: string;
  readonly admissionChartRef: string;
  /** Namespace of the admission server in the runtime cluster (gardener-operator's: garden). */
  readonly admissionNamespace: string;
  /** Values of the admission chart (image, replicas, ...); the registration and TLS values are merged over them. */
  readonly admissionValues?: HelmValues;
  /** An existing TLS Secret and its CA (mode secret); without it the server manages its certificates. */
  readonly admissionTls?: { readonly caBundle: string; readonly secretName: string };
}

/**
 * gardener-operator renders the admission chart twice with `admission.values` plus values of its
 * own: the server into the runtime cluster, and into the virtual garden, where the chart then
 * renders only the ValidatingWebhookConfiguration, reaching the server by URL (the chart tells
 * the two renders apart by gardener.runtimeCluster). Nothing certificate-related is rendered in
 * the default mode managed: the server keeps its certificates and writes the registration into the
 * virtual garden itself, so the two renders cannot disagree. With an existing TLS Secret (mode
 * secret) both renders carry its CA.
 */
export function operatorExtension(o: OperatorExtensionOptions): Record<string, unknown> {
  const tls = o.admissionTls ? { mode: 'secret', secretName: o.admissionTls.secretName, caBundle: o.admissionTls.caBundle } : { mode: 'managed' };
  return {
    apiVersion: 'operator.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: o.name, annotations: { ...POD_SECURITY } },
    spec: {
      // garden: gardener-operator's ValidateGarden admits a Garden's `acl` entry only for a type
      // registered for the garden; it strips garden from the ControllerRegistration it makes for seeds.
      resources: [{ ...RESOURCE, lifecycle: { ...RESOURCE.lifecycle }, clusterCompatibility: ['shoot', 'garden'] }],
      deployment: {
        extension: { helm: { ociRepository: { ref: o.chartRef } }, values: o.values, runtimeClusterValues: o.runtimeClusterValues ?? o.values, policy: o.policy },
        admission: {
          runtimeCluster: { helm: { ociRepository: { ref: o.admissionChartRef } } },
          virtualCluster: { helm: { ociRepository: { ref: o.admissionChartRef } } },
          values: mergeValues(o.admissionValues ?? {}, { webhook: { registration: { url: `https://gardener-acl-admission.${o.admissionNamespace}.svc` }, tls } }),
        },
      },
    },
  };
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Helm-style merge: maps merge key by key, anything else is replaced. */
export function mergeValues(base: HelmValues, over: HelmValues): HelmValues {
  const out: HelmValues = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const current = out[k];
    out[k] = isMap(current) && isMap(v) ? mergeValues(current, v) : v;
  }
  return out;
}
