// The EnvoyFilter webhook's view of the seed: one informer on acl Extensions (the recorded ACLs),
// so admission never waits for an API round-trip. Nothing else is cached: what the webhook does
// not read, it neither waits for at readiness nor holds RBAC for.
import { cachedExtension } from '../gardener/cached-views.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { extensionSchema, type Extension } from '../gardener/objects.js';
import { EXTENSION_TYPE } from '../gardener/seed-acl.js';
import { WATCHED } from '../gardener/watched-resources.js';
import { ResilientInformer } from '../kube/informer.js';
import type { AdmissionCacheSource } from './acl-index.js';

export class InformerCacheSource implements AdmissionCacheSource {
  private changes = 0;
  private readonly extensionInformer: ResilientInformer<Extension>;

  /** `watchIdleTimeoutMs`: a watch silent this long is re-opened (informer default 90 s; tests shorten it). */
  constructor(kubeConfig: KubeConfig, logger: Logger, options: { readonly watchIdleTimeoutMs?: number } = {}) {
    const idle = options.watchIdleTimeoutMs !== undefined ? { watchIdleTimeoutMs: options.watchIdleTimeoutMs } : {};
    const onChange = () => {
      this.changes++;
    };
    this.extensionInformer = new ResilientInformer<Extension>({
      kubeConfig,
      logger,
      ...idle,
      ...WATCHED.extensions,
      parse: (raw) => {
        const parsed = extensionSchema.safeParse(raw);
        return parsed.success ? cachedExtension(parsed.data) : undefined;
      },
      // Other extension types are never cached (nor reported as objects that do not parse): they never matter here.
      keep: (ext) => ext.spec.type === EXTENSION_TYPE,
      onChange,
    });
  }

  async start(): Promise<void> {
    await this.extensionInformer.start();
  }

  async stop(): Promise<void> {
    await Promise.allSettled([this.extensionInformer.stop()]);
  }

  extensions(): readonly Extension[] {
    return this.extensionInformer.list();
  }

  revision(): number {
    return this.changes;
  }

  /** The caches that have followed no watch for `thresholdMs` (a stuck informer serves an ever older view). */
  stuck(thresholdMs: number): string[] {
    return Object.entries({ extensions: this.extensionInformer })
      .filter(([, informer]) => informer.notWatchingForMs() > thresholdMs)
      .map(([name]) => name);
  }

  synced(): boolean {
    return this.extensionInformer.hasSynced();
  }
}
