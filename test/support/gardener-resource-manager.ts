// The real gardener-resource-manager (cmd/gardener-resource-manager of the gardener/gardener Go
// module, built by scripts/setup-gardener.sh) running against a test kube-apiserver: it applies
// the ManagedResources of class `seed`, reports their conditions, collects garbage and turns
// Service annotations into NetworkPolicies, exactly as on a seed. Only its configuration is ours.
import { accessSync, constants as fsConstants } from 'node:fs';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { stringify as stringifyYaml } from 'yaml';

import {
  getFreePort,
  issueServingCert,
  startProcess,
  processStopper,
  tail,
  waitFor,
  type ControlPlane,
  type ManagedProcess,
} from '../kube/control-plane.js';

/** Directory with the binaries of scripts/setup-gardener.sh; throws with the fix when missing. */
export function gardenerBin(name: 'gardener-resource-manager' | 'gardener-contract'): string {
  const dir = process.env.GARDENER_BIN;
  if (!dir) throw new Error(`GARDENER_BIN is not set; run: export GARDENER_BIN="$(bash scripts/setup-gardener.sh | tail -n 1)"`);
  const file = path.join(dir, name);
  try {
    accessSync(file, fsConstants.X_OK);
  } catch {
    throw new Error(`${file} is missing (GARDENER_BIN=${dir}); run: export GARDENER_BIN="$(bash scripts/setup-gardener.sh | tail -n 1)"`);
  }
  return file;
}

/** One of Gardener's CRDs, copied from the pinned module by scripts/setup-gardener.sh. */
export function gardenerCrdFile(name: 'autoscaling.k8s.io_verticalpodautoscalers.yaml' | 'operator.gardener.cloud_gardens.yaml'): string {
  return path.join(path.dirname(gardenerBin('gardener-resource-manager')), 'crds', name);
}

/** Gardener's CRD for VerticalPodAutoscalers. */
export function gardenerVpaCrdFile(): string {
  return gardenerCrdFile('autoscaling.k8s.io_verticalpodautoscalers.yaml');
}

export interface ResourceManagerOptions {
  /** How often each ManagedResource is applied again and its health checked (GRM's minimum is 15 s). */
  syncPeriod?: string;
  /** Garbage collector on, with this period (minimum 15 s); off when undefined. */
  garbageCollectorSyncPeriod?: string;
  /** Network-policy controller on, for namespaces matching these label selectors; off when undefined. */
  networkPolicyNamespaceSelectors?: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] }[];
  /** Its log level (default debug; a bench of thousands of ManagedResources wants info). */
  logLevel?: 'debug' | 'info' | 'error';
}

export interface ResourceManager {
  /** The resource manager's log (JSON lines). */
  logFile: string;
  /** Prometheus metrics of the running process. */
  metricsUrl: string;
  log(lines?: number): Promise<string>;
  stop(): Promise<void>;
}

export async function startResourceManager(cp: ControlPlane, opts: ResourceManagerOptions = {}): Promise<ResourceManager> {
  const binary = gardenerBin('gardener-resource-manager');
  const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-grm-'));
  const certDir = path.join(dir, 'tls');
  await mkdir(certDir);
  // GRM always starts its webhook server, even with no webhook enabled; it needs a serving pair.
  const serving = await issueServingCert(cp.ca, { commonName: 'gardener-resource-manager', ips: ['127.0.0.1'] });
  await writeFile(path.join(certDir, 'tls.crt'), serving.cert);
  await writeFile(path.join(certDir, 'tls.key'), serving.key, { mode: 0o600 });
  const [webhookPort, healthPort, metricsPort] = [await getFreePort(), await getFreePort(), await getFreePort()];
  const config = {
    apiVersion: 'resourcemanager.config.gardener.cloud/v1alpha1',
    kind: 'ResourceManagerConfiguration',
    sourceClientConnection: { kubeconfig: cp.kubeconfigPath, qps: 100, burst: 130 },
    // Source and target are the seed, as for the seed's own resource manager. Set explicitly: the
    // defaulted target connection has no kubeconfig, and the process would exit.
    targetClientConnection: { kubeconfig: cp.kubeconfigPath, qps: 100, burst: 130 },
    // One resource manager per test control plane: nothing to elect.
    leaderElection: { leaderElect: false },
    logLevel: opts.logLevel ?? 'debug',
    logFormat: 'json',
    server: {
      webhooks: { bindAddress: '127.0.0.1', port: webhookPort, tls: { serverCertDir: certDir } },
      healthProbes: { bindAddress: '127.0.0.1', port: healthPort },
      metrics: { bindAddress: '127.0.0.1', port: metricsPort },
    },
    controllers: {
      clusterID: '',
      resourceClass: 'seed',
      garbageCollector: { enabled: opts.garbageCollectorSyncPeriod !== undefined, syncPeriod: opts.garbageCollectorSyncPeriod ?? '1h' },
      health: { concurrentSyncs: 5, syncPeriod: opts.syncPeriod ?? '15s' },
      managedResource: { concurrentSyncs: 5, syncPeriod: opts.syncPeriod ?? '15s', managedByLabelValue: 'gardener' },
      networkPolicy: { enabled: opts.networkPolicyNamespaceSelectors !== undefined, namespaceSelectors: opts.networkPolicyNamespaceSelectors ?? [] },
    },
  };
  const configFile = path.join(dir, 'config.yaml');
  await writeFile(configFile, stringifyYaml(config));
  const logFile = path.join(dir, 'gardener-resource-manager.log');
  const proc: ManagedProcess = startProcess('gardener-resource-manager', binary, [`--config=${configFile}`], logFile);
  const stop = processStopper(proc, dir);
  try {
    await waitFor('gardener-resource-manager /readyz', proc, logFile, Date.now() + 60_000, async () => {
      const res = await fetch(`http://127.0.0.1:${healthPort}/readyz`);
      return res.status === 200;
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { logFile, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, log: (lines) => tail(logFile, lines), stop };
}
