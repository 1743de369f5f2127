// Clusters and listeners handed to Envoy as files it watches (path_config_source), for tests that
// change a cluster or a listener that envoy-process's own file LDS cannot express: CDS at all, and
// LDS next to static listeners or for internal listeners, which have no port for startEnvoy to wait
// for. Put `dynamicResources()` into the bootstrap given to startEnvoy (without `listenersViaFile`,
// which would replace it); `update` resolves once Envoy applied the new resources.
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EnvoyInstance } from './envoy-process.js';
import type { JsonObject } from './json.js';

export type XdsKind = 'lds' | 'cds';

const TYPE_URL: Record<XdsKind, string> = {
  lds: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  cds: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
};
/** Where Envoy counts the updates of each kind (`<prefix>.update_success`, `.update_rejected`). */
const UPDATE_STATS: Record<XdsKind, string> = { lds: 'listener_manager.lds', cds: 'cluster_manager.cds' };
const UPDATE_TIMEOUT_MS = 10_000;

export class FileXds {
  private version = 0;
  private constructor(private readonly dir: string) {}

  /** A directory per kind, each with its first resources written: Envoy reads them when it starts. */
  static async create(initial: Readonly<Partial<Record<XdsKind, readonly JsonObject[]>>>): Promise<FileXds> {
    const xds = new FileXds(await mkdtemp(join(tmpdir(), 'gardener-acl-xds-')));
    for (const [kind, resources] of Object.entries(initial) as [XdsKind, readonly JsonObject[]][]) {
      await mkdir(join(xds.dir, kind));
      await xds.write(kind, resources);
    }
    return xds;
  }

  /** `dynamic_resources` for every kind created, each a path_config_source on its file. */
  dynamicResources(kinds: readonly XdsKind[]): JsonObject {
    return Object.fromEntries(
      kinds.map((kind) => [
        `${kind}_config`,
        { resource_api_version: 'V3', path_config_source: { path: this.path(kind), watched_directory: { path: join(this.dir, kind) } } },
      ]),
    );
  }

  /** Replaces every resource of `kind`; resolves once Envoy counted the update, throws if it rejected it. */
  async update(envoy: Pick<EnvoyInstance, 'stats' | 'output'>, kind: XdsKind, resources: readonly JsonObject[]): Promise<void> {
    const prefix = UPDATE_STATS[kind];
    const counters = async (): Promise<{ success: number; rejected: number }> => {
      const stats = await envoy.stats(`^${prefix.replace(/\./g, '\\.')}\\.update_(success|rejected)$`);
      return { success: stats.get(`${prefix}.update_success`) ?? 0, rejected: stats.get(`${prefix}.update_rejected`) ?? 0 };
    };
    const before = await counters();
    await this.write(kind, resources);
    const deadline = Date.now() + UPDATE_TIMEOUT_MS;
    for (;;) {
      const now = await counters();
      if (now.rejected > before.rejected) throw new Error(`Envoy rejected the ${kind} update:\n${envoy.output()}`);
      if (now.success > before.success) return;
      if (Date.now() > deadline) throw new Error(`Envoy did not apply the ${kind} update within ${UPDATE_TIMEOUT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }

  private path(kind: XdsKind): string {
    return join(this.dir, kind, 'resources.json');
  }

  // Rename is atomic within a directory (and is what watched_directory reacts to), so Envoy never
  // reads a half-written file.
  private async write(kind: XdsKind, resources: readonly JsonObject[]): Promise<void> {
    this.version += 1;
    const body = { version_info: String(this.version), resources: resources.map((resource) => ({ '@type': TYPE_URL[kind], ...resource })) };
    await writeFile(`${this.path(kind)}.tmp`, JSON.stringify(body));
    await rename(`${this.path(kind)}.tmp`, this.path(kind));
  }
}
