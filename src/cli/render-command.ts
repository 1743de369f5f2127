import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { formatProblem } from '../gardener/problems.js';
import { renderSeed } from '../render/seed-render.js';
import { toYamlDocuments } from '../render/yaml-documents.js';
import { loadDocuments } from './load-documents.js';

/** The seed rendered when no path is given (shipped with the project). */
export const EMBEDDED_EXAMPLE = fileURLToPath(new URL('../../examples/seed', import.meta.url));

const argsSchema = z.object({
  output: z.enum(['yaml', 'json'], { error: (i) => `--output must be yaml or json, not ${JSON.stringify(i.input)}` }),
  config: z.string().optional(),
  paths: z.array(z.string()),
});

export const RENDER_USAGE = `usage: gardener-acl render [--output yaml|json] [--config operator.yaml] [PATH...]

Reads Gardener/Istio/Kubernetes objects (files or directories of YAML/JSON; multi-document
files and kind: List are fine) and prints the EnvoyFilters and the JSON patches for Gardener's
legacy apiserver-proxy EnvoyFilters that the extension would write for that seed.
Without PATH it renders the embedded example seed (examples/seed).
Exit codes: 0 ok, 2 invalid input (each problem names file, object and field).`;

export interface CommandIO {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

export async function renderCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  let parsedArgs;
  try {
    parsedArgs = parseArgs({
      args: [...argv],
      options: { output: { type: 'string', short: 'o', default: 'yaml' }, config: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
    });
  } catch (error) {
    io.stderr(`${(error as Error).message}\n${RENDER_USAGE}\n`);
    return 2;
  }
  if (parsedArgs.values.help) {
    io.stdout(`${RENDER_USAGE}\n`);
    return 0;
  }
  const args = argsSchema.safeParse({ output: parsedArgs.values.output, config: parsedArgs.values.config, paths: parsedArgs.positionals });
  if (!args.success) {
    io.stderr(`${args.error.issues.map((i) => i.message).join('\n')}\n${RENDER_USAGE}\n`);
    return 2;
  }
  const paths = args.data.paths.length > 0 ? args.data.paths : [EMBEDDED_EXAMPLE];
  const loaded = await loadDocuments(args.data.config ? [...paths, args.data.config] : paths);
  const result = renderSeed(loaded.objects);
  const problems = [...loaded.problems, ...result.problems];
  for (const problem of problems) io.stderr(`${formatProblem(problem)}\n`);
  if (problems.some((p) => p.severity === 'error')) {
    io.stderr(`gardener-acl render: ${problems.filter((p) => p.severity === 'error').length} error(s); nothing printed\n`);
    return 2;
  }
  const items = [...result.envoyFilters, ...result.patches];
  if (args.data.output === 'json') io.stdout(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items }, null, 2)}\n`);
  else io.stdout(toYamlDocuments(items));
  return 0;
}
