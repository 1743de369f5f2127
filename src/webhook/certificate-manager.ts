// Webhook certificates managed in-process, the way Gardener's extensions library does it: a CA
// and a serving certificate persisted in Secrets, renewed before they expire, and the caBundle of
// our own webhook configurations kept current. Every pass decides from what is stored (never from
// a memory of its own writes), and every write carries the resourceVersion it was decided on, so
// several replicas may run it at once: one wins, the others re-read.
//
// Order within a pass, so that the API server trusts every certificate a server may present:
// 1. the CA Secret (a rotated CA keeps the previous one in the bundle for a grace period),
// 2. the webhook configurations' caBundle,
// 3. only then the serving certificate signed by the current CA.
import type { Logger } from 'pino';
import { describeError, isConflict } from '../kube/errors.js';
import { mergePatchTo } from '../kube/object-json.js';
import { createObject, deleteObject, getObject, mergePatch, type KubeTarget, type ObjectRef, type ObjectToWrite } from '../kube/objects-client.js';
import {
  authorityData,
  caBundle,
  containsDesired,
  decideAuthority,
  issuerInBundle,
  parseAuthority,
  parseServing,
  previousTrustEndsAt,
  renewalDueAt,
  servingReissueReason,
  trustedBy,
  validityFrom,
  type StoredAuthority,
} from './certificate-plan.js';
import { issueCertificateAuthority, issueServingCertificate, type KeyPair } from './serving-certs.js';

const DAY_MS = 24 * 3_600_000;
/** Gardener's values: a 30-day CA; the previous CA stays trusted for 24 h after a rotation. */
export const DEFAULT_CA_VALIDITY_MS = 30 * DAY_MS;
export const DEFAULT_SERVING_VALIDITY_MS = 30 * DAY_MS;
export const DEFAULT_PREVIOUS_CA_GRACE_MS = DAY_MS;
/**
 * A pass reads three or four objects; every 15 s it repairs a foreign delete or edit of the
 * registration (which, while it lasts, lets writes through unmutated or refuses them) within 15 s.
 */
export const DEFAULT_SYNC_PERIOD_MS = 15_000;
const RETRY_MS = 5_000;
const CONFLICT_RETRY_MS = 1_000;
const DEFAULT_BUNDLE_SETTLE_MS = 10_000;
const BACKEND_RETRY_MS = 2_000;
const LABELS = { 'app.kubernetes.io/managed-by': 'gardener-acl', 'acl.gardener.cloud/role': 'webhook-certificates' };

export interface ManagedWebhookConfiguration {
  /** The API server that calls the webhook (the seed, or the virtual garden for Shoots). */
  readonly target: KubeTarget;
  /** The whole configuration for a caBundle (see webhook-configuration.ts). */
  readonly build: (caBundlePem: string) => Record<string, unknown>;
  /**
   * A cluster-scoped object of the installation (e.g. its ClusterRole) that owns the
   * configuration: when the installation is removed, the garbage collector removes the
   * configuration too, so no fail-closed webhook is left behind without a server.
   */
  readonly owner?: { readonly apiVersion: string; readonly kind: string; readonly name: string };
  /**
   * Whether a server can answer the webhook now (webhook-backend.ts). A configuration that does not
   * exist yet is created only once it can: registered earlier, its failurePolicy Fail would refuse
   * every write it covers. An existing one is kept whatever this says.
   */
  readonly backendReady?: () => Promise<boolean>;
}

export interface CertificateManagerOptions {
  /** Where the Secrets are stored. */
  readonly target: KubeTarget;
  readonly namespace: string;
  readonly caSecretName: string;
  readonly servingSecretName: string;
  readonly dnsNames: readonly string[];
  readonly ips: readonly string[];
  readonly configurations: readonly ManagedWebhookConfiguration[];
  readonly logger: Logger;
  readonly caValidityMs?: number;
  readonly servingValidityMs?: number;
  readonly previousCaGraceMs?: number;
  readonly syncPeriodMs?: number;
  /** How long a newly written caBundle is given to take effect before a certificate relies on it (default 10 s). */
  readonly bundleSettleMs?: number;
  /**
   * After a pass wrote a configuration that existed but differed (another writer deleted or edited
   * it, or the bundle changed): writes admitted meanwhile may lack what the webhook adds, so the
   * caller has them written again (the controller nudges Gardener's legacy filters).
   */
  readonly onConfigurationRewritten?: () => void;
  /** The stored serving pair after each pass (e.g. written to the server's --cert-dir). */
  readonly onServing?: (pair: KeyPair) => Promise<void> | void;
  readonly now?: () => number;
}

export interface SyncResult {
  /** The earliest time a stored certificate or trust period is due. */
  readonly nextDueMs: number;
  readonly writes: number;
}

const secretRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: 'v1', kind: 'Secret', name, namespace });

/**
 * Deletes the webhook configuration `name` if a certificate manager made it (our labels): called
 * where no webhook runs any more (the seed chart's webhook disabled), so that no fail-closed
 * registration is left pointing at a Service that is gone. One the chart renders itself (tls.mode
 * inline, without these labels) is left to Helm. Returns whether it deleted one.
 */
export async function retireManagedWebhookConfiguration(target: KubeTarget, ref: ObjectRef, logger: Logger): Promise<boolean> {
  const stored = await getObject(target, ref);
  const labels = (stored?.['metadata'] as { labels?: Record<string, string> } | undefined)?.labels ?? {};
  if (!stored || !Object.entries(LABELS).every(([k, v]) => labels[k] === v)) return false;
  await deleteObject(target, ref);
  logger.info({ configuration: `${ref.kind}/${ref.name}` }, 'webhook disabled: deleted the webhook configuration the certificate manager had made');
  return true;
}

export class WebhookCertificateManager {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly now: () => number;
  /** Passes run by this manager: a configuration written in the first one was not someone else's change. */
  private passes = 0;
  /** Configurations this manager has seen stored: one missing after that was deleted by another writer. */
  private readonly seenStored = new Set<string>();

  constructor(private readonly options: CertificateManagerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Runs a pass now and then whenever one is due (at the latest every sync period); failed passes
   * retry after 5 s (1 s after a conflict). The timer keeps the process alive: a server still
   * waiting for its first certificate has nothing else pending.
   */
  start(): Promise<void> {
    this.stopped = false;
    return this.runOnce();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private runOnce(): Promise<void> {
    this.running = (async () => {
      let delay: number;
      try {
        const result = await this.sync();
        delay = Math.max(1_000, Math.min(this.options.syncPeriodMs ?? DEFAULT_SYNC_PERIOD_MS, result.nextDueMs - this.now()));
      } catch (error) {
        // A conflict means another replica wrote first: read what it stored soon.
        const conflict = isConflict(error);
        this.options.logger[conflict ? 'info' : 'warn']({ err: describeError(error), secret: `${this.options.namespace}/${this.options.caSecretName}` }, conflict ? 'webhook certificates: another writer was first; re-reading' : 'webhook certificates: pass failed; retrying');
        delay = conflict ? CONFLICT_RETRY_MS : RETRY_MS;
      }
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.runOnce(), delay);
    })();
    return this.running;
  }

  /** One pass over what is stored. Throws on API errors (a 409 means another replica wrote first). */
  async sync(): Promise<SyncResult> {
    let writes = 0;
    const authority = await this.ensureAuthority(() => writes++);
    const bundle = caBundle(authority, this.now());
    let bundleWritten = false;
    let waitingForBackend = false;
    let repaired = false;
    for (const configuration of this.options.configurations) {
      const outcome = await this.ensureConfiguration(configuration, bundle);
      if (outcome === 'written' || outcome === 'created again') {
        writes++;
        bundleWritten = true;
      }
      if (outcome === 'created again' || (outcome === 'written' && this.passes > 0)) repaired = true;
      if (outcome === 'waiting for its backend') waitingForBackend = true;
    }
    this.passes++;
    if (repaired) this.options.onConfigurationRewritten?.();
    // A bundle just written may not be in effect in the API server yet; a serving certificate that
    // is still trusted waits for the next pass rather than risk one call failing the handshake.
    const settleUntil = bundleWritten ? this.now() + (this.options.bundleSettleMs ?? DEFAULT_BUNDLE_SETTLE_MS) : undefined;
    const serving = await this.ensureServing(authority.current, () => writes++, settleUntil === undefined ? undefined : bundle);
    await this.options.onServing?.(serving);
    const dues = [renewalDueAt(authority.current.cert), renewalDueAt(serving.cert), ...(authority.previous ? [previousTrustEndsAt(authority.previous)] : [])];
    // Not registered until a server answers: look again soon.
    const backendRetry = waitingForBackend ? this.now() + BACKEND_RETRY_MS : Infinity;
    return { nextDueMs: Math.min(...dues, settleUntil ?? Infinity, backendRetry), writes };
  }

  private async ensureAuthority(wrote: () => void): Promise<StoredAuthority> {
    const { target, namespace, caSecretName, logger } = this.options;
    const ref = secretRef(namespace, caSecretName);
    const stored = await getObject(target, ref);
    const current = parseAuthority(stored?.['data']);
    const now = this.now();
    const decision = decideAuthority(current, now);
    if (decision.action === 'keep' && current) {
      // A bundle written by an older pass (or edited by hand) is brought back in line.
      const data = authorityData(current);
      if (!containsDesired(stored?.['data'], data)) {
        await this.writeSecret(ref, stored, 'Opaque', data);
        wrote();
      }
      return current;
    }
    let next: StoredAuthority;
    if (decision.action === 'drop-previous' && current) {
      next = { current: current.current };
    } else {
      const issued = await issueCertificateAuthority(caSecretName, validityFrom(now, this.options.caValidityMs ?? DEFAULT_CA_VALIDITY_MS));
      const untilMs = now + (this.options.previousCaGraceMs ?? DEFAULT_PREVIOUS_CA_GRACE_MS);
      // A lost CA Secret: the servers still present a certificate of the lost CA until the kubelet
      // projects the new one, so that CA (still in the stored caBundle) stays trusted meanwhile.
      const lost = decision.action === 'create' ? await this.signerOfServedCertificate(now) : undefined;
      next =
        decision.action === 'rotate' && current
          ? { current: issued, previous: { cert: current.current.cert, untilMs } }
          : lost !== undefined
            ? { current: issued, previous: { cert: lost, untilMs } }
            : { current: issued };
      const message =
        decision.action === 'rotate'
          ? 'webhook CA rotated; the previous CA stays in the caBundle for the grace period'
          : lost !== undefined
            ? 'webhook CA Secret lost: a new CA is created; the CA that signed the serving certificate stays in the caBundle for the grace period'
            : 'webhook CA created';
      logger.info({ secret: `${namespace}/${caSecretName}`, reason: 'reason' in decision ? decision.reason : undefined }, message);
    }
    await this.writeSecret(ref, stored, 'Opaque', authorityData(next));
    wrote();
    return next;
  }

  /** The CA of a stored caBundle that signed the stored serving certificate, when both are still there. */
  private async signerOfServedCertificate(now: number): Promise<string | undefined> {
    const { target, namespace, servingSecretName } = this.options;
    const serving = parseServing((await getObject(target, secretRef(namespace, servingSecretName)))?.['data']);
    if (!serving) return undefined;
    for (const configuration of this.options.configurations) {
      const desired = configuration.build('');
      const ref: ObjectRef = { apiVersion: String(desired['apiVersion']), kind: String(desired['kind']), name: (desired['metadata'] as { name: string }).name };
      const webhooks = ((await getObject(configuration.target, ref))?.['webhooks'] as { clientConfig?: { caBundle?: string } }[] | undefined) ?? [];
      for (const webhook of webhooks) {
        const bundle = Buffer.from(webhook.clientConfig?.caBundle ?? '', 'base64').toString('utf8');
        const signer = issuerInBundle(serving.cert, bundle, now);
        if (signer !== undefined) return signer;
      }
    }
    return undefined;
  }

  private async ensureServing(ca: KeyPair, wrote: () => void, settlingBundle: string | undefined): Promise<KeyPair> {
    const { target, namespace, servingSecretName, dnsNames, ips, logger } = this.options;
    const ref = secretRef(namespace, servingSecretName);
    const stored = await getObject(target, ref);
    const current = parseServing(stored?.['data']);
    const now = this.now();
    const reason = servingReissueReason(current, ca, dnsNames, ips, now);
    if (current && reason === undefined) return current;
    if (current && settlingBundle !== undefined && trustedBy(current.cert, settlingBundle, now)) return current;
    const issued = await issueServingCertificate(ca, dnsNames, ips, validityFrom(now, this.options.servingValidityMs ?? DEFAULT_SERVING_VALIDITY_MS));
    const data = { 'tls.crt': Buffer.from(issued.cert).toString('base64'), 'tls.key': Buffer.from(issued.key).toString('base64') };
    await this.writeSecret(ref, stored, 'kubernetes.io/tls', data);
    wrote();
    logger.info({ secret: `${namespace}/${servingSecretName}`, reason }, 'webhook serving certificate issued');
    return issued;
  }

  /** Creates the Secret, or replaces its data if it is still the version the decision was made on. */
  private async writeSecret(ref: ObjectRef, stored: Record<string, unknown> | undefined, type: string, data: Record<string, string>): Promise<void> {
    if (!stored) {
      await createObject(this.options.target, { apiVersion: 'v1', kind: 'Secret', metadata: { name: ref.name, namespace: ref.namespace, labels: LABELS }, type, data });
      return;
    }
    const meta = stored['metadata'] as { resourceVersion?: string } | undefined;
    if (stored['type'] !== type) {
      // The type is immutable: a Secret of another type cannot serve; replace it.
      throw new Error(`Secret ${ref.namespace}/${ref.name} has type ${String(stored['type'])}, not ${type}; delete it so that it can be recreated`);
    }
    // Keys that are no longer wanted are removed.
    await mergePatch(this.options.target, ref, { metadata: { resourceVersion: meta?.resourceVersion, labels: LABELS }, data: mergePatchTo(stored['data'] ?? {}, data) });
  }

  /** Creates or overwrites the configuration's webhooks (with the bundle). */
  private async ensureConfiguration(configuration: ManagedWebhookConfiguration, bundle: string): Promise<'written' | 'created again' | 'unchanged' | 'waiting for its backend'> {
    const desired = configuration.build(bundle);
    const meta = desired['metadata'] as { name: string };
    const ref: ObjectRef = { apiVersion: String(desired['apiVersion']), kind: String(desired['kind']), name: meta.name };
    const ownerReferences = await this.ownerReferences(configuration);
    const stored = await getObject(configuration.target, ref);
    const seenBefore = this.seenStored.has(ref.name);
    if (stored) this.seenStored.add(ref.name);
    if (!stored && configuration.backendReady !== undefined && !(await configuration.backendReady())) {
      this.options.logger.info({ configuration: `${ref.kind}/${ref.name}` }, 'webhook configuration not created yet: no webhook server answers (it would refuse every write it covers)');
      return 'waiting for its backend';
    }
    if (!stored) {
      const object: ObjectToWrite = { ...desired, apiVersion: ref.apiVersion, kind: ref.kind, metadata: { ...meta, labels: LABELS, ...(ownerReferences ? { ownerReferences } : {}) } };
      await createObject(configuration.target, object);
      this.seenStored.add(ref.name);
      this.options.logger.info({ configuration: `${ref.kind}/${ref.name}` }, seenBefore ? 'webhook configuration created again (another writer deleted it)' : 'webhook configuration created');
      return seenBefore ? 'created again' : 'written';
    }
    const storedMeta = stored['metadata'] as { resourceVersion?: string; ownerReferences?: unknown };
    const ownersCurrent = !ownerReferences || containsDesired(storedMeta.ownerReferences, ownerReferences);
    if (ownersCurrent && containsDesired(stored['webhooks'], desired['webhooks'])) return 'unchanged';
    await mergePatch(configuration.target, ref, {
      metadata: { resourceVersion: storedMeta.resourceVersion, ...(ownerReferences ? { ownerReferences } : {}) },
      webhooks: desired['webhooks'],
    });
    this.options.logger.info({ configuration: `${ref.kind}/${ref.name}` }, 'webhook configuration updated (webhooks or caBundle)');
    return 'written';
  }

  private async ownerReferences(configuration: ManagedWebhookConfiguration): Promise<Record<string, unknown>[] | undefined> {
    const owner = configuration.owner;
    if (!owner) return undefined;
    const stored = await getObject(configuration.target, owner);
    const uid = (stored?.['metadata'] as { uid?: string } | undefined)?.uid;
    if (!uid) {
      this.options.logger.warn({ owner: `${owner.kind}/${owner.name}` }, 'webhook configuration owner not found; the configuration is written without an owner');
      return undefined;
    }
    return [{ apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, uid }];
  }
}

