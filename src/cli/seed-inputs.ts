// The seed a command reasons about: objects from files (like render; without PATH the embedded
// example seed) or from the live seed (what the controller reads, with each Extension's applied
// ACL instead of its written one), and the operator configuration (--config, else the objects'
// OperatorConfiguration, else the defaults). Shared by explain and verify.
import { formatCidr } from '../acl/cidr.js';
import { parseOperatorConfig, type OperatorConfig } from '../acl/operator-config.js';
import { parseProviderConfig } from '../acl/provider-config.js';
import { appliedFromState } from '../actuator/applied-state.js';
import type { SourcedObject } from '../gardener/inventory.js';
import { formatProblem, type Problem } from '../gardener/problems.js';
import { WATCHED } from '../gardener/watched-resources.js';
import { describeError } from '../kube/errors.js';
import { listAll } from '../kube/list-watch.js';
import { seedModelFromObjects, type SeedModel } from '../render/seed-render.js';
import { loadKubeConfig } from './kubeconfig.js';
import { loadDocuments } from './load-documents.js';
import { EMBEDDED_EXAMPLE, type CommandIO } from './render-command.js';

/** The flags of a command that reads a seed (with its positional PATHs) and prints a report. */
export const SEED_INPUT_FLAGS = {
  output: { type: 'string', short: 'o', default: 'text' },
  kubeconfig: { type: 'string' },
  config: { type: 'string' },
} as const;

/** A contradiction among the seed inputs, as the usage error to print; undefined when there is none. */
export function seedInputsProblem(inputs: { readonly kubeconfig?: string | undefined; readonly paths: readonly string[] }): string | undefined {
  return inputs.kubeconfig && inputs.paths.length > 0 ? 'give either --kubeconfig or PATHs, not both' : undefined;
}

export interface SeedInputs {
  readonly kubeconfig: string | undefined;
  readonly config: string | undefined;
  readonly paths: readonly string[];
  /** The shoot the command is about: told when its applied ACL differs from the written one. */
  readonly shoot?: string;
}

/** The objects the controller reads, from the live seed, as documents for the same pipeline as `render`. */
export async function liveObjects(kubeconfig: string): Promise<SourcedObject[]> {
  const kc = loadKubeConfig(kubeconfig);
  const sources: readonly { readonly path: string; readonly labelSelector?: string; readonly apiVersion: string; readonly kind: string }[] = [
    { ...WATCHED.clusters, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster' },
    { ...WATCHED.extensions, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension' },
    { ...WATCHED.infrastructures, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure' },
    { ...WATCHED.dnsRecords, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'DNSRecord' },
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

/** The seed model and every problem found loading it; a number is the exit code after a message on stderr. */
export async function loadSeedModel(inputs: SeedInputs, io: CommandIO, command: string): Promise<{ readonly model: SeedModel; readonly problems: Problem[] } | number> {
  let objects: SourcedObject[];
  const problems: Problem[] = [];
  if (inputs.kubeconfig) {
    try {
      objects = appliedInsteadOfWritten(await liveObjects(inputs.kubeconfig), inputs.shoot, io);
    } catch (error) {
      io.stderr(`gardener-acl ${command}: cannot read the seed: ${describeError(error)}\n`);
      return 2;
    }
  } else {
    const loaded = await loadDocuments(inputs.paths.length > 0 ? [...inputs.paths] : [EMBEDDED_EXAMPLE]);
    objects = loaded.objects;
    problems.push(...loaded.problems);
  }
  let operator: OperatorConfig | undefined;
  if (inputs.config) {
    const loaded = await loadDocuments([inputs.config]);
    const config = loaded.objects.find((o) => (o.object as { kind?: unknown } | null)?.kind === 'OperatorConfiguration');
    const parsed = config ? parseOperatorConfig(config.object) : undefined;
    if (loaded.problems.length > 0 || !parsed?.ok) {
      const why = [...loaded.problems.map(formatProblem), ...(parsed && !parsed.ok ? parsed.errors.map((e) => `${e.path}: ${e.message}`) : []), ...(config ? [] : ['no OperatorConfiguration in it'])];
      io.stderr(`--config ${inputs.config}: ${why.join('; ')}\n`);
      return 2;
    }
    operator = parsed.config;
  }
  const model = seedModelFromObjects(objects, operator);
  problems.push(...model.problems);
  return { model, problems };
}

/**
 * On a live seed Envoy enforces the ACL the controller applied (Extension status.state), which
 * differs from the written providerConfig while a change is pending, refused or unplaced: each
 * Extension with a recorded ACL is explained with it, and the asked shoot's difference is said.
 */
function appliedInsteadOfWritten(objects: readonly SourcedObject[], shoot: string | undefined, io: CommandIO): SourcedObject[] {
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
export function shootsNamed(object: string): string[] {
  return object.split(/[\s/]+/).filter((token) => /^shoot--?[a-z0-9][a-z0-9-]*$/.test(token));
}
