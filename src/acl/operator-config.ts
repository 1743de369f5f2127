import { z } from 'zod';
import type { Cidr } from './cidr.js';
import { cidrStringSchema } from './cidr-schema.js';
import { GATEWAY_ROOM_BYTES, combinedConnectPolicy, combinedPolicyBytes, shardBudget } from '../rbac/combined-connect-filters.js';
import { RESERVED_HEADER_PREFIX, SCAFFOLD_GATEWAY, matcherEntryBytes, matcherScaffoldingBytes, shootAclLeaf } from '../rbac/connect-matcher.js';
import { ecdsListenerObject, ecdsScaffoldingBytes } from '../rbac/connect-matcher-ecds.js';
import { fieldErrorsFromZod, REPORT_INPUT, type FieldError } from './field-errors.js';

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
/**
 * Always-allowed ranges a real shoot brings besides the operator's: seed nodes and pods, shoot
 * nodes, Infrastructure egress CIDRs and a managed seed's egress; 16 leaves room for many egress IPs.
 */
const REALISTIC_SHOOT_ALWAYS_ALLOWED = 16;
// Namespace names are at most 63 characters, so no technical ID is longer.
const LONGEST_TECHNICAL_ID = `shoot--${'p'.repeat(10)}--${'s'.repeat(63 - 'shoot--'.length - 10 - 2)}`;

type SizeInputs = Pick<OperatorConfig, 'protectedHeaders' | 'additionalAllowedCIDRs' | 'maxObjectBytes'> & { readonly combinedForm?: CombinedFormName };

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

/** `count` distinct IPv4 hosts of the longest textual form (each also gets its IPv4-mapped twin in a policy). */
function longestIpv4Hosts(count: number, offset: number): Cidr[] {
  return Array.from({ length: count }, (_, i) => {
    const n = BigInt(i + offset);
    const octets = [100n + ((n >> 18n) & 0x3fn), 100n + ((n >> 12n) & 0x3fn), 100n + ((n >> 6n) & 0x3fn), 100n + (n & 0x3fn)];
    return { family: 4 as const, address: octets.reduce((a, o) => (a << 8n) | o, 0n), prefixLen: 32 };
  });
}

/** `count` distinct IPv6 hosts with all eight groups written out. */
function longestIpv6Hosts(count: number): Cidr[] {
  return Array.from({ length: count }, (_, i) => ({ family: 6 as const, address: 0xfedcba98fedcba98fedcba98fedc0000n + BigInt(0x1000 + i), prefixLen: 128 }));
}

/** The most bytes one shoot with `cidrs` CIDRs takes in a combined filter, over every action, type and address family. */
export function maximalShootPolicyBytes(config: SizeInputs, cidrs: number): number {
  const alwaysAllowed = [...config.additionalAllowedCIDRs, ...longestIpv4Hosts(REALISTIC_SHOOT_ALWAYS_ALLOWED, 1 << 23)];
  let most = 0;
  for (const ruleCidrs of [longestIpv4Hosts(cidrs, 0), longestIpv6Hosts(cidrs)]) {
    for (const action of ['ALLOW', 'DENY'] as const) {
      const shoot = { technicalID: LONGEST_TECHNICAL_ID, rule: { action, type: 'direct_remote_ip', cidrs: ruleCidrs, mode: 'enforce' }, alwaysAllowed } as const;
      const bytes =
        isMatcherForm(config.combinedForm)
          ? // ECDS buckets hold each leaf once, whatever the headers; matcher shards once per header.
            matcherEntryBytes(LONGEST_TECHNICAL_ID, shootAclLeaf(shoot), config.combinedForm === 'ecds' ? 1 : config.protectedHeaders.length)
          : combinedPolicyBytes(LONGEST_TECHNICAL_ID, combinedConnectPolicy(shoot, config));
      most = Math.max(most, bytes);
    }
  }
  return most;
}

/** Bytes a combined object of the configured form takes besides its entries (see shardBudget). */
function formScaffoldingBytes(config: SizeInputs): number {
  if (config.combinedForm === 'ecds') return ecdsScaffoldingBytes(config.protectedHeaders);
  return config.combinedForm === 'matcher' ? matcherScaffoldingBytes(config.protectedHeaders) : 0;
}

/** Why one maximal shoot could not fit one combined filter under these values; undefined when it fits. */
function maximalShootProblem(config: SizeInputs & { readonly maxCIDRs: number }): string | undefined {
  const budget = shardBudget(config.maxObjectBytes, formScaffoldingBytes(config));
  const needed = maximalShootPolicyBytes(config, config.maxCIDRs);
  if (needed <= budget) return undefined;
  let fitting = 0;
  for (let lo = 1, hi = config.maxCIDRs - 1; lo <= hi; ) {
    const mid = Math.floor((lo + hi) / 2);
    if (maximalShootPolicyBytes(config, mid) <= budget) {
      fitting = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  const neededObject = needed + (config.maxObjectBytes - budget);
  const fixes = [
    ...(fitting > 0 ? [`lower maxCIDRs to at most ${fitting}`] : []),
    ...(neededObject <= MAX_OBJECT_BYTES ? [`raise maxObjectBytes to at least ${neededObject}`] : []),
    ...(config.additionalAllowedCIDRs.length > 0 ? ['list fewer additionalAllowedCIDRs'] : []),
  ];
  return (
    `maxCIDRs ${config.maxCIDRs} does not fit maxObjectBytes ${config.maxObjectBytes}: one shoot with ${config.maxCIDRs} CIDRs ` +
    `(plus ${config.additionalAllowedCIDRs.length} additionalAllowedCIDRs and ${REALISTIC_SHOOT_ALWAYS_ALLOWED} ranges of its own) needs up to ${needed} bytes, ` +
    `more than the ${budget} bytes one combined CONNECT filter holds; ${fixes.join(', or ')}`
  );
}

/**
 * Why the ECDS listener parts would not fit one object; undefined when they do. They name every
 * bucket once per protected header, with its default config, whatever the shoots: fixed
 * scaffolding, not sized by maxObjectBytes, but never above what an object may take at all.
 */
function ecdsListenerPartProblem(config: Pick<OperatorConfig, 'combinedForm' | 'protectedHeaders' | 'ecdsBuckets'>): string | undefined {
  if (config.combinedForm !== 'ecds') return undefined;
  const bytes = JSON.stringify(ecdsListenerObject(SCAFFOLD_GATEWAY, 65535, config.protectedHeaders, config.ecdsBuckets)).length + GATEWAY_ROOM_BYTES;
  if (bytes <= MAX_LISTENER_PART_BYTES) return undefined;
  return (
    `ecdsBuckets ${config.ecdsBuckets} with ${config.protectedHeaders.length} protectedHeaders needs ECDS listener parts of about ${bytes} bytes (each names every bucket once per header), ` +
    `more than the ${MAX_LISTENER_PART_BYTES} bytes one object may take; lower ecdsBuckets (and raise maxObjectBytes to keep the capacity) or list fewer protectedHeaders`
  );
}

/** Per-seed settings an operator chooses when installing the extension. */
export const operatorConfigSchema = z
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
  }))
  .superRefine((c, ctx) => {
    const problem = maximalShootProblem(c);
    if (problem) ctx.addIssue({ code: 'custom', path: ['maxCIDRs'], message: problem, input: c.maxCIDRs });
    const listenerPart = ecdsListenerPartProblem(c);
    if (listenerPart) ctx.addIssue({ code: 'custom', path: ['ecdsBuckets'], message: listenerPart, input: c.ecdsBuckets });
  });

export type OperatorConfig = z.output<typeof operatorConfigSchema> & { readonly additionalAllowedCIDRs: readonly Cidr[] };

export function defaultOperatorConfig(): OperatorConfig {
  return operatorConfigSchema.parse({});
}

export function parseOperatorConfig(raw: unknown, pathPrefix = ''): { ok: true; config: OperatorConfig } | { ok: false; errors: FieldError[] } {
  const result = operatorConfigSchema.safeParse(raw ?? {}, REPORT_INPUT);
  if (result.success) return { ok: true, config: result.data };
  return { ok: false, errors: fieldErrorsFromZod(result.error, pathPrefix) };
}
