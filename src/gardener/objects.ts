import { z } from 'zod';

// Schemas for the parts of Gardener, Istio and Kubernetes objects the extension reads.
// Objects carry many more fields; unknown fields pass through untouched.

const labels = z.record(z.string(), z.string());

export const objectMetaSchema = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().optional(),
  labels: labels.optional(),
  annotations: labels.optional(),
  deletionTimestamp: z.string().nullish(),
  generation: z.number().optional(),
  resourceVersion: z.string().optional(),
});

export const typeMetaSchema = z.looseObject({ apiVersion: z.string(), kind: z.string(), metadata: objectMetaSchema });
export type KubeObject = z.infer<typeof typeMetaSchema>;

/** Gardener's ShootNeedsForceDeletion annotation on the Shoot: the one Shoot annotation the controller reads. */
export const FORCE_DELETION_ANNOTATION = 'confirmation.gardener.cloud/force-deletion';

export const shootSchema = z.looseObject({
  metadata: objectMetaSchema,
  spec: z
    .looseObject({
      networking: z.looseObject({ nodes: z.string().nullish(), pods: z.string().nullish() }).nullish(),
      provider: z.looseObject({ workers: z.array(z.unknown()).nullish() }).nullish(),
      hibernation: z.looseObject({ enabled: z.boolean().nullish() }).nullish(),
      dns: z.looseObject({ domain: z.string().nullish() }).nullish(),
    })
    .default({}),
  status: z
    .looseObject({
      technicalID: z.string().nullish(),
      lastOperation: z.looseObject({ type: z.string().nullish(), state: z.string().nullish() }).nullish(),
      advertisedAddresses: z.array(z.looseObject({ name: z.string(), url: z.string() })).nullish(),
    })
    .nullish(),
});
export type Shoot = z.infer<typeof shootSchema>;

export const seedSchema = z.looseObject({
  metadata: objectMetaSchema.partial().optional(),
  spec: z.looseObject({
    networks: z.looseObject({ nodes: z.string().nullish(), pods: z.string().nullish() }).nullish(),
    ingress: z.looseObject({ domain: z.string().nullish() }).nullish(),
  }),
});
export type Seed = z.infer<typeof seedSchema>;

export const clusterSchema = z.looseObject({
  apiVersion: z.literal('extensions.gardener.cloud/v1alpha1'),
  kind: z.literal('Cluster'),
  metadata: objectMetaSchema,
  spec: z.looseObject({ shoot: shootSchema, seed: seedSchema.nullish() }),
});
export type Cluster = z.infer<typeof clusterSchema>;

export const extensionSchema = z.looseObject({
  apiVersion: z.literal('extensions.gardener.cloud/v1alpha1'),
  kind: z.literal('Extension'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  spec: z.looseObject({ type: z.string(), class: z.string().nullish(), providerConfig: z.unknown().optional() }),
  status: z.looseObject({}).nullish(),
});
export type Extension = z.infer<typeof extensionSchema>;

export const infrastructureSchema = z.looseObject({
  apiVersion: z.literal('extensions.gardener.cloud/v1alpha1'),
  kind: z.literal('Infrastructure'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  status: z.looseObject({ egressCIDRs: z.array(z.string()).nullish() }).nullish(),
});
export type Infrastructure = z.infer<typeof infrastructureSchema>;

/** Gardener's DNS entry for a shoot's API server (`<shoot>-internal`, `<shoot>-external`); written before the Gateway. */
export const dnsRecordSchema = z.looseObject({
  apiVersion: z.literal('extensions.gardener.cloud/v1alpha1'),
  kind: z.literal('DNSRecord'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  spec: z.looseObject({ name: z.string() }),
});
export type DnsRecord = z.infer<typeof dnsRecordSchema>;

export const gatewaySchema = z.looseObject({
  apiVersion: z.string().startsWith('networking.istio.io/'),
  kind: z.literal('Gateway'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  spec: z.looseObject({
    selector: labels.default({}),
    servers: z
      .array(
        z.looseObject({
          hosts: z.array(z.string()).default([]),
          port: z.looseObject({ number: z.number(), name: z.string().optional(), protocol: z.string().optional() }),
          tls: z.looseObject({ mode: z.string().optional() }).nullish(),
        }),
      )
      .default([]),
  }),
});
export type Gateway = z.infer<typeof gatewaySchema>;

export const deploymentSchema = z.looseObject({
  apiVersion: z.literal('apps/v1'),
  kind: z.literal('Deployment'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  spec: z.looseObject({
    selector: z.looseObject({ matchLabels: labels.default({}) }),
    template: z.looseObject({ metadata: z.looseObject({ labels: labels.default({}) }).default({ labels: {} }) }).optional(),
  }),
});
export type Deployment = z.infer<typeof deploymentSchema>;

export const serviceSchema = z.looseObject({
  apiVersion: z.literal('v1'),
  kind: z.literal('Service'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  status: z
    .looseObject({ loadBalancer: z.looseObject({ ingress: z.array(z.looseObject({ ipMode: z.string().nullish() })).nullish() }).nullish() })
    .nullish(),
});
export type Service = z.infer<typeof serviceSchema>;

/** A gateway pod as the selector of its gateway's filters needs it: its labels, and whether it may still serve. */
export const podSchema = z.looseObject({
  apiVersion: z.literal('v1'),
  kind: z.literal('Pod'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  status: z.looseObject({ phase: z.string().nullish() }).nullish(),
});
export type Pod = z.infer<typeof podSchema>;

export const configMapSchema = z.looseObject({
  apiVersion: z.literal('v1'),
  kind: z.literal('ConfigMap'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  data: z.record(z.string(), z.string()).nullish(),
});
export type ConfigMap = z.infer<typeof configMapSchema>;

export const envoyFilterObjectSchema = z.looseObject({
  apiVersion: z.string().startsWith('networking.istio.io/'),
  kind: z.literal('EnvoyFilter'),
  metadata: objectMetaSchema.extend({ namespace: z.string() }),
  spec: z.looseObject({}),
});
export type EnvoyFilterObject = z.infer<typeof envoyFilterObjectSchema>;
