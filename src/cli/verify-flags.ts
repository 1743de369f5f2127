// The flags of `gardener-acl verify`: the parser, the schema and the usage text read them here.
import { z } from 'zod';
import type { FlagTable } from './flag-table.js';
import { SEED_INPUT_FLAGS, technicalIdFlag } from './seed-input-flags.js';

export const VERIFY_FLAGS = {
  'config-dump': { value: 'FILE', help: 'the gateway Envoy\'s admin /config_dump as JSON ("-": stdin; how to get one: above)', schema: z.string().optional() },
  'admin-url': {
    value: 'URL',
    help: "Envoy's admin address (e.g. after a port-forward: above)",
    schema: z.url({ error: (i) => `--admin-url ${JSON.stringify(i.input)} is not a URL; write e.g. http://127.0.0.1:15000` }).optional(),
  },
  gateway: { value: 'NAMESPACE', defaultText: "the seed's only gateway", help: "the gateway's namespace", schema: z.string().optional() },
  shoot: { value: 'ID', multiple: true, help: 'check only these shoots (technical IDs; repeat it)', schema: z.array(technicalIdFlag).optional() },
  ...SEED_INPUT_FLAGS,
} as const satisfies FlagTable;
