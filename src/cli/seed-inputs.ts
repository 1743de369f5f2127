// The seed a command reasons about: objects from files (like render; without PATH the embedded
// example seed) or from the live seed (what the controller reads, with each Extension's applied
// ACL instead of its written one), and the operator configuration (--config, else the objects'
// OperatorConfiguration, else the defaults). Shared by explain and verify.
import { parse as parseYaml } from 'yaml';
import { formatCidr, type Cidr } from '../acl/cidr.js';
import { defaultOperatorConfig, parseOperatorConfig, type OperatorConfig } from '../config/operator-config.js';
import { parseProviderConfig } from '../acl/provider-config.js';
import { appliedFromState } from '../gardener/applied-state.js';
import type { SourcedObject } from '../gardener/inventory.js';
import { formatProblem, type Problem } from '../gardener/problems.js';
import { WATCHED } from '../gardener/watched-resources.js';
import { describeError } from '../kube/errors.js';
import { listAll } from '../kube/list-watch.js';
import { seedModelFromObjects, type SeedModel } from '../render/seed-render.js';
import { loadKubeConfig } from './kubeconfig.js';
import { listedObjects } from './live-objects.js';
import { isShootManifest } from '../gardener/shoot-manifest.js';
import { loadDocuments } from './load-documents.js';
import { operatorConfigAmong } from './operator-config-file.js';
import { withShootManifests, type ManifestInputs } from './shoot-manifest-inputs.js';
import type { CommandIO } from './command-io.js';
import { EMBEDDED_EXAMPLE } from './render-command.js';


/** A contradiction among the seed inputs, as the usage error to print; undefined when there is none. */
export function seedInputsProblem(inputs: { readonly kubeconfig?: string | undefined; readonly paths: readonly string[] }): string | undefined {
  return inputs.kubeconfig && inputs.paths.length > 0 ? 'give either --kubeconfig or PATHs, not both' : undefined;
}

export interface SeedInputs {
  readonly kubeconfig: string | undefined;
  readonly config: string | undefined;
  readonly paths: readonly string[];
  /** The shoot the command is about: told when its applied ACL differs from the written one. */
  readonly shoot?: string | undefined;
  /** Shoot manifests among the inputs stand for their shoots' ACLs (explain; see shoot-manifest-inputs.ts). */
  readonly shootManifests?: boolean;
  /** The seed's always-allowed ranges, for a Shoot manifest explained without the seed's objects. */
  readonly alwaysAllowed?: readonly Cidr[] | undefined;
  readonly readStdin?: (() => Promise<string>) | undefined;
}

/** The name of the controller's OperatorConfiguration ConfigMap (charts/gardener-acl/templates/configmap.yaml). */
export const CONTROLLER_CONFIG_MAP = 'gardener-acl-config';
const CONFIG_MAP_KEY = 'config.yaml';

/** The objects the controller reads, from the live seed, as documents for the same pipeline as `render`. */
export async function liveObjects(kubeconfig: string): Promise<SourcedObject[]> {
  const kubeConfig = loadKubeConfig(kubeconfig);
  const seed = { kubeConfig, origin: 'seed' };
  return listedObjects([
    { ...seed, ...WATCHED.clusters, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster' },
    { ...seed, ...WATCHED.extensions, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension' },
    { ...seed, ...WATCHED.infrastructures, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure' },
    { ...seed, ...WATCHED.dnsRecords, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'DNSRecord' },
    { ...seed, ...WATCHED.gateways, apiVersion: 'networking.istio.io/v1beta1', kind: 'Gateway' },
    { ...seed, ...WATCHED.gatewayDeployments, apiVersion: 'apps/v1', kind: 'Deployment' },
    { ...seed, ...WATCHED.gatewayServices, apiVersion: 'v1', kind: 'Service' },
    { ...seed, ...WATCHED.kubeSystemConfigMaps, apiVersion: 'v1', kind: 'ConfigMap' },
    { ...seed, ...WATCHED.envoyFilters, apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter' },
  ]);
}

/**
 * The OperatorConfiguration the controller on a live seed runs with: the chart's ConfigMap, found
 * by name in any namespace (Gardener installs the chart into a namespace of its choosing).
 * undefined (after a note) when there is none or it cannot be read; a string is the error.
 */
async function liveOperatorConfig(kubeconfig: string, io: CommandIO): Promise<OperatorConfig | undefined | { readonly error: string }> {
  let items: Record<string, unknown>[];
  try {
    items = (await listAll(loadKubeConfig(kubeconfig), '/api/v1/configmaps', { fieldSelector: `metadata.name=${CONTROLLER_CONFIG_MAP}` })).items;
  } catch (error) {
    io.stderr(`note: cannot read the controller's ConfigMap ${CONTROLLER_CONFIG_MAP} (${describeError(error)}); using the default operator settings: give the controller's configuration with --config if they differ\n`);
    return undefined;
  }
  const where = (item: Record<string, unknown>) => `ConfigMap ${String((item['metadata'] as { namespace?: unknown } | undefined)?.namespace)}/${CONTROLLER_CONFIG_MAP}`;
  if (items.length === 0) {
    io.stderr(`note: no ConfigMap ${CONTROLLER_CONFIG_MAP} on the seed (is the extension installed?); using the default operator settings; give the controller's configuration with --config\n`);
    return undefined;
  }
  if (items.length > 1) return { error: `${items.map(where).join(' and ')}: more than one installation's configuration; give the one to use with --config` };
  const item = items[0] as Record<string, unknown>;
  const text = (item['data'] as Record<string, unknown> | undefined)?.[CONFIG_MAP_KEY];
  if (typeof text !== 'string') return { error: `${where(item)} has no data.${CONFIG_MAP_KEY}; give the controller's configuration with --config` };
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (error) {
    return { error: `${where(item)} data.${CONFIG_MAP_KEY} is not YAML: ${(error as Error).message.split('\n')[0] ?? ''}` };
  }
  const parsed = parseOperatorConfig(document);
  return parsed.ok ? parsed.config : { error: `${where(item)} data.${CONFIG_MAP_KEY}: ${parsed.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}` };
}

/** What loadSeedModel found: the model, its problems, and the Shoot manifests that stand in it. */
export interface LoadedSeed {
  readonly model: SeedModel;
  readonly problems: Problem[];
  readonly manifests: ManifestInputs['manifests'];
  readonly madeUpSeed: boolean;
}

/** The seed model and every problem found loading it; a number is the exit code after a message on stderr. */
export async function loadSeedModel(inputs: SeedInputs, io: CommandIO, command: string): Promise<LoadedSeed | number> {
  let objects: SourcedObject[];
  const problems: Problem[] = [];
  if (inputs.kubeconfig) {
    try {
      objects = appliedInsteadOfWritten(await liveObjects(inputs.kubeconfig), inputs.shoot, io);
    } catch (error) {
      io.stderr(`gardener-acl ${command}: cannot read the seed: ${describeError(error)}\n`);
      return 2;
    }
    // With a live seed, PATHs may only be Shoot manifests (the seed's objects come from the seed).
    if (inputs.paths.length > 0) {
      const loaded = await loadDocuments(inputs.paths, { readStdin: inputs.readStdin });
      problems.push(...loaded.problems);
      const others = loaded.objects.filter((o) => !isShootManifest(o.object));
      if (others.length > 0) {
        io.stderr(`gardener-acl ${command}: with --kubeconfig the seed's objects come from the seed; PATH may only hold Shoot manifests, not ${others.map((o) => `${o.source} (${String((o.object as { kind?: unknown } | null)?.kind)})`).join(', ')}\n`);
        return 2;
      }
      objects.push(...loaded.objects);
    }
  } else {
    const loaded = await loadDocuments(inputs.paths.length > 0 ? [...inputs.paths] : [EMBEDDED_EXAMPLE], { readStdin: inputs.readStdin });
    objects = loaded.objects;
    problems.push(...loaded.problems);
  }
  let manifests: ManifestInputs['manifests'] = new Map();
  let madeUpSeed = false;
  if (inputs.shootManifests) {
    const found = withShootManifests(objects);
    if (found.errors.length > 0) {
      io.stderr(`${found.errors.map((e) => `error: ${e}`).join('\n')}\n`);
      return 2;
    }
    ({ objects, manifests, madeUpSeed } = found);
    for (const m of manifests.values()) {
      io.stderr(`note: ${m.technicalID}: explaining the ACL in ${m.source} (${m.ref})${madeUpSeed ? '' : ", not the one the seed holds"}\n`);
    }
  }
  if (inputs.alwaysAllowed && !madeUpSeed) {
    io.stderr(`gardener-acl ${command}: --always-allowed is for a Shoot manifest explained without the seed's objects; with the seed's objects its own always-allowed ranges apply: drop --always-allowed\n`);
    return 2;
  }
  if (madeUpSeed && !inputs.alwaysAllowed) {
    io.stderr(`note: without the seed's objects its always-allowed ranges (seed nodes and pods, shoot egress, the operator's additionalAllowedCIDRs) are unknown: only the rule and the shoot's own node range are explained; give them with --always-allowed CIDR\n`);
  }
  let operator: OperatorConfig | undefined;
  if (!inputs.config && inputs.kubeconfig) {
    const live = await liveOperatorConfig(inputs.kubeconfig, io);
    if (live && 'error' in live) {
      io.stderr(`gardener-acl ${command}: ${live.error}\n`);
      return 2;
    }
    operator = live;
  }
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
  if (madeUpSeed && inputs.alwaysAllowed) {
    const own = operator ? { config: operator } : operatorConfigAmong(objects);
    if ('problem' in own) {
      io.stderr(`gardener-acl ${command}: ${own.problem.object}: ${own.problem.message}\n`);
      return 2;
    }
    const base = own.config ?? defaultOperatorConfig();
    operator = { ...base, additionalAllowedCIDRs: [...base.additionalAllowedCIDRs, ...inputs.alwaysAllowed] };
  }
  const model = seedModelFromObjects(objects, operator);
  problems.push(...model.problems);
  return { model, problems, manifests, madeUpSeed };
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
