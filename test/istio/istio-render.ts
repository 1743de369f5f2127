// Runs tools/istio-render: Istio's own config generation (pilot ConfigGenTest) turning Services,
// Gateways, VirtualServices, DestinationRules and EnvoyFilters into what one ingress gateway proxy
// (given labels and namespace) receives: listeners, routes (RDS) and clusters, as Envoy JSON.
//
// A missing or stale binary is an error, never a skip: these suites are the evidence that Istio,
// not our approximation of it, places the filters. Build it with scripts/setup-istio-render.sh.

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { JsonObject } from '../envoy/json.js';

const TOOL_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'tools', 'istio-render');
const RENDER_TIMEOUT_MS = 120_000;

const isExecutable = (path: string): boolean => existsSync(path) && (statSync(path).mode & 0o111) !== 0;

/** The istio.io/istio pseudo-version pinned in tools/istio-render/go.mod (names the cache directory). */
function pinnedIstioVersion(): string {
  const goMod = readFileSync(join(TOOL_DIR, 'go.mod'), 'utf8');
  const version = /^\s*istio\.io\/istio\s+(v0\.0\.0-\d{14}-[0-9a-f]{12})\s*$/m.exec(goMod)?.[1];
  if (version === undefined) throw new Error(`cannot read the istio.io/istio version from ${join(TOOL_DIR, 'go.mod')}`);
  return version;
}

/** The same source hash scripts/setup-istio-render.sh records next to the binary it built (go.mod, go.sum, every *.go by name). */
function sourceHash(): string {
  const hash = createHash('sha256');
  const goFiles = readdirSync(TOOL_DIR).filter((file) => file.endsWith('.go')).sort();
  for (const file of ['go.mod', 'go.sum', ...goFiles]) hash.update(readFileSync(join(TOOL_DIR, file)));
  return hash.digest('hex').slice(0, 16);
}

const SETUP_HINT = 'Run `bash scripts/setup-istio-render.sh` (builds tools/istio-render with Go; minutes on a cold machine) or set ISTIO_RENDER_BIN.';

/** `ISTIO_RENDER_BIN` if set, else the setup script's cached binary for the pinned Istio. Throws if absent or stale. */
export function findIstioRenderBinary(): string {
  const explicit = process.env['ISTIO_RENDER_BIN'];
  if (explicit !== undefined && explicit !== '') {
    if (!isExecutable(explicit)) throw new Error(`ISTIO_RENDER_BIN=${explicit} is not an executable file. ${SETUP_HINT}`);
    return explicit;
  }
  const cacheRoot = process.env['GARDENER_ACL_CACHE'] ?? join(homedir(), '.cache', 'gardener-acl');
  const binary = join(cacheRoot, `istio-render-${pinnedIstioVersion()}`, 'istio-render');
  if (!isExecutable(binary)) throw new Error(`istio-render is not built (looked for ${binary}). ${SETUP_HINT}`);
  let recorded = '';
  try {
    recorded = readFileSync(`${binary}.src-hash`, 'utf8').trim();
  } catch {
    // A binary without a recorded hash counts as stale.
  }
  if (recorded !== sourceHash()) throw new Error(`${binary} was built from other sources than tools/istio-render. ${SETUP_HINT}`);
  return binary;
}

export interface GatewayProxy {
  /** The gateway's namespace (the proxy's config namespace: which EnvoyFilters and Gateways apply). */
  readonly namespace: string;
  /** The gateway pods' labels (what Gateway selectors and workloadSelectors are matched against). */
  readonly labels: Readonly<Record<string, string>>;
}

const jsonObject = z.record(z.string(), z.json());
const renderOutputSchema = z.object({
  istio: z.string(),
  proxy: z.object({ serviceTargets: z.array(z.string()).default([]) }).loose(),
  listeners: z.array(jsonObject).default([]),
  routes: z.array(jsonObject).default([]),
  clusters: z.array(jsonObject).default([]),
  extension_configs: z.array(jsonObject).default([]),
  discovered_filters: z.array(z.string()).default([]),
});

export interface IstioRenderOutput {
  /** The istio.io/istio module version that rendered it. */
  readonly istio: string;
  /** `<service host>:<port>-><targetPort>` of the gateway Services selecting the proxy. */
  readonly serviceTargets: readonly string[];
  readonly listeners: readonly JsonObject[];
  readonly routes: readonly JsonObject[];
  readonly clusters: readonly JsonObject[];
  /** What istiod's ECDS answers for the HTTP filters the listeners discover (EnvoyFilter EXTENSION_CONFIG patches). */
  readonly extensionConfigs: readonly JsonObject[];
  /** The names of the HTTP filters the listeners configure through ECDS. */
  readonly discoveredFilters: readonly string[];
}

/** Kinds Istio reads; others (Cluster, Extension, ...) are not fed to it. */
const ISTIO_INPUT_KINDS = new Set(['Service', 'Deployment', 'Gateway', 'VirtualService', 'DestinationRule', 'EnvoyFilter', 'ServiceEntry']);

/** The objects of kinds Istio reads, as the multi-document YAML (JSON documents) istio-render takes. */
export function istioInputDocuments(objects: readonly JsonObject[]): string {
  return objects
    .filter((object) => typeof object['kind'] === 'string' && ISTIO_INPUT_KINDS.has(object['kind']))
    .map((object) => JSON.stringify(object))
    .join('\n---\n');
}

/** istio-render's proxy flags for `proxy` (both modes take them). */
export function proxyArguments(proxy: GatewayProxy): string[] {
  const labels = Object.entries(proxy.labels)
    .map(([key, value]) => `${key}=${value}`)
    .join(',');
  return ['--labels', labels, '--namespace', proxy.namespace];
}

/** Renders what the gateway proxy `proxy` receives from `objects` (Kubernetes and Istio objects). */
export async function renderGatewayWithIstio(objects: readonly JsonObject[], proxy: GatewayProxy, meshConfigYaml?: string): Promise<IstioRenderOutput> {
  const binary = findIstioRenderBinary();
  const meshArgs: string[] = [];
  if (meshConfigYaml !== undefined) {
    const dir = await mkdtemp(join(tmpdir(), 'istio-mesh-'));
    await writeFile(join(dir, 'mesh.yaml'), meshConfigYaml);
    meshArgs.push('--mesh-config', join(dir, 'mesh.yaml'));
  }
  const input = istioInputDocuments(objects);
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      binary,
      [...proxyArguments(proxy), '--resources', 'listeners,routes,clusters,extension_configs', ...meshArgs, '-'],
      { maxBuffer: 256 * 1024 * 1024, timeout: RENDER_TIMEOUT_MS },
      (error, out, err) => (error ? reject(new Error(`istio-render failed for ${proxy.namespace}: ${error.message}\n${err}`)) : resolve(out)),
    );
    child.stdin?.end(input);
  });
  const parsed = renderOutputSchema.parse(JSON.parse(stdout));
  return {
    istio: parsed.istio,
    serviceTargets: parsed.proxy.serviceTargets,
    listeners: parsed.listeners,
    routes: parsed.routes,
    clusters: parsed.clusters,
    extensionConfigs: parsed.extension_configs,
    discoveredFilters: parsed.discovered_filters,
  };
}
