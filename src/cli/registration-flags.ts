// The flags of `gardener-acl registration`: the parser, the schema and the usage text read them here.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { FlagTable } from './flag-table.js';

/**
 * charts/gardener-acl of the installation: found by walking up from this module, because it
 * runs from src/cli (tsx) as well as from dist/src/cli (built image).
 */
export function defaultChartDir(start = path.dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'charts', 'gardener-acl');
    if (existsSync(path.join(candidate, 'Chart.yaml'))) return candidate;
    if (path.dirname(dir) === dir) return path.join(start, 'charts', 'gardener-acl');
  }
}

const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { error: 'must be a lower-case DNS label' }).max(63);
const ociRef = z
  .string()
  .refine((ref) => !ref.startsWith('oci://'), { abort: true, error: (issue) => `${JSON.stringify(issue.input)}: drop the oci:// scheme; gardener-operator's ociRepository.ref is registry/repository:tag, e.g. ghcr.io/org/charts/gardener-acl:0.1.0` })
  .regex(/^[a-z0-9.-]+(:[0-9]+)?\/[^\s:@]+(:[\w.-]+|@sha256:[a-f0-9]{64})$/, { error: 'must be an OCI reference with a tag or digest, e.g. ghcr.io/org/charts/gardener-acl:0.1.0' });

const POLICIES = ['OnDemand', 'Always', 'AlwaysExceptNoShoots'] as const;

export const REGISTRATION_FLAGS = {
  name: { value: 'NAME', default: 'acl', help: 'object names', schema: dnsLabel },
  chart: { value: 'DIR', default: () => defaultChartDir(), defaultText: 'charts/gardener-acl of this installation', help: 'seed chart directory', schema: z.string().min(1) },
  'image-repository': {
    value: 'REPO',
    help: 'image.repository value (with --operator: of the admission chart too)',
    schema: z.string().regex(/^[^\s:@]+(:[0-9]+)?(\/[^\s:@]+)*$/, { error: 'must be an image repository without tag, e.g. ghcr.io/org/gardener-acl' }).optional(),
  },
  'image-tag': { value: 'TAG', help: 'image.tag value (with --operator: of the admission chart too)', schema: z.string().regex(/^[\w][\w.-]{0,127}$/, { error: 'must be an image tag such as 0.1.0' }).optional() },
  values: { value: 'FILE', help: 'YAML map of further chart values (merged under the flags above)', schema: z.string().optional() },
  policy: { value: 'POLICY', default: 'OnDemand', help: POLICIES.join('|'), schema: z.enum(POLICIES, { error: 'must be OnDemand, Always or AlwaysExceptNoShoots' }) },
  output: { value: 'yaml|json', short: 'o', default: 'yaml', help: 'output format', schema: z.enum(['yaml', 'json'], { error: 'must be yaml or json' }) },
  operator: { help: 'print the gardener-operator Extension', schema: z.boolean() },
  'chart-ref': { value: 'REF', help: '--operator: OCI ref of the seed chart', schema: ociRef.optional() },
  'admission-chart-ref': { value: 'REF', help: '--operator: OCI ref of the admission chart', schema: ociRef.optional() },
  'admission-namespace': { value: 'NS', default: 'garden', help: '--operator: runtime namespace of the admission server', schema: dnsLabel },
  'admission-values': { value: 'FILE', help: '--operator: YAML map of admission chart values (the image flags above and the registration/TLS values are merged over it)', schema: z.string().optional() },
  'virtual-garden-kubeconfig-secret': {
    value: 'NAME',
    help: "--operator: Secret (key kubeconfig) in namespace runtime-extension-<name> holding the virtual garden's kubeconfig for the garden ACL (gardener-operator injects none: gardener/gardener#15000)",
    schema: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, { error: 'must be a Secret name (lower-case letters, digits, "-" and ".")' }).max(253).optional(),
  },
  'admission-ca-bundle': {
    value: 'FILE',
    help: '--operator: PEM CA of an existing admission TLS Secret (e.g. from cert-manager); without it the admission server keeps its own certificates and registration (webhook.tls.mode managed)',
    schema: z.string().optional(),
  },
  'admission-tls-secret': {
    value: 'NAME',
    default: 'gardener-acl-admission-tls',
    help: '--operator, with --admission-ca-bundle: kubernetes.io/tls Secret of the admission server',
    schema: dnsLabel,
  },
} as const satisfies FlagTable;
