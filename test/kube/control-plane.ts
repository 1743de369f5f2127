/**
 * Envtest-style test control plane: a REAL etcd and kube-apiserver on loopback.
 *
 * The binaries are built from their published Go modules by
 * `scripts/setup-kube.sh` (versions pinned in tools/kube/go.mod and
 * tools/etcd/go.mod) and looked up in
 *   1. `$KUBE_ASSETS` (a directory holding `kube-apiserver` and `etcd`), else
 *   2. `${GARDENER_ACL_CACHE:-~/.cache/gardener-acl}/kube-<k8s version>/bin`.
 * If they are missing, `startControlPlane()` throws and says how to build them:
 * a test that needs a real API server never silently passes without one.
 *
 * Every control plane gets its own temporary directory (etcd data, throwaway
 * PKI, kubeconfig, process logs), removed by `stop()` unless
 * `KUBE_KEEP_TMP=1`. Process logs: `<dir>/etcd.log`, `<dir>/kube-apiserver.log`.
 *
 * Environment:
 *   KUBE_ASSETS               directory with the binaries (overrides the cache path)
 *   GARDENER_ACL_CACHE        cache root used by scripts/setup-kube.sh
 *   KUBE_START_TIMEOUT_MS     how long to wait for readiness (default 60000)
 *   KUBE_KEEP_TMP=1           keep the temporary directory after stop()
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, accessSync, constants as fsConstants } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import https from 'node:https';
import http from 'node:http';
import net from 'node:net';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  KubeConfig,
  dumpYaml,
  loadYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { generate as generateCert } from 'selfsigned';
import { parseAllDocuments, parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { killOnExit } from '../support/child-processes.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..');

/** The CRDs written for this project's tests (Gardener, Istio). */
export const DEFAULT_CRD_DIR = path.join(here, 'crds');

// ---------------------------------------------------------------------------
// Binaries
// ---------------------------------------------------------------------------

export interface KubeAssets {
  kubeApiServer: string;
  etcd: string;
  /** Kubernetes version pinned in tools/kube/go.mod, e.g. "v1.37.1". */
  kubernetesVersion: string;
}

function pinnedModuleVersion(goMod: string, module: string): string {
  const text = readFileSync(goMod, 'utf8');
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (line.includes('=>')) continue;
    if (fields[0] === 'require' && fields[1] === module && fields[2]) return fields[2];
    if (fields[0] === module && fields[1]) return fields[1];
  }
  throw new Error(`${goMod} does not require ${module}`);
}

/** Kubernetes version the harness expects (from tools/kube/go.mod). */
export function pinnedKubernetesVersion(): string {
  return pinnedModuleVersion(path.join(repoRoot, 'tools', 'kube', 'go.mod'), 'k8s.io/kubernetes');
}

/** Directory where scripts/setup-kube.sh puts the binaries. */
export function defaultAssetsDir(): string {
  const cache = process.env.GARDENER_ACL_CACHE || path.join(homedir(), '.cache', 'gardener-acl');
  return path.join(cache, `kube-${pinnedKubernetesVersion()}`, 'bin');
}

/**
 * Finds kube-apiserver and etcd. Throws (never skips) when they are missing,
 * with the command that builds them.
 */
export function findKubeAssets(dir?: string): KubeAssets {
  const fromEnv = process.env.KUBE_ASSETS;
  const assetsDir = dir ?? (fromEnv && fromEnv.length > 0 ? fromEnv : defaultAssetsDir());
  const kubeApiServer = path.join(assetsDir, 'kube-apiserver');
  const etcd = path.join(assetsDir, 'etcd');
  const missing = [kubeApiServer, etcd].filter((p) => {
    try {
      accessSync(p, fsConstants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length > 0) {
    const source = dir !== undefined ? 'the given directory' : fromEnv ? '$KUBE_ASSETS' : 'the build cache';
    throw new Error(
      `real kube-apiserver/etcd not found: ${missing.join(', ')} missing (looked in ${source}: ${assetsDir}). ` +
        `Build them with \`bash scripts/setup-kube.sh\` (prints the bin directory; export it as KUBE_ASSETS ` +
        `if you use a different cache).`,
    );
  }
  return { kubeApiServer, etcd, kubernetesVersion: pinnedKubernetesVersion() };
}

// ---------------------------------------------------------------------------
// PKI
// ---------------------------------------------------------------------------

export interface CertificateAuthority {
  cert: string;
  key: string;
}

export interface KeyPairPem {
  cert: string;
  key: string;
}

const HOUR = 3600_000;

function validity(): { notBeforeDate: Date; notAfterDate: Date } {
  const now = Date.now();
  return { notBeforeDate: new Date(now - HOUR), notAfterDate: new Date(now + 7 * 24 * HOUR) };
}

/** A throwaway CA (EC P-256, SHA-256). */
export async function createCertificateAuthority(commonName = 'gardener-acl-test-ca'): Promise<CertificateAuthority> {
  const pems = await generateCert([{ name: 'commonName', value: commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    ...validity(),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

function assertDnSafe(value: string): void {
  if (!/^[A-Za-z0-9:._@/ -]+$/.test(value)) {
    throw new Error(`certificate subject value ${JSON.stringify(value)} contains unsupported characters`);
  }
}

/** A serving certificate signed by `ca` for the given DNS names and IPs. */
export async function issueServingCert(
  ca: CertificateAuthority,
  opts: { commonName: string; dnsNames?: string[]; ips?: string[] },
): Promise<KeyPairPem> {
  assertDnSafe(opts.commonName);
  const altNames = [
    ...(opts.dnsNames ?? []).map((value) => ({ type: 2 as const, value })),
    ...(opts.ips ?? []).map((ip) => ({ type: 7 as const, ip })),
  ];
  const pems = await generateCert([{ name: 'commonName', value: opts.commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    ...validity(),
    ca,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** A client certificate signed by `ca`: CN = user, one O per group. */
export async function issueClientCert(
  ca: CertificateAuthority,
  user: string,
  groups: string[] = [],
): Promise<KeyPairPem> {
  [user, ...groups].forEach(assertDnSafe);
  const pems = await generateCert(
    [
      { name: 'commonName', value: user },
      ...groups.map((value) => ({ name: 'organizationName', value })),
    ],
    {
      keyType: 'ec',
      algorithm: 'sha256',
      ...validity(),
      ca,
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, critical: true },
        { name: 'extKeyUsage', clientAuth: true },
      ],
    },
  );
  return { cert: pems.cert, key: pems.private };
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

// setpriv --pdeathsig makes the kernel kill the child if this process dies
// without running its exit hooks (e.g. a test worker killed with SIGKILL).
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  exitCode(): number | null | undefined;
}

export function startProcess(name: string, binary: string, args: string[], logFile: string): ManagedProcess {
  const fd = openSync(logFile, 'a');
  const [cmd, cmdArgs] = SETPRIV
    ? [SETPRIV, ['--pdeathsig', 'KILL', '--', binary, ...args]]
    : [binary, args];
  let child: ChildProcess;
  try {
    child = spawn(cmd, cmdArgs, { stdio: ['ignore', fd, fd], env: { ...process.env } });
  } finally {
    closeSync(fd);
  }
  killOnExit(child);
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (c, signal) => {
      code = c ?? (signal ? null : c);
      resolve(c);
    });
    child.once('error', (err) => {
      code = -1;
      void writeFile(logFile, `\nspawn error: ${String(err)}\n`, { flag: 'a' });
      resolve(-1);
    });
  });
  return { name, child, exited, exitCode: () => code };
}

export async function stopProcess(p: ManagedProcess, graceMs = 10_000): Promise<void> {
  if (p.exitCode() !== undefined) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
  try {
    await p.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Stops `proc` once (later calls resolve at once) and removes its scratch directory, unless KUBE_KEEP_TMP=1. */
export function processStopper(proc: ManagedProcess, dir: string): () => Promise<void> {
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    await stopProcess(proc);
    if (process.env.KUBE_KEEP_TMP !== '1') await rm(dir, { recursive: true, force: true });
  };
}

export async function tail(file: string, lines = 40): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** A free TCP port on 127.0.0.1 (asked from the kernel, then released). */
export async function getFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('no port'));
        return;
      }
      srv.close(() => resolve(addr.port));
    });
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface HttpResult {
  status: number;
  body: string;
}

function request(url: string, tls?: { ca: string; cert: string; key: string }): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const mod = u.protocol === 'https:' ? https : http;
    const req = mod.request(
      u,
      { method: 'GET', timeout: 5_000, ...(tls ? { ca: tls.ca, cert: tls.cert, key: tls.key } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout: GET ${url}`)));
    req.on('error', reject);
    req.end();
  });
}

export async function waitFor(
  what: string,
  proc: ManagedProcess | undefined,
  logFile: string | undefined,
  deadline: number,
  probe: () => Promise<boolean>,
): Promise<void> {
  let lastError = '';
  for (;;) {
    if (proc && proc.exitCode() !== undefined) {
      throw new Error(
        `${proc.name} exited (code ${String(proc.exitCode())}) while waiting for ${what}; log tail:\n` +
          (logFile ? await tail(logFile) : ''),
      );
    }
    try {
      if (await probe()) return;
      lastError = '';
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${what}${lastError ? ` (last error: ${lastError})` : ''}` +
          (logFile ? `; log tail (${logFile}):\n${await tail(logFile)}` : ''),
      );
    }
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------
// Control plane
// ---------------------------------------------------------------------------

export interface ControlPlaneOptions {
  /** Directory with kube-apiserver and etcd (default: findKubeAssets()). */
  assetsDir?: string;
  /** Readiness timeout for each start (default $KUBE_START_TIMEOUT_MS or 60 s). */
  startTimeoutMs?: number;
  /** Extra kube-apiserver flags, e.g. ['--feature-gates=Foo=true']; later flags win. */
  apiServerFlags?: string[];
  /** Keep the temporary directory after stop() (default $KUBE_KEEP_TMP === '1'). */
  keepTmp?: boolean;
}

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  server: string;
  /** Admin kubeconfig file (user in group system:masters). */
  kubeconfigPath: string;
  /** Admin client configuration loaded from kubeconfigPath. */
  kubeConfig: KubeConfig;
  /** http://127.0.0.1:<port> */
  etcdUrl: string;
  /** Temporary directory of this control plane (PKI, etcd data, logs). */
  dir: string;
  /** The cluster CA (also trusted for client certificates); use it to sign webhook serving certs. */
  ca: CertificateAuthority;
  /** Kubernetes version of the running apiserver binary (pinned version). */
  kubernetesVersion: string;
  /** How long start() took, in ms. */
  startupMs: number;
  /** A kubeconfig for another user (client cert signed by the cluster CA), for RBAC tests. */
  kubeConfigForUser(user: string, groups?: string[]): Promise<KubeConfig>;
  /** Applies every CRD in the YAML files of `dir` (default DEFAULT_CRD_DIR) and waits until served. */
  installCRDs(dirOrFiles?: string | string[]): Promise<string[]>;
  /** Stops kube-apiserver only (etcd keeps running); for "API server down" tests. */
  stopApiServer(): Promise<void>;
  /** Starts kube-apiserver again on the same port with the same etcd and PKI, waits for /readyz. */
  startApiServer(): Promise<void>;
  /** stopApiServer() + startApiServer(). */
  restartApiServer(): Promise<void>;
  /** Stops both processes and removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
}

function kubeconfigYaml(server: string, caCert: string, user: string, client: KeyPairPem): string {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  return stringifyYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'envtest', cluster: { server, 'certificate-authority-data': b64(caCert) } }],
    users: [{ name: user, user: { 'client-certificate-data': b64(client.cert), 'client-key-data': b64(client.key) } }],
    contexts: [{ name: 'envtest', context: { cluster: 'envtest', user } }],
    'current-context': 'envtest',
  });
}

/** Starts etcd and kube-apiserver on loopback; resolves once /readyz is OK and namespace "default" exists. */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const started = Date.now();
  const assets = findKubeAssets(opts.assetsDir);
  const timeoutMs =
    opts.startTimeoutMs ?? (Number(process.env.KUBE_START_TIMEOUT_MS) > 0 ? Number(process.env.KUBE_START_TIMEOUT_MS) : 60_000);
  const keepTmp = opts.keepTmp ?? process.env.KUBE_KEEP_TMP === '1';

  const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-kube-'));
  const pkiDir = path.join(dir, 'pki');
  await mkdir(pkiDir, { recursive: true });
  const etcdLog = path.join(dir, 'etcd.log');
  const apiLog = path.join(dir, 'kube-apiserver.log');

  let etcd: ManagedProcess | undefined;
  let apiserver: ManagedProcess | undefined;
  let stopped = false;

  const cleanup = async () => {
    if (apiserver) await stopProcess(apiserver);
    if (etcd) await stopProcess(etcd);
    if (!keepTmp) await rm(dir, { recursive: true, force: true });
  };

  try {
    // --- PKI -------------------------------------------------------------
    const ca = await createCertificateAuthority();
    const serving = await issueServingCert(ca, {
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
      ips: ['127.0.0.1', '10.0.0.1'],
    });
    const admin = await issueClientCert(ca, 'gardener-acl-test-admin', ['system:masters']);
    const sa = generateKeyPairSync('ec', {
      namedCurve: 'P-256',
      publicKeyEncoding: { type: 'spki', format: 'pem' },
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    });
    const files = {
      caCert: path.join(pkiDir, 'ca.crt'),
      servingCert: path.join(pkiDir, 'apiserver.crt'),
      servingKey: path.join(pkiDir, 'apiserver.key'),
      saPub: path.join(pkiDir, 'sa.pub'),
      saKey: path.join(pkiDir, 'sa.key'),
    };
    await Promise.all([
      writeFile(files.caCert, ca.cert),
      writeFile(files.servingCert, serving.cert),
      writeFile(files.servingKey, serving.key, { mode: 0o600 }),
      writeFile(files.saPub, sa.publicKey),
      writeFile(files.saKey, sa.privateKey, { mode: 0o600 }),
    ]);

    // --- etcd ------------------------------------------------------------
    const etcdPort = await getFreePort();
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    etcd = startProcess(
      'etcd',
      assets.etcd,
      [
        `--data-dir=${path.join(dir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:0`,
        `--unsafe-no-fsync=true`,
        `--log-level=warn`,
      ],
      etcdLog,
    );
    const etcdProc = etcd;
    await waitFor('etcd /health', etcdProc, etcdLog, Date.now() + timeoutMs, async () => {
      const r = await request(`${etcdUrl}/health`);
      return r.status === 200 && r.body.includes('"true"');
    });

    // --- kube-apiserver --------------------------------------------------
    const apiPort = await getFreePort();
    const server = `https://127.0.0.1:${apiPort}`;
    const apiArgs = [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${path.join(dir, 'apiserver-certs')}`,
      `--bind-address=127.0.0.1`,
      `--advertise-address=127.0.0.1`,
      // Loopback may not be published as the `kubernetes` Service endpoint; nothing here needs it.
      `--endpoint-reconciler-type=none`,
      `--secure-port=${apiPort}`,
      `--tls-cert-file=${files.servingCert}`,
      `--tls-private-key-file=${files.servingKey}`,
      `--client-ca-file=${files.caCert}`,
      `--authorization-mode=RBAC`,
      `--service-cluster-ip-range=10.0.0.0/24`,
      `--allow-privileged=true`,
      `--disable-admission-plugins=ServiceAccount`,
      `--service-account-issuer=${server}/`,
      `--service-account-key-file=${files.saPub}`,
      `--service-account-signing-key-file=${files.saKey}`,
      ...(opts.apiServerFlags ?? []),
    ];
    const tlsForProbe = { ca: ca.cert, cert: admin.cert, key: admin.key };

    const startApiServer = async () => {
      if (apiserver && apiserver.exitCode() === undefined) throw new Error('kube-apiserver is already running');
      apiserver = startProcess('kube-apiserver', assets.kubeApiServer, apiArgs, apiLog);
      const proc = apiserver;
      const deadline = Date.now() + timeoutMs;
      await waitFor('kube-apiserver /readyz', proc, apiLog, deadline, async () => {
        const r = await request(`${server}/readyz`, tlsForProbe);
        return r.status === 200;
      });
      // The "default" namespace is created by a controller after the server turns ready.
      await waitFor('namespace "default"', proc, apiLog, deadline, async () => {
        const r = await request(`${server}/api/v1/namespaces/default`, tlsForProbe);
        return r.status === 200;
      });
    };
    const stopApiServer = async () => {
      if (apiserver) await stopProcess(apiserver);
    };

    await startApiServer();

    const kubeconfigPath = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml(server, ca.cert, 'gardener-acl-test-admin', admin), { mode: 0o600 });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);

    const cp: ControlPlane = {
      server,
      kubeconfigPath,
      kubeConfig,
      etcdUrl,
      dir,
      ca,
      kubernetesVersion: assets.kubernetesVersion,
      startupMs: Date.now() - started,
      async kubeConfigForUser(user, groups = []) {
        const client = await issueClientCert(ca, user, groups);
        const kc = new KubeConfig();
        kc.loadFromString(kubeconfigYaml(server, ca.cert, user, client));
        return kc;
      },
      installCRDs: (dirOrFiles = DEFAULT_CRD_DIR) => installCRDs(kubeConfig, dirOrFiles, { timeoutMs }),
      stopApiServer,
      startApiServer,
      async restartApiServer() {
        await stopApiServer();
        await startApiServer();
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        await cleanup();
      },
    };
    return cp;
  } catch (err) {
    stopped = true;
    const logs =
      keepTmp || !(err instanceof Error) ? '' : `\n(etcd log tail)\n${await tail(etcdLog, 15)}\n(kube-apiserver log tail)\n${await tail(apiLog, 15)}`;
    await cleanup().catch(() => undefined);
    if (err instanceof Error && logs && !err.message.includes('log tail')) err.message += logs;
    throw err;
  }
}

// ---------------------------------------------------------------------------
// CRDs
// ---------------------------------------------------------------------------

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

async function crdFiles(dirOrFiles: string | string[]): Promise<string[]> {
  if (Array.isArray(dirOrFiles)) return dirOrFiles;
  if ((await stat(dirOrFiles)).isFile()) return [dirOrFiles];
  const names = (await readdir(dirOrFiles)).filter((n) => /\.ya?ml$/.test(n)).sort();
  return names.map((n) => path.join(dirOrFiles, n));
}

/** Reads CRDs from YAML files, checking that client-node's model keeps every field. */
export async function loadCRDs(dirOrFiles: string | string[]): Promise<V1CustomResourceDefinition[]> {
  const out: V1CustomResourceDefinition[] = [];
  for (const file of await crdFiles(dirOrFiles)) {
    const docs = parseAllDocuments(await readFile(file, 'utf8'));
    for (const doc of docs) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const raw: unknown = doc.toJS();
      if (raw === null || raw === undefined) continue;
      if (!isRecord(raw) || raw.kind !== 'CustomResourceDefinition') continue;
      if (raw.apiVersion !== 'apiextensions.k8s.io/v1') {
        throw new Error(`${file}: only apiextensions.k8s.io/v1 CRDs are supported, got ${String(raw.apiVersion)}`);
      }
      const json = JSON.stringify(raw);
      const typed = loadYaml<V1CustomResourceDefinition>(json);
      // The typed API serializes through client-node's model; make sure nothing is lost on the way.
      const back: unknown = parseYaml(dumpYaml(typed));
      if (!isDeepStrictEqual(JSON.parse(JSON.stringify(back)), JSON.parse(json))) {
        throw new Error(`${file}: CRD ${typed.metadata?.name ?? '?'} does not survive client-node's model round trip`);
      }
      out.push(typed);
    }
  }
  if (out.length === 0) throw new Error(`no CustomResourceDefinition found in ${String(dirOrFiles)}`);
  return out;
}

/**
 * Creates (or replaces) every CRD found in `dirOrFiles` and waits until each is
 * Established with accepted names and listed by API discovery for every served
 * version. Returns the CRD names.
 */
export async function installCRDs(
  kc: KubeConfig,
  dirOrFiles: string | string[] = DEFAULT_CRD_DIR,
  opts: { timeoutMs?: number } = {},
): Promise<string[]> {
  const crds = await loadCRDs(dirOrFiles);
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);

  for (const crd of crds) {
    const name = crd.metadata?.name;
    if (!name) throw new Error('CRD without metadata.name');
    try {
      await api.createCustomResourceDefinition({ body: crd });
    } catch (err) {
      if (!(err instanceof ApiException) || err.code !== 409) throw err;
      const existing = await api.readCustomResourceDefinition({ name });
      const body: V1CustomResourceDefinition = {
        ...crd,
        metadata: { ...crd.metadata, resourceVersion: existing.metadata?.resourceVersion },
      };
      await api.replaceCustomResourceDefinition({ name, body });
    }
  }

  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    await waitFor(`CRD ${name} Established`, undefined, undefined, deadline, async () => {
      const cur = await api.readCustomResourceDefinition({ name });
      const cond = (t: string) => cur.status?.conditions?.some((c) => c.type === t && c.status === 'True') ?? false;
      return cond('Established') && cond('NamesAccepted');
    });
    for (const version of crd.spec.versions.filter((v) => v.served)) {
      await waitFor(`discovery of ${crd.spec.group}/${version.name} ${crd.spec.names.plural}`, undefined, undefined, deadline, async () => {
        const list = await custom.getAPIResources({ group: crd.spec.group, version: version.name });
        return list.resources.some((r) => r.name === crd.spec.names.plural);
      });
    }
  }
  return crds.map((c) => c.metadata?.name ?? '');
}
