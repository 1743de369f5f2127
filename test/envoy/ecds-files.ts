// ECDS resources handed to Envoy as files it watches (path_config_source), one file per resource
// name, each replaced atomically: how the tests and benchmarks deliver what istiod would send over
// ADS. `listeners` points every discovered filter's config source at its file.
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getString, isJsonObject, type JsonObject } from './json.js';

export class EcdsFiles {
  private version = 0;
  private constructor(readonly dir: string) {}

  static async create(): Promise<EcdsFiles> {
    return new EcdsFiles(await mkdtemp(join(tmpdir(), 'gardener-acl-ecds-')));
  }

  path(name: string): string {
    return join(this.dir, `${name}.json`);
  }

  /** Writes each `{name, typed_config}` resource to its file. */
  async write(resources: readonly JsonObject[]): Promise<void> {
    this.version += 1;
    for (const resource of resources) {
      const name = getString(resource, 'name');
      if (name === undefined) throw new Error('an ECDS resource without a name');
      const body = { version_info: String(this.version), resources: [{ '@type': 'type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig', ...resource }] };
      await writeFile(`${this.path(name)}.tmp`, JSON.stringify(body));
      await rename(`${this.path(name)}.tmp`, this.path(name));
    }
  }

  /** `listeners` with the config source of every discovered filter pointed at its file. */
  listeners(listeners: readonly JsonObject[]): JsonObject[] {
    const rewrite = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(rewrite);
      if (!isJsonObject(value)) return value;
      const discovery = value['config_discovery'];
      if (isJsonObject(discovery) && typeof value['name'] === 'string') {
        return { ...value, config_discovery: { ...discovery, config_source: { resource_api_version: 'V3', path_config_source: { path: this.path(value['name']), watched_directory: { path: this.dir } } } } };
      }
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v)]));
    };
    return listeners.map((l) => rewrite(l) as JsonObject);
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Envoy's ECDS reloads so far (one per resource update, whatever number of listeners use it). */
export async function ecdsReloads(envoy: { stats(filter?: string): Promise<Map<string, number>> }): Promise<number> {
  const stats = await envoy.stats('^extension_config_discovery\\..*\\.config_reload$');
  return [...stats.values()].reduce((sum, n) => sum + n, 0);
}

/**
 * `value` (listeners, or anything holding HTTP filters) with each filter whose config Envoy would
 * take over ADS replaced by the resource of its name among `resources` (`{name, typed_config}`),
 * or by its default config where there is none: what Envoy runs once ECDS has delivered (or given
 * up waiting). Filters with another config source (files) are left as they are.
 */
export function inlineDiscoveredFilters<T>(value: T, resources: readonly JsonObject[]): T {
  const byName = new Map(resources.map((r) => [getString(r, 'name'), r['typed_config']]));
  const inline = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(inline);
    if (!isJsonObject(node)) return node;
    const discovery = node['config_discovery'];
    const name = getString(node, 'name');
    if (isJsonObject(discovery) && isJsonObject(discovery['config_source']) && 'ads' in discovery['config_source'] && name !== undefined) {
      const config = byName.get(name) ?? discovery['default_config'];
      if (config === undefined) throw new Error(`no ECDS resource ${name}, and its reference has no default`);
      return { name, typed_config: config };
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, inline(v)]));
  };
  return inline(value) as T;
}
