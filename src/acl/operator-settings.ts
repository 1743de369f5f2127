// The operator's settings as the controller, the webhook and the render read them: the schema of
// each field and the type they make. Whether the values fit together (one maximal shoot in one
// combined object) needs the filter builders' sizes, so that check lives above, in
// src/config/operator-config.ts; everything below the filter builders reads this module only.
import { z } from 'zod';
import type { Cidr } from './cidr.js';
import { cidrStringSchema } from './cidr-schema.js';

/** The headers the matcher forms set themselves (target IDs, client addresses): no operator header may take it. */
export const RESERVED_HEADER_PREFIX = 'x-gardener-acl-';

const port = z.number({ error: 'must be a port number' }).int({ error: 'must be a whole number from 1 to 65535' }).min(1, { error: 'must be 1 to 65535' }).max(65535, { error: 'must be 1 to 65535' });
// RFC 7230 token characters; Envoy compares header names case-insensitively.
const headerName = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'must be an HTTP header name such as X-Gardener-Destination' })
  // The matcher forms set headers of this prefix themselves (target IDs, client addresses).
  .refine((name) => !name.toLowerCase().startsWith(RESERVED_HEADER_PREFIX), {
    error: (issue) =>
      `${JSON.stringify(issue.input)} starts with ${RESERVED_HEADER_PREFIX}, which the extension reserves for the headers it sets; name a header a route takes the cluster from, such as X-Gardener-Destination`,
  });

export const DEFAULT_PROTECTED_HEADERS = ['Reversed-VPN', 'X-Gardener-Destination'] as const;
export const DEFAULT_PROTECTED_PORTS = [8132, 8443] as const;
export const MAX_ADDITIONAL_ALLOWED_CIDRS = 100;
/**
 * Largest maxObjectBytes. A transitional write may hold a shard's stored and planned entries
 * together, up to about twice maxObjectBytes (see combined-syncer.ts), and etcd refuses values
 * above 1.5 MiB: 2 × 640 KiB leaves a quarter MiB for metadata and managedFields.
 */
export const MAX_OBJECT_BYTES = 640 * 1024;
/** Largest ECDS listener part: fixed scaffolding, written once per version, never transitional with twice its entries. */
export const MAX_LISTENER_PART_BYTES = 1024 * 1024;
/** How the combined CONNECT filters hold the shoots' ACLs (see README "Combined filter forms"). */
export const COMBINED_FORMS = ['rules', 'matcher', 'ecds'] as const;
export type CombinedFormName = (typeof COMBINED_FORMS)[number];

/** Whether a form looks the routed shoot up (matcher leaves, in the listener or through ECDS) rather than scanning DENY policies. */
export function isMatcherForm(form: CombinedFormName | undefined): boolean {
  return form === 'matcher' || form === 'ecds';
}

/** What a tightened ACL does to established tunnels (see README "Revocation"). */
export const TUNNEL_REVOCATIONS = ['hop', 'none'] as const;

export const DEFAULT_ECDS_BUCKETS = 48;
export const MAX_ECDS_BUCKETS = 256;

/** Per-seed settings an operator chooses when installing the extension. */
export const operatorSettingsSchema = z
  .strictObject({
    apiVersion: z.literal('acl.gardener.cloud/v1alpha1').optional(),
    kind: z.literal('OperatorConfiguration').optional(),
    /** Always admitted for every shoot, in addition to the seed's and the shoot's own ranges (they are in every shoot's policy). */
    additionalAllowedCIDRs: z
      .array(cidrStringSchema)
      .max(MAX_ADDITIONAL_ALLOWED_CIDRS, { error: `lists more than ${MAX_ADDITIONAL_ALLOWED_CIDRS} ranges; every one is repeated in every shoot's policy, so merge them into wider ranges` })
      .default([]),
    /** Most CIDRs a shoot's rule may list (at most 1000; together with maxObjectBytes checked so that one maximal shoot fits one combined filter). */
    maxCIDRs: z
      .number({ error: 'must be a number from 1 to 1000, such as 50' })
      .int({ error: 'must be a whole number from 1 to 1000, such as 50' })
      .min(1, { error: 'must be at least 1: every rule lists one range or more' })
      .max(1000, { error: 'must be at most 1000: one shoot at the limit must fit one combined CONNECT filter; merge ranges instead' })
      .default(50),
    /** HTTP-CONNECT headers whose value selects the destination cluster. */
    protectedHeaders: z.array(headerName, { error: 'must be a list of header names' }).min(1, { error: 'must name at least one header, such as X-Gardener-Destination' }).default([...DEFAULT_PROTECTED_HEADERS]),
    /** Gateway listener ports (target ports) that terminate HTTP CONNECT. */
    protectedPorts: z.array(port, { error: 'must be a list of ports' }).min(1, { error: 'must name at least one port, such as 8443' }).default([...DEFAULT_PROTECTED_PORTS]),
    /** Listener port of the TLS/SNI server (Service port 443). */
    sniPort: port.default(9443),
    /** Listener port of the legacy PROXY-protocol apiserver-proxy path (Gardener < 1.123). */
    legacyProxyPort: port.default(8443),
    /** Largest serialized size (bytes) of one generated EnvoyFilter; combined filters are sharded below it. */
    maxObjectBytes: z
      .number({ error: 'must be a number of bytes, such as 524288 (512 KiB)' })
      .int({ error: 'must be a whole number of bytes, such as 524288 (512 KiB)' })
      .min(16 * 1024, { error: 'must be at least 16384 (16 KiB): smaller objects hold too few shoots to be useful' })
      .max(MAX_OBJECT_BYTES, {
        error: `must be at most ${MAX_OBJECT_BYTES} (640 KiB): a write that moves shoots between shards holds up to twice maxObjectBytes, and etcd refuses objects above 1.5 MiB; for more capacity raise ecdsBuckets`,
      })
      .default(512 * 1024),
    /**
     * How the combined CONNECT filters hold the ACLs: `rules` (a DENY policy per shoot, every request
     * checks every mention) or `matcher` (a lookup of the routed shoot per protected header; cost
     * independent of the number of shoots; needs Istio and Envoy with the matching API, see README).
     */
    combinedForm: z.enum(COMBINED_FORMS, { error: 'must be rules, matcher or ecds' }).default('ecds'),
    /**
     * Fixed number of ECDS buckets (combinedForm ecds). Every CONNECT listener names every bucket's
     * filters, so the count is part of the listener: changing it drains the CONNECT listeners once.
     * Capacity is about buckets × maxObjectBytes of shoot ACLs; a shoot whose bucket is full keeps
     * its stored protection and is reported.
     */
    ecdsBuckets: z
      .number({ error: `must be a whole number from 1 to ${MAX_ECDS_BUCKETS}, such as ${DEFAULT_ECDS_BUCKETS}` })
      .int({ error: `must be a whole number from 1 to ${MAX_ECDS_BUCKETS}, such as ${DEFAULT_ECDS_BUCKETS}` })
      .min(1, { error: `must be at least 1: every listener names every bucket, and jump hashing into 0 buckets places no shoot` })
      .max(MAX_ECDS_BUCKETS, { error: `must be at most ${MAX_ECDS_BUCKETS}: every bucket adds one HTTP filter per protected header to every CONNECT request; raise maxObjectBytes instead` })
      .default(DEFAULT_ECDS_BUCKETS),
    /**
     * What a tightened ACL does to the shoot's established VPN tunnels: `hop` (every VPN tunnel
     * runs through a chain of its shoot in a shared internal listener; a tightening closes the
     * shoot's tunnels at the end of the gateway's drain time, no other shoot's) or `none` (they end
     * on their own). See README "Revocation".
     */
    tunnelRevocation: z.enum(TUNNEL_REVOCATIONS, { error: 'must be hop or none' }).default('hop'),
  })
  .transform((c) => ({
    ...c,
    // Header names are case-insensitive; canonical lower case keeps the output stable.
    protectedHeaders: [...new Set(c.protectedHeaders.map((h) => h.toLowerCase()))].sort(),
    protectedPorts: [...new Set(c.protectedPorts)].sort((a, b) => a - b),
  }));

export type OperatorConfig = z.output<typeof operatorSettingsSchema> & { readonly additionalAllowedCIDRs: readonly Cidr[] };

