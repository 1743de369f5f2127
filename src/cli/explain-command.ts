import { z } from 'zod';
import { parseCidr } from '../acl/cidr.js';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import { EXPLAIN_PATHS, explainShoot, parseClientAddress, type Explanation, type LegacyChain } from '../explain/explain-acl.js';
import { formatProblem } from '../gardener/problems.js';
import { findLegacyChains } from '../rbac/legacy-proxy-patch.js';
import { argsUsageError, parseCommandArgs, usageError } from './command-args.js';
import type { CommandIO } from './command-io.js';
import { SEED_INPUT_FLAGS, loadSeedModel, shootsNamed } from './seed-inputs.js';
import { EXPLAIN_USAGE } from './usage-texts.js';

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { EXPLAIN_USAGE };

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

const argsSchema = z.object({
  shoot: z
    .string()
    .refine((id) => parseTechnicalID(id) !== undefined, {
      error: (issue) => `--shoot ${JSON.stringify(issue.input)} is not a technical ID; write shoot--<project>--<name> (or the legacy shoot-<project>--<name>)`,
    })
    .optional(),
  'always-allowed': z
    .array(
      z.string().transform((text, ctx) => {
        const parsed = parseCidr(text);
        if (parsed.ok) return parsed.cidr;
        ctx.addIssue({ code: 'custom', message: `--always-allowed ${JSON.stringify(text)} is not a CIDR (${parsed.reason}); write e.g. --always-allowed 10.250.0.0/16` });
        return z.NEVER;
      }),
    )
    .optional(),
  client: addressSchema('--client'),
  peer: addressSchema('--peer').optional(),
  path: z.enum(EXPLAIN_PATHS, { error: (i) => `--path must be one of ${EXPLAIN_PATHS.join(', ')}, not ${JSON.stringify(i.input)}` }).optional(),
  header: z.array(headerSchema).optional(),
  output: z.enum(['text', 'json'], { error: (i) => `--output must be text or json, not ${JSON.stringify(i.input)}` }),
  kubeconfig: z.string().optional(),
  config: z.string().optional(),
  paths: z.array(z.string()),
});

function formatText(explanation: Explanation): string {
  const lines = [explanation.summary];
  for (const v of explanation.verdicts) lines.push(`${v.verdict.padEnd(8)} ${v.path.padEnd(13)} ${v.gateway}  ${v.at}\n         ${v.reason}`);
  if (explanation.verdicts.length === 0) lines.push('(no path of this kind leads to the shoot on this seed)');
  return `${lines.join('\n')}\n`;
}

export async function explainCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(
    argv,
    io,
    EXPLAIN_USAGE,
    {
      shoot: { type: 'string' },
      client: { type: 'string' },
      peer: { type: 'string' },
      path: { type: 'string' },
      header: { type: 'string', multiple: true },
      'always-allowed': { type: 'string', multiple: true },
      ...SEED_INPUT_FLAGS,
    },
    { allowPositionals: true },
  );
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ ...parsed.values, paths: parsed.positionals });
  if (!args.success) return argsUsageError(io, EXPLAIN_USAGE, args.error.issues, 'message-only');
  const a = args.data;
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
  io.stdout(a.output === 'json' ? `${JSON.stringify(explanation, null, 2)}\n` : formatText(explanation));
  if (explanation.verdicts.some((v) => v.verdict === 'refused')) return 1;
  return explanation.verdicts.some((v) => v.enforceWouldRefuse === true) ? 3 : 0;
}

