// The objects a Gardener operator applies to install the extension (shapes:
// docs/gardener-seed-networking.md 11.5). Pure functions; the command does the I/O.
import { EXTENSION_TYPE } from '../gardener/seed-acl.js';

export type DeploymentPolicy = 'OnDemand' | 'Always' | 'AlwaysExceptNoShoots';
export type HelmValues = Record<string, unknown>;

// The ACL is opt-in per shoot, hence no autoEnable. Reconcile after the kube-apiserver (the SNI
// routes exist then); delete/migrate before it, so no window without the filters opens while
// the control plane is still reachable.
const RESOURCE = {
  kind: 'Extension',
  type: EXTENSION_TYPE,
  primary: true,
  reconcileTimeout: '3m',
  lifecycle: { reconcile: 'AfterKubeAPIServer', delete: 'BeforeKubeAPIServer', migrate: 'BeforeKubeAPIServer' },
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
  /** OCI references of the pushed charts (gardener-operator's Extension takes only OCI charts). */
  readonly chartRef: string;
  readonly admissionChartRef: string;
  /** Namespace of the admission server in the runtime cluster (gardener-operator's: garden). */
  readonly admissionNamespace: string;
  readonly admissionCaBundle: string;
  readonly admissionTlsSecretName: string;
}

/**
 * gardener-operator renders the admission chart twice: the server into the runtime cluster and
 * only the ValidatingWebhookConfiguration into the virtual garden, which reaches the server by
 * URL. Both renders must agree on the certificate, so the example uses an existing TLS Secret
 * and its CA (self-signed per render would give two different CAs).
 */
export function operatorExtension(o: OperatorExtensionOptions): Record<string, unknown> {
  const tls = { mode: 'secret', secretName: o.admissionTlsSecretName, caBundle: o.admissionCaBundle };
  return {
    apiVersion: 'operator.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: o.name, annotations: { ...POD_SECURITY } },
    spec: {
      resources: [{ ...RESOURCE, lifecycle: { ...RESOURCE.lifecycle } }],
      deployment: {
        extension: { helm: { ociRepository: { ref: o.chartRef } }, values: o.values, policy: o.policy },
        admission: {
          runtimeCluster: {
            helm: { ociRepository: { ref: o.admissionChartRef } },
            values: { server: { enabled: true }, webhook: { registerWebhook: false, tls } },
          },
          virtualCluster: {
            helm: { ociRepository: { ref: o.admissionChartRef } },
            values: {
              server: { enabled: false },
              webhook: { registerWebhook: true, registration: { mode: 'url', url: `https://gardener-acl-admission.${o.admissionNamespace}.svc` }, tls },
            },
          },
        },
      },
    },
  };
}
