// The flags of `gardener-acl explain`: the parser, the schema and the usage text read them here.
import { z } from 'zod';
import { parseCidr } from '../acl/cidr.js';
import { EXPLAIN_PATHS, parseClientAddress } from '../explain/client-address.js';
import type { FlagTable } from './flag-table.js';
import { SEED_INPUT_FLAGS, technicalIdFlag } from './seed-input-flags.js';

const headerSchema = z.string().transform((text, ctx): [string, string] => {
  const colon = text.indexOf(':');
  if (colon <= 0) {
    ctx.addIssue({ code: 'custom', message: `--header ${JSON.stringify(text)} is not "Name: value"; write e.g. --header 'Reversed-VPN: outbound|1194||vpn-seed-server.shoot--p--a.svc.cluster.local'` });
    return z.NEVER;
  }
  return [text.slice(0, colon).trim(), text.slice(colon + 1).trim()];
});

const addressSchema = (flag: string) =>
  z.string({ error: `${flag} is required: the client's IP address, e.g. ${flag} 203.0.113.9` }).transform((text, ctx) => {
    // An address as an access log prints it, with the client's port: the port does not decide.
    const withPort = /^\[([^\]]+)\]:\d{1,5}$/.exec(text.trim()) ?? /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text.trim());
    const parsed = parseClientAddress(withPort?.[1] ?? text);
    if (!parsed) {
      ctx.addIssue({ code: 'custom', message: `${flag} ${JSON.stringify(text)} is not an IPv4 or IPv6 address; write e.g. 203.0.113.9 or 2001:db8::1` });
      return z.NEVER;
    }
    return parsed;
  });

export const EXPLAIN_FLAGS = {
  shoot: {
    value: 'ID',
    defaultText: "the one Shoot manifest's technical ID",
    help: 'the shoot (technical ID shoot--<project>--<name>)',
    schema: technicalIdFlag.optional(),
  },
  garden: {
    help: "the virtual garden's API server instead of a shoot: PATHs hold the runtime cluster's Garden, Gateway and istio-ingressgateway Deployments and the virtual garden's ManagedSeeds and Shoots",
    schema: z.boolean().optional(),
  },
  'virtual-garden-kubeconfig': {
    value: 'PATH',
    defaultText: 'none: no ManagedSeed is known',
    help: "with --garden and --kubeconfig (the runtime cluster): the virtual garden, for its ManagedSeeds and their Shoots' egress",
    schema: z.string().min(1).optional(),
  },
  client: { value: 'IP', help: 'the address Envoy sees as remote (required; a port as in an access log is ignored)', schema: addressSchema('--client') },
  peer: { value: 'IP', defaultText: '--client', help: 'the physical peer, for direct_remote_ip rules', schema: addressSchema('--peer').optional() },
  path: {
    value: EXPLAIN_PATHS.join('|'),
    defaultText: 'every path',
    help: 'only this path',
    schema: z.enum(EXPLAIN_PATHS, { error: (i) => `--path must be one of ${EXPLAIN_PATHS.join(', ')}, not ${JSON.stringify(i.input)}` }).optional(),
  },
  header: { value: "'Name: value'", multiple: true, help: 'a header of a concrete CONNECT request (repeat it for several)', schema: z.array(headerSchema).optional() },
  ...SEED_INPUT_FLAGS,
  'always-allowed': {
    value: 'CIDR',
    multiple: true,
    help: "with a Shoot manifest alone: a range always admitted (the seed's nodes and pods, the shoot's egress, the operator's); repeat it",
    schema: z
      .array(
        z.string().transform((text, ctx) => {
          const parsed = parseCidr(text);
          if (parsed.ok) return parsed.cidr;
          ctx.addIssue({ code: 'custom', message: `--always-allowed ${JSON.stringify(text)} is not a CIDR (${parsed.reason}); write e.g. --always-allowed 10.250.0.0/16` });
          return z.NEVER;
        }),
      )
      .optional(),
  },
} as const satisfies FlagTable;
