// `gardener-acl explain --garden`: the virtual garden's ACL as the garden controller computes it,
// from objects in files (`kubectl get -o yaml` of the runtime cluster and of the virtual garden) or
// read live, explained for one client on every chain of its API server.
import { z } from 'zod';
import { explainGarden, type ClientAddress, type Explanation } from '../explain/explain-acl.js';
import { GARDEN_CLASS, GARDEN_EXTENSION, gardenAclFromInventory, gardenInventoryFromObjects } from '../gardener/garden-acl.js';
import { EXTENSION_TYPE } from '../gardener/extension-class.js';
import { extensionSchema, type Extension } from '../gardener/objects.js';
import { formatProblem } from '../gardener/problems.js';
import type { CommandIO } from './command-io.js';
import { describeError } from '../kube/errors.js';
import { GARDEN_WATCHED } from '../gardener/watched-resources.js';
import { loadKubeConfig } from './kubeconfig.js';
import { listedObjects } from './live-objects.js';
import { loadDocuments } from './load-documents.js';
import { loadOperatorConfigFile } from './operator-config-file.js';

export interface GardenExplainInputs {
  readonly paths: readonly string[];
  /** The runtime cluster, live: what the garden controller reads, instead of files. */
  readonly kubeconfig?: string | undefined;
  /** With `kubeconfig`: the virtual garden, for its ManagedSeeds and their Shoots. */
  readonly virtualGardenKubeconfig?: string | undefined;
  readonly config: string | undefined;
  readonly client: ClientAddress;
  readonly peer: ClientAddress | undefined;
  readonly readStdin?: (() => Promise<string>) | undefined;
}

const gardenEntriesSchema = z.looseObject({
  kind: z.literal('Garden'),
  spec: z.looseObject({ extensions: z.array(z.looseObject({ type: z.string(), providerConfig: z.unknown().optional() })).nullish() }),
});

/** The garden-class Extension among the objects, else the one gardener-operator writes from the Garden's acl entry. */
function gardenExtension(objects: readonly unknown[]): Extension | string {
  const written = objects.flatMap((o) => extensionSchema.safeParse(o).data ?? []).find((e) => e.spec.type === EXTENSION_TYPE && e.spec.class === GARDEN_CLASS);
  if (written) return written;
  const entries = objects.flatMap((o) => gardenEntriesSchema.safeParse(o).data?.spec.extensions ?? []).filter((e) => e.type === EXTENSION_TYPE);
  if (entries.length === 0) return `no acl entry in a Garden's spec.extensions and no Extension ${GARDEN_EXTENSION.namespace}/${GARDEN_EXTENSION.name} of class garden among the inputs; give the Garden (kubectl get garden -o yaml)`;
  return {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name: GARDEN_EXTENSION.name, namespace: GARDEN_EXTENSION.namespace },
    spec: { type: EXTENSION_TYPE, class: GARDEN_CLASS, ...(entries[0]?.providerConfig === undefined ? {} : { providerConfig: entries[0].providerConfig }) },
  } as Extension;
}

/** What the garden controller reads, listed now; the virtual garden's only with its kubeconfig. */
async function liveGardenObjects(runtime: string, virtualGarden: string | undefined): Promise<{ readonly objects: unknown[]; readonly virtualGardenRead: boolean }> {
  const rt = { kubeConfig: loadKubeConfig(runtime), origin: 'runtime cluster' };
  const vg = virtualGarden === undefined ? undefined : { kubeConfig: loadKubeConfig(virtualGarden), origin: 'virtual garden' };
  const listed = await listedObjects([
    { ...rt, ...GARDEN_WATCHED.gardens, apiVersion: 'operator.gardener.cloud/v1alpha1', kind: 'Garden' },
    { ...rt, ...GARDEN_WATCHED.extensions, apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension' },
    { ...rt, ...GARDEN_WATCHED.gateways, apiVersion: 'networking.istio.io/v1beta1', kind: 'Gateway' },
    { ...rt, ...GARDEN_WATCHED.gatewayDeployments, apiVersion: 'apps/v1', kind: 'Deployment' },
    ...(vg === undefined
      ? []
      : [
          { ...vg, ...GARDEN_WATCHED.managedSeeds, apiVersion: 'seedmanagement.gardener.cloud/v1alpha1', kind: 'ManagedSeed' },
          { ...vg, ...GARDEN_WATCHED.shoots, apiVersion: 'core.gardener.cloud/v1beta1', kind: 'Shoot' },
        ]),
  ]);
  return { objects: listed.map((o) => o.object), virtualGardenRead: vg !== undefined };
}

/** The garden's objects from files, or live; the exit code after saying why on stderr when they cannot be had. */
async function gardenObjects(inputs: GardenExplainInputs, io: CommandIO): Promise<{ readonly objects: unknown[]; readonly virtualGardenRead: boolean } | number> {
  if (inputs.kubeconfig !== undefined) {
    if (inputs.paths.length > 0) {
      io.stderr('gardener-acl explain --garden: with --kubeconfig the objects come from the runtime cluster (and --virtual-garden-kubeconfig); drop the PATHs\n');
      return 2;
    }
    try {
      return await liveGardenObjects(inputs.kubeconfig, inputs.virtualGardenKubeconfig);
    } catch (error) {
      io.stderr(`gardener-acl explain --garden: cannot read the garden's objects: ${describeError(error)}\n`);
      return 2;
    }
  }
  if (inputs.paths.length === 0) {
    io.stderr("gardener-acl explain --garden: give the runtime cluster's Garden, Gateway garden/virtual-garden-kube-apiserver and istio-ingressgateway Deployments, and the virtual garden's ManagedSeeds and Shoots as PATHs (kubectl get -o yaml), or --kubeconfig of the runtime cluster\n");
    return 2;
  }
  const loaded = await loadDocuments(inputs.paths, { readStdin: inputs.readStdin });
  for (const p of loaded.problems) io.stderr(`${formatProblem(p)}\n`);
  if (loaded.problems.length > 0) return 2;
  return { objects: loaded.objects.map((o) => o.object), virtualGardenRead: true };
}

/** The explanation, or the exit code after saying on stderr why there is none. */
export async function explainGardenFrom(inputs: GardenExplainInputs, io: CommandIO): Promise<Explanation | number> {
  const read = await gardenObjects(inputs, io);
  if (typeof read === 'number') return read;
  const config = await loadOperatorConfigFile(inputs.config);
  if ('error' in config) {
    io.stderr(`${config.error}\n`);
    return 2;
  }
  const { objects, virtualGardenRead } = read;
  const extension = gardenExtension(objects);
  if (typeof extension === 'string') {
    io.stderr(`gardener-acl explain --garden: ${extension}\n`);
    return 2;
  }
  let inventory;
  try {
    inventory = gardenInventoryFromObjects(objects, virtualGardenRead);
  } catch (error) {
    io.stderr(`gardener-acl explain --garden: ${(error as Error).message}\n`);
    return 2;
  }
  if (virtualGardenRead && (inventory.managedSeeds ?? []).length === 0) {
    io.stderr("note: no ManagedSeed among the inputs: no seed's gardenlet egress is admitted in this explanation (add kubectl get managedseeds,shoots -n garden -o yaml of the virtual garden)\n");
  }
  const result = gardenAclFromInventory(extension, inventory, config.config);
  if (result.kind === 'waiting') {
    io.stderr(`gardener-acl explain --garden: no verdict: ${result.reason}\n`);
    return 2;
  }
  if (result.kind === 'problem') {
    for (const p of result.problems) io.stderr(`${formatProblem(p)}\n`);
    io.stderr('gardener-acl explain --garden: the inputs have errors; no verdict. The garden controller keeps the ACL it last applied until they are fixed.\n');
    return 2;
  }
  for (const w of result.warnings) io.stderr(`${formatProblem(w)}\n`);
  if (result.kind === 'egress-unknown') {
    for (const p of result.unknown) io.stderr(`${formatProblem(p)}\n`);
    io.stderr('note: explained with the egress that is known; the garden controller keeps the rule in force with every range it admitted until every egress is known\n');
  }
  return explainGarden(result.acl, config.config.sniPort, inputs.client, inputs.peer);
}
