// Serving certificates: a `tls.crt`/`tls.key` pair from a directory, reloaded when it changes
// (Kubernetes Secret volumes swap a symlink, which fs.watch may report as a rename or miss
// entirely, hence a poll as well, like controller-runtime's certwatcher); or a self-signed CA
// and serving certificate for setups without certificate management.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { generate } from 'selfsigned';

export interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

export const CERT_FILE = 'tls.crt';
export const KEY_FILE = 'tls.key';

/**
 * Reads the pair and checks that both are there and belong together (throws otherwise). A file
 * caught half-written reads as empty, and an empty certificate would give a context that fails
 * every handshake, so parsing must be explicit.
 */
export async function readKeyPair(dir: string): Promise<KeyPair> {
  const [cert, key] = await Promise.all([readFile(path.join(dir, CERT_FILE), 'utf8'), readFile(path.join(dir, KEY_FILE), 'utf8')]);
  if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) throw new Error(`${KEY_FILE} does not belong to ${CERT_FILE} in ${dir}`);
  createSecureContext({ cert, key });
  return { cert, key };
}

export interface CertWatcherOptions {
  readonly dir: string;
  /** The pair changed and is valid; swap it in. */
  readonly onChange: (pair: KeyPair) => void;
  /** A read failed or the files do not match (e.g. caught between the two writes). */
  readonly onError: (error: unknown) => void;
  readonly onRead?: (ok: boolean) => void;
  readonly pollIntervalMs?: number;
  /** fs.watch on the directory in addition to polling (default true). */
  readonly watch?: boolean;
}

export class CertWatcher {
  private current: KeyPair | undefined;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();

  constructor(private readonly options: CertWatcherOptions) {}

  /** Reads the initial pair (errors are thrown: the server cannot start without one) and starts watching. */
  async start(): Promise<KeyPair> {
    const pair = await readKeyPair(this.options.dir);
    this.options.onRead?.(true);
    this.current = pair;
    if (this.options.watch ?? true) {
      this.watcher = watch(this.options.dir, () => void this.check());
      this.watcher.on('error', (error) => this.options.onError(error));
    }
    this.timer = setInterval(() => void this.check(), this.options.pollIntervalMs ?? 10_000);
    this.timer.unref();
    return pair;
  }

  stop(): void {
    this.watcher?.close();
    clearInterval(this.timer);
  }

  /** Serialised so that a burst of events reads the files once at a time. */
  check(): Promise<void> {
    this.checking = this.checking.then(() => this.reload());
    return this.checking;
  }

  private async reload(): Promise<void> {
    let pair: KeyPair;
    try {
      pair = await readKeyPair(this.options.dir);
    } catch (error) {
      this.options.onRead?.(false);
      this.options.onError(error);
      return;
    }
    this.options.onRead?.(true);
    if (pair.cert === this.current?.cert && pair.key === this.current.key) return;
    this.current = pair;
    this.options.onChange(pair);
  }
}

export interface SelfSignedCertificates {
  readonly ca: KeyPair;
  readonly serving: KeyPair;
}

const DAY_MS = 24 * 3600_000;

/**
 * A CA and a serving certificate it signed, SHA-256 (the API server refuses SHA-1), valid for
 * the given DNS names and IP addresses (Go checks SANs only, never the common name).
 */
export async function selfSignedCertificates(dnsNames: readonly string[], ips: readonly string[], validDays = 365): Promise<SelfSignedCertificates> {
  const notBeforeDate = new Date(Date.now() - 3600_000);
  const notAfterDate = new Date(Date.now() + validDays * DAY_MS);
  const ca = await generate([{ name: 'commonName', value: 'gardener-acl-webhook-ca' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const caPair = { cert: ca.cert, key: ca.private };
  const serving = await generate([{ name: 'commonName', value: dnsNames[0] ?? ips[0] ?? 'gardener-acl-webhook' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    ca: caPair,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [...dnsNames.map((value) => ({ type: 2 as const, value })), ...ips.map((ip) => ({ type: 7 as const, ip }))] },
    ],
  });
  return { ca: caPair, serving: { cert: serving.cert, key: serving.private } };
}

/** Service DNS names a webhook Service is reached by. */
export function serviceDnsNames(name: string, namespace: string): string[] {
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`];
}
