import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { formatProblem } from '../gardener/problems.js';
import { describeError } from '../kube/errors.js';
import { readEnvoyAdmin, readyGatewayPods } from '../served/gateway-admin.js';
import { servedGateway } from '../served/served-config.js';
import { checkServedProtection, isProtectionFault, type ServedReport } from '../served/served-protection.js';
import type { SeedAcl } from '../acl/model.js';
import { loadKubeConfig } from './kubeconfig.js';
import { argsUsageError, parseCommandArgs, usageError } from './command-args.js';
import type { CommandIO } from './command-io.js';
import { flagsSchema, parseOptions } from './flag-table.js';
import { loadSeedModel, seedInputsProblem, shootsNamed } from './seed-inputs.js';
import { VERIFY_FLAGS } from './verify-flags.js';
import { VERIFY_USAGE } from './usage-texts.js';

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { VERIFY_USAGE };

const argsSchema = flagsSchema(VERIFY_FLAGS).extend({ paths: z.array(z.string()) });

const DUMP_TIMEOUT_MS = 60_000;

async function readDump(source: { file?: string; url?: string }, io: CommandIO): Promise<unknown> {
  if (source.url !== undefined) {
    const url = `${source.url.replace(/\/+$/, '')}/config_dump`;
    const response = await fetch(url, { signal: AbortSignal.timeout(DUMP_TIMEOUT_MS) }).catch((error: unknown) => {
      // fetch says only "fetch failed"; the reason is its cause.
      const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : describeError(error);
      throw new Error(`GET ${url}: ${cause}`);
    });
    if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
    return (await response.json()) as unknown;
  }
  if (source.file === '-' && io.readStdin === undefined) throw new Error('stdin cannot be read here; give a file');
  const text = source.file === '-' && io.readStdin ? await io.readStdin() : await readFile(source.file ?? '', 'utf8');
  return JSON.parse(text) as unknown;
}

const LABEL: Readonly<Record<string, string>> = { exposed: 'EXPOSED', 'cut-off': 'CUT OFF', absent: 'absent' };

function formatText(report: ServedReport): string {
  const faults = report.findings.filter(isProtectionFault);
  const absent = report.findings.length - faults.length;
  const head =
    faults.length === 0
      ? `gateway ${report.gateway}: every path it serves into the ${report.shoots} ACL shoot(s) checked carries the shoot's filter`
      : `gateway ${report.gateway}: ${faults.length} path(s) into ${new Set(faults.map((f) => f.technicalID)).size} of ${report.shoots} ACL shoot(s) not served as stored`;
  const lines = [`${head}${absent > 0 ? `; ${absent} patch target(s) the gateway does not serve` : ''}`];
  for (const f of report.findings) lines.push(`${(LABEL[f.severity] ?? f.severity).padEnd(8)} ${(f.technicalID ?? '(every shoot)').padEnd(24)} ${f.path.padEnd(13)} ${f.where}\n         ${f.cause}`);
  return `${lines.join('\n')}\n`;
}

export async function verifyCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, VERIFY_USAGE, parseOptions(VERIFY_FLAGS), { allowPositionals: true });
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ ...parsed.values, paths: parsed.positionals });
  if (!args.success) return argsUsageError(io, VERIFY_USAGE, args.error.issues, 'message-only');
  const a = args.data;
  const conflict = seedInputsProblem(a);
  if (conflict) return usageError(io, VERIFY_USAGE, conflict);
  const sources = [a['config-dump'], a['admin-url']].filter((x) => x !== undefined).length;
  if (sources > 1 || (sources === 0 && !a.kubeconfig)) {
    return usageError(io, VERIFY_USAGE, 'give exactly one of --config-dump FILE (the gateway Envoy\'s /config_dump) and --admin-url URL (its admin address), or --kubeconfig alone to read every gateway pod of the live seed');
  }
  const loaded = await loadSeedModel({ kubeconfig: a.kubeconfig, config: a.config, paths: a.paths }, io, 'verify');
  if (typeof loaded === 'number') return loaded;
  const { model, problems } = loaded;
  const asked = new Set(a.shoot ?? []);
  // Errors about the seed, or about a shoot asked for, make the answer unreliable; other shoots' errors do not.
  const errors = problems.filter((p) => p.severity === 'error');
  const relevant = errors.filter((p) => {
    const named = shootsNamed(p.object);
    return named.length === 0 || (asked.size === 0 ? false : named.some((id) => asked.has(id)));
  });
  for (const p of relevant) io.stderr(`${formatProblem(p)}\n`);
  if (errors.length > relevant.length) io.stderr(`(${errors.length - relevant.length} error(s) about ${asked.size === 0 ? 'single shoots; those shoots are checked with the ACL the objects give' : 'other shoots'} not shown)\n`);
  if (!model.seed || relevant.length > 0) {
    io.stderr('gardener-acl verify: the objects have errors about the seed or the shoots asked for; no verdict\n');
    return 2;
  }
  const live = sources === 0;
  const namespaces = model.seed.gateways.map((g) => g.namespace);
  // Live, every gateway by default; from one dump, the one it is of.
  const gateways = a.gateway !== undefined ? [a.gateway] : live || namespaces.length === 1 ? namespaces : [];
  if (gateways.length === 0) return usageError(io, VERIFY_USAGE, `the seed has ${namespaces.length} gateways; name one with --gateway (${namespaces.join(', ')})`);
  const unknown = gateways.find((g) => !namespaces.includes(g));
  if (unknown !== undefined) {
    io.stderr(`gardener-acl verify: --gateway ${unknown} is not an ingress gateway namespace of this seed; the seed's are ${namespaces.join(', ') || '(none)'}\n`);
    return 2;
  }
  const aclShoots = new Set(model.seed.shoots.map((s) => s.technicalID));
  for (const id of asked) {
    if (!model.shoots.has(id)) {
      io.stderr(`gardener-acl verify: no Cluster or Extension of ${id} in ${a.kubeconfig ? 'the seed' : 'the objects given'}; check the technical ID (shoot--<project>--<name>, the shoot namespace on the seed)\n`);
      return 2;
    }
    if (!aclShoots.has(id)) io.stderr(`note: ${id} has no ACL on this seed: nothing of it to verify\n`);
  }
  const only = asked.size === 0 ? undefined : asked;
  if (live) return verifyLive(model.seed, gateways, only, a.kubeconfig ?? '', a.output, io);
  let dump: unknown;
  try {
    dump = await readDump({ ...(a['config-dump'] === undefined ? {} : { file: a['config-dump'] }), ...(a['admin-url'] === undefined ? {} : { url: a['admin-url'] }) }, io);
  } catch (error) {
    io.stderr(`gardener-acl verify: cannot read the gateway's config dump: ${describeError(error)}\n`);
    return 2;
  }
  const served = servedGateway(dump);
  if (served.listeners.length === 0) {
    io.stderr('gardener-acl verify: the config dump holds no listeners; give the gateway Envoy\'s whole admin /config_dump (not a single section, not a sidecar\'s)\n');
    return 2;
  }
  const report = checkServedProtection(model.seed, gateways[0] ?? '', served, only);
  io.stdout(a.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : formatText(report));
  return report.findings.some(isProtectionFault) ? 1 : 0;
}

/**
 * Every ready pod of each gateway, read as the controller reads them (the API server's
 * port-forward to Envoy's admin port) but whole, ECDS contents included: one report per pod.
 */
async function verifyLive(seed: SeedAcl, gateways: readonly string[], only: ReadonlySet<string> | undefined, kubeconfig: string, output: 'text' | 'json', io: CommandIO): Promise<number> {
  const kc = loadKubeConfig(kubeconfig);
  const reports: (ServedReport & { readonly pod: string })[] = [];
  let unread = 0;
  for (const workload of seed.gateways.filter((g) => gateways.includes(g.namespace))) {
    let pods: string[];
    try {
      pods = await readyGatewayPods(kc, workload, AbortSignal.timeout(DUMP_TIMEOUT_MS));
    } catch (error) {
      io.stderr(`gardener-acl verify: cannot list the pods of ${workload.namespace}: ${describeError(error)}\n`);
      unread++;
      continue;
    }
    if (pods.length === 0) io.stderr(`gardener-acl verify: ${workload.namespace} has no running and ready gateway pod; not checked\n`);
    for (const pod of pods) {
      try {
        const dump = JSON.parse(await readEnvoyAdmin(kc, { namespace: workload.namespace, name: pod }, '/config_dump', AbortSignal.timeout(DUMP_TIMEOUT_MS))) as unknown;
        reports.push({ ...checkServedProtection(seed, workload.namespace, servedGateway(dump), only), pod });
      } catch (error) {
        io.stderr(`gardener-acl verify: cannot read ${workload.namespace}/${pod}: ${describeError(error)}\n`);
        unread++;
      }
    }
  }
  if (reports.length === 0) {
    io.stderr('gardener-acl verify: no gateway pod could be read; no verdict\n');
    return 2;
  }
  io.stdout(output === 'json' ? `${JSON.stringify(reports, null, 2)}\n` : reports.map((r) => formatText({ ...r, gateway: `${r.gateway} (pod ${r.pod})` })).join(''));
  if (reports.some((r) => r.findings.some(isProtectionFault))) return 1;
  return unread > 0 ? 2 : 0;
}
