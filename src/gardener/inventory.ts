import type { z } from 'zod';
import { fieldErrorsFromZod, formatFieldErrors, REPORT_INPUT } from '../acl/field-errors.js';
import {
  clusterSchema,
  configMapSchema,
  deploymentSchema,
  envoyFilterObjectSchema,
  extensionSchema,
  gatewaySchema,
  infrastructureSchema,
  dnsRecordSchema,
  serviceSchema,
  typeMetaSchema,
  type EnvoyFilterObject,
} from './objects.js';
import { objectRef, type Problem } from './problems.js';
import type { SeedInventory } from './seed-acl.js';

/** A decoded document and where it came from, for error messages. */
export interface SourcedObject {
  readonly object: unknown;
  readonly source: string;
}

export interface ClassifiedObjects {
  readonly inventory: SeedInventory;
  readonly envoyFilters: readonly EnvoyFilterObject[];
  /** Raw OperatorConfiguration documents, validated by the caller. */
  readonly operatorConfigs: readonly SourcedObject[];
  readonly problems: readonly Problem[];
  /** Where each object (`Kind namespace/name`) came from. */
  readonly sources: ReadonlyMap<string, string>;
}

const SCHEMAS = {
  Cluster: clusterSchema,
  Extension: extensionSchema,
  Infrastructure: infrastructureSchema,
  DNSRecord: dnsRecordSchema,
  Gateway: gatewaySchema,
  Deployment: deploymentSchema,
  Service: serviceSchema,
  ConfigMap: configMapSchema,
  EnvoyFilter: envoyFilterObjectSchema,
} as const;
type ReadKind = keyof typeof SCHEMAS;

function isReadKind(kind: string): kind is ReadKind {
  return Object.hasOwn(SCHEMAS, kind);
}

/**
 * Kinds a seed directory may hold that the extension does not read, and why (a user who gives one
 * expects it to matter). Any other unread kind is named as a possible typo.
 */
const UNREAD_KINDS: Readonly<Record<string, string>> = {
  Shoot: 'a Shoot (core.gardener.cloud) lives in the garden: on a seed its ACL is the Extension acl in the shoot namespace, with the Cluster; the Shoot webhook checks a Shoot\'s providerConfig (offline: gardener-acl validate; gardener-acl explain takes a Shoot manifest as its shoot\'s ACL)',
  Namespace: '',
  Secret: '',
  VirtualService: '',
  DestinationRule: '',
  Pod: '',
  NetworkPolicy: '',
  ManagedResource: '',
};

/** Sorts decoded documents into the inventory; objects of other kinds are named in a warning, not read. */
export function classifyObjects(objects: readonly SourcedObject[]): ClassifiedObjects {
  const problems: Problem[] = [];
  const buckets: { [K in ReadKind]: z.output<(typeof SCHEMAS)[K]>[] } = {
    Cluster: [], Extension: [], Infrastructure: [], DNSRecord: [], Gateway: [], Deployment: [], Service: [], ConfigMap: [], EnvoyFilter: [],
  };
  const operatorConfigs: SourcedObject[] = [];
  const seen = new Map<string, string>();
  const unread = new Map<string, number>();
  for (const { object, source } of objects) {
    if (typeof object === 'object' && object !== null && (object as { kind?: unknown }).kind === 'OperatorConfiguration') {
      operatorConfigs.push({ object, source });
      continue;
    }
    const meta = typeMetaSchema.safeParse(object, REPORT_INPUT);
    if (!meta.success) {
      problems.push({ severity: 'error', object: source, message: `not a Kubernetes object: ${formatFieldErrors(fieldErrorsFromZod(meta.error, ''))}` });
      continue;
    }
    const { kind, metadata } = meta.data;
    if (!isReadKind(kind)) {
      unread.set(kind, (unread.get(kind) ?? 0) + 1);
      const why = UNREAD_KINDS[kind];
      if (why !== '') {
        problems.push({
          severity: 'warning',
          object: `${source}: ${objectRef(kind, metadata.namespace, metadata.name)}`,
          message: why ?? `kind ${JSON.stringify(kind)} is not read (gardener-acl reads ${[...Object.keys(SCHEMAS), 'OperatorConfiguration'].join(', ')}); check the spelling`,
        });
      }
      continue;
    }
    const ref = objectRef(kind, metadata.namespace, metadata.name);
    const duplicate = seen.get(ref);
    if (duplicate) {
      problems.push({ severity: 'error', object: `${source}: ${ref}`, message: `defined twice (first in ${duplicate})` });
      continue;
    }
    seen.set(ref, source);
    const parsed = SCHEMAS[kind].safeParse(object, REPORT_INPUT);
    if (!parsed.success) {
      problems.push({ severity: 'error', object: `${source}: ${ref}`, message: formatFieldErrors(fieldErrorsFromZod(parsed.error, '')) });
      continue;
    }
    (buckets[kind] as unknown[]).push(parsed.data);
  }
  // Never skipped silently: also the kinds a seed directory commonly holds, which get no line of their own.
  if (unread.size > 0) {
    const count = [...unread.values()].reduce((a, b) => a + b, 0);
    problems.push({ severity: 'warning', object: 'the inputs', message: `${count} object(s) of kinds not read: ${[...unread].map(([kind, n]) => `${n} ${kind}`).join(', ')}` });
  }
  return {
    inventory: {
      clusters: buckets.Cluster,
      extensions: buckets.Extension,
      infrastructures: buckets.Infrastructure,
      dnsRecords: buckets.DNSRecord,
      gateways: buckets.Gateway,
      deployments: buckets.Deployment,
      services: buckets.Service,
      configMaps: buckets.ConfigMap,
    },
    envoyFilters: buckets.EnvoyFilter,
    operatorConfigs,
    problems,
    sources: seen,
  };
}
