import { z } from 'zod';
import { explainShoot, type Explanation, type LegacyChain } from '../explain/explain-acl.js';
import { formatProblem } from '../gardener/problems.js';
import { explainGardenFrom } from './garden-explain.js';
import { findLegacyChains } from '../rbac/legacy-proxy-patch.js';
import { argsUsageError, parseCommandArgs, usageError } from './command-args.js';
import type { CommandIO } from './command-io.js';
import { EXPLAIN_FLAGS } from './explain-flags.js';
import { flagsSchema, parseOptions } from './flag-table.js';
import { loadSeedModel, shootsNamed } from './seed-inputs.js';
import { EXPLAIN_USAGE } from './usage-texts.js';

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { EXPLAIN_USAGE };

const argsSchema = flagsSchema(EXPLAIN_FLAGS).extend({ paths: z.array(z.string()) });

function formatText(explanation: Explanation): string {
  const lines = [explanation.summary];
  for (const v of explanation.verdicts) lines.push(`${v.verdict.padEnd(8)} ${v.path.padEnd(13)} ${v.gateway}  ${v.at}\n         ${v.reason}`);
  if (explanation.verdicts.length === 0) lines.push('(no path of this kind leads to the shoot on this seed)');
  return `${lines.join('\n')}\n`;
}

export async function explainCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, EXPLAIN_USAGE, parseOptions(EXPLAIN_FLAGS), { allowPositionals: true });
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ ...parsed.values, paths: parsed.positionals });
  if (!args.success) return argsUsageError(io, EXPLAIN_USAGE, args.error.issues, 'message-only');
  const a = args.data;
  if (a.garden) return explainGardenCommand(a, io);
  if (a['virtual-garden-kubeconfig'] !== undefined) return usageError(io, EXPLAIN_USAGE, '--virtual-garden-kubeconfig is for --garden (the virtual garden’s ManagedSeeds)');
  if (a.header && a.path !== undefined && a.path !== 'connect') {
    return usageError(io, EXPLAIN_USAGE, `--header describes a CONNECT request; it has no effect on --path ${a.path}: drop --path (every path) or use --path connect`);
  }
  const loaded = await loadSeedModel(
    { kubeconfig: a.kubeconfig, config: a.config, paths: a.paths, shoot: a.shoot, shootManifests: true, alwaysAllowed: a['always-allowed'], readStdin: io.readStdin },
    io,
    'explain',
  );
  if (typeof loaded === 'number') return loaded;
  const { model, problems } = loaded;
  const onlyManifest = loaded.manifests.size === 1 ? [...loaded.manifests.keys()][0] : undefined;
  const shoot = a.shoot ?? onlyManifest;
  if (shoot === undefined) {
    return usageError(io, EXPLAIN_USAGE, loaded.manifests.size > 1 ? `--shoot is required: the inputs hold ${loaded.manifests.size} Shoot manifests (${[...loaded.manifests.keys()].join(', ')})` : '--shoot is required: the technical ID, e.g. --shoot shoot--project--name (or give the Shoot manifest as a PATH)');
  }
  // Errors about this shoot or the whole seed make the answer unreliable; other shoots' errors do not.
  const errors = problems.filter((p) => p.severity === 'error');
  const otherShoots = errors.filter((p) => {
    const named = shootsNamed(p.object);
    return named.length > 0 && !named.includes(shoot);
  });
  const relevant = errors.filter((p) => !otherShoots.includes(p));
  for (const p of relevant) io.stderr(`${formatProblem(p)}\n`);
  if (otherShoots.length > 0) io.stderr(`(${otherShoots.length} error(s) about other shoots not shown)\n`);
  if (!model.seed || relevant.length > 0) {
    io.stderr(
      `gardener-acl explain: the objects have errors about ${shoot} or the seed; no verdict. ` +
        `The controller keeps the ACL it last applied (the Extension's status.state) until they are fixed.\n`,
    );
    return 2;
  }
  if (!model.shoots.has(shoot)) {
    io.stderr(`gardener-acl explain: no Cluster or Extension of ${shoot} in ${a.kubeconfig ? 'the seed' : 'the objects given'}; check the technical ID (shoot--<project>--<name>, the shoot namespace on the seed)\n`);
    return 2;
  }
  const legacyChains: LegacyChain[] = model.legacyFilters.flatMap((f) =>
    findLegacyChains(f, model.seed?.operator.legacyProxyPort ?? 0).map((c) => ({ namespace: f.metadata.namespace, envoyFilter: `${f.metadata.namespace}/${f.metadata.name}`, technicalID: c.technicalID })),
  );
  const explanation = explainShoot({
    seed: model.seed,
    legacyChains,
    technicalID: shoot,
    client: a.client,
    peer: a.peer,
    paths: a.path ? [a.path] : undefined,
    headers: a.header,
  });
  return printed(explanation, a.output, io);
}

function printed(explanation: Explanation, output: 'text' | 'json', io: CommandIO): number {
  io.stdout(output === 'json' ? `${JSON.stringify(explanation, null, 2)}\n` : formatText(explanation));
  if (explanation.verdicts.some((v) => v.verdict === 'refused')) return 1;
  return explanation.verdicts.some((v) => v.enforceWouldRefuse === true) ? 3 : 0;
}

/** --garden: the virtual garden's API server, whose only path is its SNI chains, from files or live. */
async function explainGardenCommand(a: z.output<typeof argsSchema>, io: CommandIO): Promise<number> {
  const conflicting = [
    a.shoot !== undefined && '--shoot (the garden is not a shoot)',
    a.header !== undefined && '--header (the virtual garden has no CONNECT path)',
    a.path !== undefined && a.path !== 'api' && `--path ${a.path} (the virtual garden has only the api path)`,
    a['always-allowed'] !== undefined && '--always-allowed (the garden’s always-admitted ranges come from the Garden and the ManagedSeeds)',
  ].filter((c): c is string => typeof c === 'string');
  if (conflicting.length > 0) return usageError(io, EXPLAIN_USAGE, `--garden does not take ${conflicting.join(', ')}`);
  const explanation = await explainGardenFrom(
    { paths: a.paths, kubeconfig: a.kubeconfig, virtualGardenKubeconfig: a['virtual-garden-kubeconfig'], config: a.config, client: a.client, peer: a.peer, readStdin: io.readStdin },
    io,
  );
  return typeof explanation === 'number' ? explanation : printed(explanation, a.output, io);
}

