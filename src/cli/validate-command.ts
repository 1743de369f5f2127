// `gardener-acl validate`: the Shoot admission webhook's checks, offline. An owner runs it on the
// manifest they are about to apply (or in CI) and gets the webhook's own verdict and texts; an
// Extension object gets the controller's check of its providerConfig.
import { z } from 'zod';
import { operatorSettingsSchema } from '../acl/operator-settings.js';
import { parseProviderConfig } from '../acl/provider-config.js';
import { formatFieldErrors } from '../acl/field-errors.js';
import { EXTENSION_TYPE } from '../gardener/seed-acl.js';
import { formatProblem, objectRef, type Problem } from '../gardener/problems.js';
import { readShootManifest } from '../gardener/shoot-manifest.js';
import { validateShoot } from '../webhook/shoot-validator.js';
import { argsUsageError, parseCommandArgs, usageError } from './command-args.js';
import { flagLines, flagsSchema, parseOptions, type FlagTable } from './flag-table.js';
import { loadDocuments } from './load-documents.js';
import { loadOperatorConfigFile, operatorConfigAmong } from './operator-config-file.js';
import type { CommandIO } from './command-io.js';

const VALIDATE_FLAGS = {
  config: { value: 'operator.yaml', help: "an OperatorConfiguration whose maxCIDRs bounds the rules (e.g. the admission chart's)", schema: z.string().optional() },
  'max-cidrs': {
    value: 'N',
    defaultText: `an OperatorConfiguration's among the FILEs, else ${operatorSettingsSchema.parse({}).maxCIDRs}`,
    help: 'the most ranges one rule may list',
    schema: z
      .string()
      .regex(/^[1-9]\d{0,4}$/, { error: (i) => `--max-cidrs must be a whole number from 1 to 99999, not ${JSON.stringify(i.input)}` })
      .transform(Number)
      .optional(),
  },
} as const satisfies FlagTable;

export const VALIDATE_USAGE = `usage: gardener-acl validate [--config operator.yaml | --max-cidrs N] FILE...

Checks each Shoot manifest's acl extension exactly as the Shoot admission webhook does (same
messages, same warnings), and each Extension of type acl's providerConfig as the controller does.
FILE may be a file, a directory or - (stdin); multi-document files and kind: List are fine.
The limit on ranges per rule is the operator's maxCIDRs: from --config (an OperatorConfiguration,
e.g. the admission chart's), --max-cidrs, an OperatorConfiguration among the FILEs, or the default.
Exit codes: 0 every object would be admitted (warnings may be printed), 1 some object would be
refused, 2 invalid input (unreadable file, nothing to check, bad flags).

${flagLines(VALIDATE_FLAGS, 28)}`;


const argsSchema = flagsSchema(VALIDATE_FLAGS).extend({
  files: z.array(z.string()).min(1, { error: 'give at least one FILE (a Shoot manifest, a directory, or - for stdin)' }),
});

/** One object's verdict, as lines in the shape every command prints problems in. */
function checkObject(object: unknown, source: string, maxCidrs: number): { readonly checked: boolean; readonly refused: boolean; readonly problems: Problem[] } {
  const meta = object as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown }; spec?: { type?: unknown; providerConfig?: unknown } } | null;
  const kind = typeof meta?.kind === 'string' ? meta.kind : undefined;
  const name = typeof meta?.metadata?.name === 'string' ? meta.metadata.name : '(no name)';
  const namespace = typeof meta?.metadata?.namespace === 'string' ? meta.metadata.namespace : undefined;
  const at = `${source}: ${objectRef(kind ?? '(no kind)', namespace, name)}`;
  if (kind === 'Shoot') {
    const verdict = validateShoot({ uid: 'validate', kind: { group: 'core.gardener.cloud', version: 'v1beta1', kind: 'Shoot' }, operation: 'CREATE', object }, maxCidrs);
    if (!verdict.allowed) return { checked: true, refused: true, problems: [{ severity: 'error', object: at, message: `the Shoot webhook refuses it (${verdict.code} ${verdict.reason}): ${verdict.message}` }] };
    const warnings: Problem[] = (verdict.warnings ?? []).map((message) => ({ severity: 'warning', object: at, message }));
    const manifest = readShootManifest(object);
    // The webhook has nothing to say about a Shoot without the extension; an owner who misspelt it wants to know.
    const note: Problem[] = 'manifest' in manifest && !manifest.manifest.hasAcl ? [{ severity: 'warning', object: at, message: `no enabled extension of type "${EXTENSION_TYPE}" in spec.extensions: it has no ACL` }] : [];
    return { checked: true, refused: false, problems: [...warnings, ...note] };
  }
  if (kind === 'Extension' && meta?.spec?.type === EXTENSION_TYPE) {
    const parsed = parseProviderConfig(meta.spec.providerConfig, maxCidrs, 'spec.providerConfig');
    if (!parsed.ok) return { checked: true, refused: true, problems: [{ severity: 'error', object: at, message: `the controller refuses it (the Extension goes Error with this lastError): ${formatFieldErrors(parsed.errors)}` }] };
    return { checked: true, refused: false, problems: parsed.warnings.map((w) => ({ severity: 'warning', object: at, message: `${w.path}: ${w.message}` })) };
  }
  return { checked: false, refused: false, problems: [] };
}

export async function validateCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, VALIDATE_USAGE, parseOptions(VALIDATE_FLAGS), { allowPositionals: true });
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ ...parsed.values, files: parsed.positionals });
  if (!args.success) return argsUsageError(io, VALIDATE_USAGE, args.error.issues, 'message-only');
  const a = args.data;
  if (a.config !== undefined && a['max-cidrs'] !== undefined) return usageError(io, VALIDATE_USAGE, 'give either --config or --max-cidrs, not both');
  const operator = await loadOperatorConfigFile(a.config);
  if ('error' in operator) {
    io.stderr(`--config ${a.config ?? ''}: ${operator.error}\n`);
    return 2;
  }
  const loaded = await loadDocuments(a.files, { readStdin: io.readStdin });
  for (const problem of loaded.problems) io.stderr(`${formatProblem(problem)}\n`);
  let maxCidrs = a['max-cidrs'] ?? operator.config.maxCIDRs;
  // A seed directory's own configuration counts, as for render and explain, unless a flag says otherwise.
  if (a.config === undefined && a['max-cidrs'] === undefined) {
    const own = operatorConfigAmong(loaded.objects);
    if ('problem' in own) {
      io.stderr(`${formatProblem(own.problem)}\n`);
      return 2;
    }
    maxCidrs = own.config?.maxCIDRs ?? maxCidrs;
  }
  const isOperatorConfig = (o: { readonly object: unknown }) => (o.object as { kind?: unknown } | null)?.kind === 'OperatorConfiguration';
  let checked = 0;
  let refused = 0;
  const skipped = new Map<string, number>();
  for (const { object, source } of loaded.objects.filter((o) => !isOperatorConfig(o))) {
    const result = checkObject(object, source, maxCidrs);
    for (const problem of result.problems) io.stderr(`${formatProblem(problem)}\n`);
    if (result.checked) checked++;
    else {
      const kind = String((object as { kind?: unknown } | null)?.kind ?? '(no kind)');
      skipped.set(kind, (skipped.get(kind) ?? 0) + 1);
    }
    if (result.refused) refused++;
  }
  if (skipped.size > 0) {
    const kinds = [...skipped].map(([kind, n]) => `${n} ${kind}`).join(', ');
    io.stderr(`note: not checked: ${kinds} (validate checks Shoot manifests and Extension objects of type acl)\n`);
  }
  if (loaded.problems.some((p) => p.severity === 'error')) return 2;
  if (checked === 0) {
    io.stderr('gardener-acl validate: no Shoot or acl Extension in the input; nothing was checked\n');
    return 2;
  }
  io.stdout(`${checked} object(s) checked, ${refused} refused (maxCIDRs ${maxCidrs})\n`);
  return refused > 0 ? 1 : 0;
}
