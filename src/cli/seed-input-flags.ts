// The flags of a command that reads a seed (with its positional PATHs) and prints a report:
// explain and verify. Light, so --help reads them without loading the seed readers.
import { z } from 'zod';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import type { FlagTable } from './flag-table.js';

export const SEED_INPUT_FLAGS = {
  output: { value: 'text|json', short: 'o', default: 'text', help: 'the report as text or as JSON', schema: z.enum(['text', 'json'], { error: (i) => `--output must be text or json, not ${JSON.stringify(i.input)}` }) },
  kubeconfig: { value: 'PATH', help: 'read the live seed (the objects the controller reads) instead of files', schema: z.string().optional() },
  config: { value: 'operator.yaml', help: "the operator configuration the controller runs with (else the seed's own, else the defaults)", schema: z.string().optional() },
} as const satisfies FlagTable;

/** A shoot's technical ID as --shoot takes it. */
export const technicalIdFlag = z.string().refine((id) => parseTechnicalID(id) !== undefined, {
  error: (issue) => `--shoot ${JSON.stringify(issue.input)} is not a technical ID; write shoot--<project>--<name> (or the legacy shoot-<project>--<name>)`,
});
