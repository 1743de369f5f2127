import { z } from 'zod';
import { formatCidr } from '../acl/cidr.js';
import { parseOperatorConfig } from '../acl/operator-config.js';
import { parseProviderConfig } from '../acl/provider-config.js';
import { appliedFromState } from '../actuator/applied-state.js';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import { EXPLAIN_PATHS, explainShoot, parseClientAddress, type Explanation, type LegacyChain } from '../explain/explain-acl.js';
import type { SourcedObject } from '../gardener/inventory.js';
import { formatProblem, type Problem } from '../gardener/problems.js';
import { WATCHED } from '../gardener/watched-resources.js';
import { describeError } from '../kube/errors.js';
import { listAll } from '../kube/list-watch.js';
import { findLegacyChains } from '../rbac/legacy-proxy-patch.js';
import { seedModelFromObjects } from '../render/seed-render.js';
import { argsUsageError, parseCommandArgs, usageError } from './command-args.js';
import { loadKubeConfig } from './kubeconfig.js';
import { loadDocuments } from './load-documents.js';
import { EMBEDDED_EXAMPLE, type CommandIO } from './render-command.js';

export const EXPLAIN_USAGE = `usage: gardener-acl explain --shoot ID --client IP [--peer IP] [--path api|connect|observability|legacy]
                           [--header 'Name: value']... [--output text|json]
                           [--kubeconfig PATH | [--config operator.yaml] [PATH...]]

Prints, for every path into the shoot's control plane and every gateway, whether the client is
admitted and why: the ALLOW/DENY or always-allowed range that decided, or that none matched.
--client is the address Envoy sees as remote (the PROXY-protocol source when the seed's load
balancer sends one); --peer the physical peer, for direct_remote_ip rules (default: --client).
--header gives a concrete CONNECT request (repeat it for several headers): the verdict then
names every shoot the request targets and the header form that targets it.
The seed is read from files (like render; without PATH the embedded example seed) or, with
--kubeconfig, from the live seed (the objects the controller reads; --config names the
operator configuration file the controller runs with, default values otherwise).
--client and --peer may carry a port, as copied from an access log (203.0.113.9:443,
[2001:db8::1]:443); it does not change the verdict.
Exit codes: 0 every listed path admits, 1 some path refuses, 2 invalid input, 3 every path
admits but some only because the rule is in audit mode (enforce would refuse there).`;

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
  shoot: z.string({ error: '--shoot is required: the technical ID, e.g. --shoot shoot--project--name' }).refine((id) => parseTechnicalID(id) !== undefined, {
    error: (issue) => `--shoot ${JSON.stringify(issue.input)} is not a technical ID; write shoot--<project>--<name> (or the legacy shoot-<project>--<name>)`,
  }),
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

/** The objects the controller reads, from the live seed, as documents for the same pipeline as `render`. */
async function liveObjects(kubeconfig: string): Promise<SourcedObject[]> {
  const kc = loadKubeConfig(kubeconfig);
  const sources: readonly { readonly path: string; readonly labelSelector?: string; readonly apiVersion: string; readonly kind: string }[] = [
    { ...WATCHED.clusters, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster' },
    { ...WATCHED.extensions, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension' },
    { ...WATCHED.infrastructures, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure' },
    { ...WATCHED.gateways, apiVersion: 'networking.istio.io/v1beta1', kind: 'Gateway' },
    { ...WATCHED.gatewayDeployments, apiVersion: 'apps/v1', kind: 'Deployment' },
    { ...WATCHED.gatewayServices, apiVersion: 'v1', kind: 'Service' },
    { ...WATCHED.kubeSystemConfigMaps, apiVersion: 'v1', kind: 'ConfigMap' },
    { ...WATCHED.envoyFilters, apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter' },
  ];
  const objects: SourcedObject[] = [];
  for (const source of sources) {
    const list = await listAll(kc, source.path, source.labelSelector ? { labelSelector: source.labelSelector } : {});
    // List items carry no apiVersion and kind of their own.
    for (const item of list.items) objects.push({ object: { ...item, apiVersion: source.apiVersion, kind: source.kind }, source: `seed ${source.path}` });
  }
  return objects;
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
      output: { type: 'string', short: 'o', default: 'text' },
      kubeconfig: { type: 'string' },
      config: { type: 'string' },
    },
    { allowPositionals: true },
  );
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ ...parsed.values, paths: parsed.positionals });
  if (!args.success) return argsUsageError(io, EXPLAIN_USAGE, args.error.issues, 'message-only');
  const a = args.data;
  if (a.kubeconfig && a.paths.length > 0) return usageError(io, EXPLAIN_USAGE, 'give either --kubeconfig or PATHs, not both');
  if (a.header && a.path !== undefined && a.path !== 'connect') {
    return usageError(io, EXPLAIN_USAGE, `--header describes a CONNECT request; it has no effect on --path ${a.path}: drop --path (every path) or use --path connect`);
  }
  let objects: SourcedObject[];
  const problems: Problem[] = [];
  if (a.kubeconfig) {
    try {
      objects = appliedInsteadOfWritten(await liveObjects(a.kubeconfig), a.shoot, io);
    } catch (error) {
      io.stderr(`gardener-acl explain: cannot read the seed: ${describeError(error)}\n`);
      return 2;
    }
  } else {
    const loaded = await loadDocuments(a.paths.length > 0 ? a.paths : [EMBEDDED_EXAMPLE]);
    objects = loaded.objects;
    problems.push(...loaded.problems);
  }
  let operator;
  if (a.config) {
    const loaded = await loadDocuments([a.config]);
    const config = loaded.objects.find((o) => (o.object as { kind?: unknown } | null)?.kind === 'OperatorConfiguration');
    const parsed = config ? parseOperatorConfig(config.object) : undefined;
    if (loaded.problems.length > 0 || !parsed?.ok) {
      const why = [...loaded.problems.map(formatProblem), ...(parsed && !parsed.ok ? parsed.errors.map((e) => `${e.path}: ${e.message}`) : []), ...(config ? [] : ['no OperatorConfiguration in it'])];
      io.stderr(`--config ${a.config}: ${why.join('; ')}\n`);
      return 2;
    }
    operator = parsed.config;
  }
  const model = seedModelFromObjects(objects, operator);
  problems.push(...model.problems);
  // Errors about this shoot or the whole seed make the answer unreliable; other shoots' errors do not.
  const errors = problems.filter((p) => p.severity === 'error');
  const otherShoots = errors.filter((p) => {
    const named = shootsNamed(p.object);
    return named.length > 0 && !named.includes(a.shoot);
  });
  const relevant = errors.filter((p) => !otherShoots.includes(p));
  for (const p of relevant) io.stderr(`${formatProblem(p)}\n`);
  if (otherShoots.length > 0) io.stderr(`(${otherShoots.length} error(s) about other shoots not shown)\n`);
  if (!model.seed || relevant.length > 0) {
    io.stderr(
      `gardener-acl explain: the objects have errors about ${a.shoot} or the seed; no verdict. ` +
        `The controller keeps the ACL it last applied (the Extension's status.state) until they are fixed.\n`,
    );
    return 2;
  }
  if (!model.shoots.has(a.shoot)) {
    io.stderr(`gardener-acl explain: no Cluster or Extension of ${a.shoot} in ${a.kubeconfig ? 'the seed' : 'the objects given'}; check the technical ID (shoot--<project>--<name>, the shoot namespace on the seed)\n`);
    return 2;
  }
  const legacyChains: LegacyChain[] = model.legacyFilters.flatMap((f) =>
    findLegacyChains(f, model.seed?.operator.legacyProxyPort ?? 0).map((c) => ({ namespace: f.metadata.namespace, envoyFilter: `${f.metadata.namespace}/${f.metadata.name}`, technicalID: c.technicalID })),
  );
  const explanation = explainShoot({
    seed: model.seed,
    legacyChains,
    technicalID: a.shoot,
    client: a.client,
    peer: a.peer,
    paths: a.path ? [a.path] : undefined,
    headers: a.header,
  });
  io.stdout(a.output === 'json' ? `${JSON.stringify(explanation, null, 2)}\n` : formatText(explanation));
  if (explanation.verdicts.some((v) => v.verdict === 'refused')) return 1;
  return explanation.verdicts.some((v) => v.enforceWouldRefuse === true) ? 3 : 0;
}

/**
 * On a live seed Envoy enforces the ACL the controller applied (Extension status.state), which
 * differs from the written providerConfig while a change is pending, refused or unplaced: each
 * Extension with a recorded ACL is explained with it, and the asked shoot's difference is said.
 */
function appliedInsteadOfWritten(objects: readonly SourcedObject[], shoot: string, io: CommandIO): SourcedObject[] {
  return objects.map((sourced) => {
    const object = sourced.object as { kind?: unknown; metadata?: { namespace?: string }; spec?: { providerConfig?: unknown }; status?: { state?: unknown } } | null;
    if (object?.kind !== 'Extension') return sourced;
    const namespace = object.metadata?.namespace ?? '';
    const applied = appliedFromState(namespace, object.status?.state);
    if (!applied) return sourced;
    const rule = { action: applied.rule.action, type: applied.rule.type, cidrs: applied.rule.cidrs.map(formatCidr), mode: applied.rule.mode };
    const written = parseProviderConfig(object.spec?.providerConfig, Number.MAX_SAFE_INTEGER, 'spec.providerConfig');
    const same = written.ok && JSON.stringify({ ...written.rule, cidrs: written.rule.cidrs.map(formatCidr) }) === JSON.stringify(rule);
    if (!same && namespace === shoot) {
      io.stderr(`note: ${shoot}: the Extension's providerConfig is not what the controller applied (a change pending or refused); explaining the applied ACL, ${rule.action} ${rule.type} [${rule.cidrs.join(', ')}]${rule.mode === 'audit' ? ' (audit)' : ''}, which is what the gateways enforce\n`);
    }
    return { ...sourced, object: { ...object, spec: { ...object.spec, providerConfig: { rule } } } };
  });
}

/**
 * The technical IDs an object reference names as a whole (`Extension shoot--p--a/acl`,
 * `Cluster shoot--p--a`): shoot--team--prod is not named by shoot--team--prod-eu's objects.
 */
function shootsNamed(object: string): string[] {
  return object.split(/[\s/]+/).filter((token) => /^shoot--?[a-z0-9][a-z0-9-]*$/.test(token));
}
