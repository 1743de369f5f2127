// Serving certificates: a `tls.crt`/`tls.key` pair from a directory, reloaded when it changes
// (Kubernetes Secret volumes swap a symlink, which fs.watch may report as a rename or miss
// entirely, hence a poll as well, like controller-runtime's certwatcher); issuing of CAs and
// serving certificates (certificate-manager.ts keeps them in Secrets and rotates them).
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { mkdir, readFile, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
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
  // One after the other: with both missing, the error names the certificate, the same every time.
  const cert = await readFile(path.join(dir, CERT_FILE), 'utf8');
  const key = await readFile(path.join(dir, KEY_FILE), 'utf8');
  if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) throw new Error(`${KEY_FILE} does not belong to ${CERT_FILE} in ${dir}`);
  createSecureContext({ cert, key });
  return { cert, key };
}

/**
 * Writes the pair into `dir` for a CertWatcher there, both files at once the way the kubelet
 * updates a Secret volume: a new directory, then the `..data` symlink swapped by rename, with
 * `tls.crt` and `tls.key` linked through it. A reader never sees one file new and the other old.
 */
export async function writeKeyPair(dir: string, pair: KeyPair): Promise<void> {
  await mkdir(dir, { recursive: true });
  const current = await readKeyPair(dir).catch(() => undefined);
  if (current?.cert === pair.cert && current.key === pair.key) return;
  const version = `..${Date.now()}_${process.pid}`;
  await mkdir(path.join(dir, version));
  await writeFile(path.join(dir, version, CERT_FILE), pair.cert, { mode: 0o600 });
  await writeFile(path.join(dir, version, KEY_FILE), pair.key, { mode: 0o600 });
  const previous = await readlink(path.join(dir, '..data')).catch(() => undefined);
  await rm(path.join(dir, '..data_tmp'), { force: true });
  await symlink(version, path.join(dir, '..data_tmp'));
  await rename(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  for (const file of [CERT_FILE, KEY_FILE]) {
    const link = path.join(dir, file);
    if ((await readlink(link).catch(() => undefined)) !== path.join('..data', file)) {
      await rm(link, { force: true });
      await symlink(path.join('..data', file), link);
    }
  }
  if (previous && previous !== version) await rm(path.join(dir, previous), { recursive: true, force: true });
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

export interface Validity {
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** A CA (EC P-256, SHA-256: the API server refuses SHA-1) valid for `validity`. */
export async function issueCertificateAuthority(commonName: string, validity: Validity): Promise<KeyPair> {
  const ca = await generate([{ name: 'commonName', value: commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate: validity.notBefore,
    notAfterDate: validity.notAfter,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: ca.cert, key: ca.private };
}

/**
 * A serving certificate signed by `ca` for the given DNS names and IP addresses (Go checks SANs
 * only, never the common name).
 */
export async function issueServingCertificate(ca: KeyPair, dnsNames: readonly string[], ips: readonly string[], validity: Validity): Promise<KeyPair> {
  const serving = await generate([{ name: 'commonName', value: dnsNames[0] ?? ips[0] ?? 'gardener-acl-webhook' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate: validity.notBefore,
    notAfterDate: validity.notAfter,
    ca,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [...dnsNames.map((value) => ({ type: 2 as const, value })), ...ips.map((ip) => ({ type: 7 as const, ip }))] },
    ],
  });
  return { cert: serving.cert, key: serving.private };
}

/** A CA and a serving certificate it signed, for tests and setups without certificate management. */
export async function selfSignedCertificates(dnsNames: readonly string[], ips: readonly string[], validDays = 365): Promise<SelfSignedCertificates> {
  const validity = { notBefore: new Date(Date.now() - 3600_000), notAfter: new Date(Date.now() + validDays * DAY_MS) };
  const ca = await issueCertificateAuthority('gardener-acl-webhook-ca', validity);
  return { ca, serving: await issueServingCertificate(ca, dnsNames, ips, validity) };
}

/** Service DNS names a webhook Service is reached by. */
export function serviceDnsNames(name: string, namespace: string): string[] {
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`];
}
