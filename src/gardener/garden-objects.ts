// The parts of gardener-operator's and the virtual garden's objects the garden ACL reads. Every
// list is optional: the operator's API makes them lists of CIDRs, any family.
import { z } from 'zod';
import { objectMetaSchema } from './objects.js';

const cidrList = z.array(z.string()).nullish();

/** operator.gardener.cloud/v1alpha1 Garden (cluster-scoped, one per runtime cluster). */
export const gardenSchema = z.looseObject({
  apiVersion: z.literal('operator.gardener.cloud/v1alpha1'),
  kind: z.literal('Garden'),
  metadata: objectMetaSchema,
  spec: z.looseObject({
    runtimeCluster: z.looseObject({
      networking: z.looseObject({ nodes: cidrList, pods: cidrList }),
      settings: z
        .looseObject({
          loadBalancerServices: z
            .looseObject({
              externalTrafficPolicy: z.string().nullish(),
              proxyProtocol: z.looseObject({ allowed: z.boolean().nullish() }).nullish(),
            })
            .nullish(),
        })
        .nullish(),
    }),
    virtualCluster: z.looseObject({ dns: z.looseObject({ domains: z.array(z.looseObject({ name: z.string() })).nullish() }).nullish() }).nullish(),
  }),
});
export type Garden = z.infer<typeof gardenSchema>;

/** seedmanagement.gardener.cloud/v1alpha1 ManagedSeed in the virtual garden (always in namespace garden). */
export const managedSeedSchema = z.looseObject({
  apiVersion: z.literal('seedmanagement.gardener.cloud/v1alpha1'),
  kind: z.literal('ManagedSeed'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  spec: z.looseObject({ shoot: z.looseObject({ name: z.string() }).nullish() }),
});
export type ManagedSeed = z.infer<typeof managedSeedSchema>;

/** core.gardener.cloud/v1beta1 Shoot in the virtual garden, as far as its egress addresses go. */
export const gardenShootSchema = z.looseObject({
  apiVersion: z.literal('core.gardener.cloud/v1beta1'),
  kind: z.literal('Shoot'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  status: z.looseObject({ networking: z.looseObject({ egressCIDRs: cidrList }).nullish() }).nullish(),
});
export type GardenShoot = z.infer<typeof gardenShootSchema>;
