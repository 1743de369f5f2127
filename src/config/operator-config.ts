// The OperatorConfiguration as it is read at every boundary (the file, the chart's values, the
// render's input): each field as operator-settings.ts defines it, and whether the values fit
// together, measured with the filter builders' own sizes.
import { type Cidr } from '../acl/cidr.js';
import { GATEWAY_ROOM_BYTES, combinedConnectPolicy, combinedPolicyBytes, shardBudget } from '../rbac/combined-connect-filters.js';
import { SCAFFOLD_GATEWAY, matcherEntryBytes, matcherScaffoldingBytes, shootAclLeaf } from '../rbac/connect-matcher.js';
import { ecdsListenerObject, ecdsScaffoldingBytes } from '../rbac/connect-matcher-ecds.js';
import { fieldErrorsFromZod, REPORT_INPUT, type FieldError } from '../acl/field-errors.js';
import { MAX_LISTENER_PART_BYTES, MAX_OBJECT_BYTES, isMatcherForm, operatorSettingsSchema, type CombinedFormName, type OperatorConfig } from '../acl/operator-settings.js';

export * from '../acl/operator-settings.js';

/**
 * Always-allowed ranges a real shoot brings besides the operator's: seed nodes and pods, shoot
 * nodes, Infrastructure egress CIDRs and a managed seed's egress; 16 leaves room for many egress IPs.
 */
const REALISTIC_SHOOT_ALWAYS_ALLOWED = 16;
// Namespace names are at most 63 characters, so no technical ID is longer.
const LONGEST_TECHNICAL_ID = `shoot--${'p'.repeat(10)}--${'s'.repeat(63 - 'shoot--'.length - 10 - 2)}`;

type SizeInputs = Pick<OperatorConfig, 'protectedHeaders' | 'additionalAllowedCIDRs' | 'maxObjectBytes'> & { readonly combinedForm?: CombinedFormName };

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

/** Per-seed settings an operator chooses when installing the extension, checked to fit together. */
export const operatorConfigSchema = operatorSettingsSchema
  .superRefine((c, ctx) => {
    const problem = maximalShootProblem(c);
    if (problem) ctx.addIssue({ code: 'custom', path: ['maxCIDRs'], message: problem, input: c.maxCIDRs });
    const listenerPart = ecdsListenerPartProblem(c);
    if (listenerPart) ctx.addIssue({ code: 'custom', path: ['ecdsBuckets'], message: listenerPart, input: c.ecdsBuckets });
  });

export function defaultOperatorConfig(): OperatorConfig {
  return operatorConfigSchema.parse({});
}

export function parseOperatorConfig(raw: unknown, pathPrefix = ''): { ok: true; config: OperatorConfig } | { ok: false; errors: FieldError[] } {
  const result = operatorConfigSchema.safeParse(raw ?? {}, REPORT_INPUT);
  if (result.success) return { ok: true, config: result.data };
  return { ok: false, errors: fieldErrorsFromZod(result.error, pathPrefix) };
}
