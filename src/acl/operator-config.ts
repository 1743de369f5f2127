import { z } from 'zod';
import type { Cidr } from './cidr.js';
import { cidrStringSchema } from './cidr-schema.js';
import { fieldErrorsFromZod, REPORT_INPUT, type FieldError } from './field-errors.js';

const port = z.number().int().min(1).max(65535);
// RFC 7230 token characters; Envoy compares header names case-insensitively.
const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'must be an HTTP header name such as X-Gardener-Destination' });

export const DEFAULT_PROTECTED_HEADERS = ['Reversed-VPN', 'X-Gardener-Destination'] as const;
export const DEFAULT_PROTECTED_PORTS = [8132, 8443] as const;

/** Per-seed settings an operator chooses when installing the extension. */
export const operatorConfigSchema = z
  .strictObject({
    apiVersion: z.literal('acl.gardener.cloud/v1alpha1').optional(),
    kind: z.literal('OperatorConfiguration').optional(),
    /** Always admitted for every shoot, in addition to the seed's and the shoot's own ranges. */
    additionalAllowedCIDRs: z.array(cidrStringSchema).default([]),
    /** Most CIDRs a shoot's rule may list (at most 1000, so one shoot's filters always fit one object). */
    maxCIDRs: z.number().int().min(1).max(1000).default(50),
    /** HTTP-CONNECT headers whose value selects the destination cluster. */
    protectedHeaders: z.array(headerName).min(1).default([...DEFAULT_PROTECTED_HEADERS]),
    /** Gateway listener ports (target ports) that terminate HTTP CONNECT. */
    protectedPorts: z.array(port).min(1).default([...DEFAULT_PROTECTED_PORTS]),
    /** Listener port of the TLS/SNI server (Service port 443). */
    sniPort: port.default(9443),
    /** Listener port of the legacy PROXY-protocol apiserver-proxy path (Gardener < 1.123). */
    legacyProxyPort: port.default(8443),
    /** Largest serialized size (bytes) of one generated EnvoyFilter; combined filters are sharded below it. */
    maxObjectBytes: z.number().int().min(16 * 1024).max(1024 * 1024).default(384 * 1024),
  })
  .transform((c) => ({
    ...c,
    // Header names are case-insensitive; canonical lower case keeps the output stable.
    protectedHeaders: [...new Set(c.protectedHeaders.map((h) => h.toLowerCase()))].sort(),
    protectedPorts: [...new Set(c.protectedPorts)].sort((a, b) => a - b),
  }));

export type OperatorConfig = z.output<typeof operatorConfigSchema> & { readonly additionalAllowedCIDRs: readonly Cidr[] };

export function defaultOperatorConfig(): OperatorConfig {
  return operatorConfigSchema.parse({});
}

export function parseOperatorConfig(raw: unknown, pathPrefix = ''): { ok: true; config: OperatorConfig } | { ok: false; errors: FieldError[] } {
  const result = operatorConfigSchema.safeParse(raw ?? {}, REPORT_INPUT);
  if (result.success) return { ok: true, config: result.data };
  return { ok: false, errors: fieldErrorsFromZod(result.error, pathPrefix) };
}
