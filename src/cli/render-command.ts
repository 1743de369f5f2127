import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { formatProblem } from '../gardener/problems.js';
import { writeDocuments } from '../render/document-writer.js';
import { progressMode, RenderProgress } from '../render/render-progress.js';
import { renderSeedStream } from '../render/seed-render.js';
import { argsUsageError, parseCommandArgs } from './command-args.js';
import { flagLines, flagsSchema, parseOptions, type FlagTable } from './flag-table.js';
import type { CommandIO } from './command-io.js';
import { loadDocuments } from './load-documents.js';
import { embeddedExampleSeed } from './package-root.js';

/** The seed rendered when no path is given (shipped with the project; where depends on the layout, see package-root.ts). */
export const EMBEDDED_EXAMPLE = embeddedExampleSeed(fileURLToPath(new URL('.', import.meta.url)));


const RENDER_FLAGS = {
  output: { value: 'yaml|json', short: 'o', default: 'yaml', help: 'output format', schema: z.enum(['yaml', 'json'], { error: (i) => `--output must be yaml or json, not ${JSON.stringify(i.input)}` }) },
  config: { value: 'operator.yaml', help: "an OperatorConfiguration; replaces the seed's own", schema: z.string().optional() },
} as const satisfies FlagTable;

const argsSchema = flagsSchema(RENDER_FLAGS).extend({ paths: z.array(z.string()) });

export const RENDER_USAGE = `usage: gardener-acl render [--output yaml|json] [--config operator.yaml] [PATH...]

Reads Gardener/Istio/Kubernetes objects (files or directories of YAML/JSON; multi-document
files and kind: List are fine) and prints the EnvoyFilters and the JSON patches for Gardener's
legacy apiserver-proxy EnvoyFilters that the extension would write for that seed.
Without PATH it renders the embedded example seed (examples/seed).
Exit codes: 0 ok, 2 invalid input (each problem names file, object and field).

${flagLines(RENDER_FLAGS, 28)}`;

export async function renderCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const now = io.now ?? (() => performance.now());
  const startedAt = now();
  const parsed = parseCommandArgs(argv, io, RENDER_USAGE, parseOptions(RENDER_FLAGS), { allowPositionals: true });
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ output: parsed.values.output, config: parsed.values.config, paths: parsed.positionals });
  if (!args.success) return argsUsageError(io, RENDER_USAGE, args.error.issues, 'message-only');
  const paths = args.data.paths.length > 0 ? args.data.paths : [EMBEDDED_EXAMPLE];
  const mode = progressMode(io.stderrIsTTY ?? process.stderr.isTTY === true, io.stdoutIsTTY ?? process.stdout.isTTY === true);
  const progress = new RenderProgress(mode, io.stderr, now, startedAt);
  // Only the model outlives this block: the documents read are let go before the output is written.
  const { result, problems } = await (async () => {
    const loaded = await loadDocuments(paths);
    // --config replaces the seed's own OperatorConfiguration, as for explain.
    const config = args.data.config === undefined ? undefined : await loadDocuments([args.data.config]);
    const isOperatorConfig = (o: { object: unknown }) => (o.object as { kind?: unknown } | null)?.kind === 'OperatorConfiguration';
    const objects = config ? [...loaded.objects.filter((o) => !isOperatorConfig(o)), ...config.objects] : loaded.objects;
    const configProblems =
      config && !config.objects.some(isOperatorConfig) && config.problems.length === 0
        ? [{ severity: 'error' as const, object: `--config ${args.data.config ?? ''}`, message: 'no OperatorConfiguration in it' }]
        : [];
    progress.stage(`${objects.length} objects read; building the model`);
    const stream = renderSeedStream(objects);
    return { result: stream, problems: [...loaded.problems, ...(config?.problems ?? []), ...configProblems, ...stream.problems] };
  })();
  if (problems.length > 0) progress.interrupt();
  for (const problem of problems) io.stderr(`${formatProblem(problem)}\n`);
  if (problems.some((p) => p.severity === 'error')) {
    io.stderr(`gardener-acl render: ${problems.filter((p) => p.severity === 'error').length} error(s); nothing printed\n`);
    return 2;
  }
  progress.writing(result.aclShoots);
  try {
    progress.finish(await writeDocuments(result.documents(progress.object), args.data.output, { write: io.stdout, drained: io.drained }, progress.documentWritten));
  } catch (error) {
    // The error is reported by the caller, on a line of its own.
    progress.interrupt();
    throw error;
  }
  return 0;
}
