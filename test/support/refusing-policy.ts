// Makes the test kube-apiserver itself refuse writes, as an API server with an admission policy
// or a bad day does: a ValidatingAdmissionPolicy and its binding that deny CREATE and UPDATE of one
// resource whenever `expression` (CEL on `object`) is false, with `message`.
import type { KubeConfig } from '@kubernetes/client-node';

import { createObject, deleteObject, type ObjectRef } from '../../src/kube/objects-client.js';
import { eventually } from '../kube/kube-test-helpers.js';

export interface RefusedWrites {
  readonly apiGroup: string;
  readonly resource: string;
  readonly expression: string;
  readonly message: string;
}

const ref = (kind: string, name: string): ObjectRef => ({ apiVersion: 'admissionregistration.k8s.io/v1', kind, name });

/**
 * Installs the policy and resolves once it is enforced: `probe` is a write the policy must
 * refuse, retried until it is (a policy takes a moment to take effect); without a probe it
 * resolves at once. Returns the function that removes the policy again.
 */
export async function refuseWrites(kc: KubeConfig, name: string, what: RefusedWrites, probe?: () => Promise<unknown>): Promise<() => Promise<void>> {
  await createObject(kc, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: { resourceRules: [{ apiGroups: [what.apiGroup], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: [what.resource] }] },
      validations: [{ expression: what.expression, message: what.message }],
    },
  });
  await createObject(kc, { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name }, spec: { policyName: name, validationActions: ['Deny'] } });
  const remove = async () => {
    await deleteObject(kc, ref('ValidatingAdmissionPolicyBinding', name));
    await deleteObject(kc, ref('ValidatingAdmissionPolicy', name));
  };
  if (probe) {
    try {
      await eventually(`policy ${name} in force`, async () => {
        try {
          await probe();
          return false;
        } catch {
          return true;
        }
      });
    } catch (error) {
      await remove();
      throw error;
    }
  }
  return remove;
}
