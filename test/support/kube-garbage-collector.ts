// The real kube-controller-manager (cmd/kube-controller-manager of the pinned k8s.io/kubernetes,
// built by scripts/setup-kube.sh next to kube-apiserver) with its garbage collector only, against a
// test kube-apiserver: it deletes an object whose owners are gone, as on a seed. The tests that
// uninstall need it: the seed webhook's registration goes with the installation's ClusterRole.
import { accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { defaultAssetsDir, processStopper, startProcess, tail, waitFor, type ControlPlane, type ManagedProcess } from '../kube/control-plane.js';

export interface GarbageCollector {
  log(lines?: number): Promise<string>;
  stop(): Promise<void>;
}

function kubeControllerManagerBinary(): string {
  const dir = process.env.KUBE_ASSETS && process.env.KUBE_ASSETS.length > 0 ? process.env.KUBE_ASSETS : defaultAssetsDir();
  const file = path.join(dir, 'kube-controller-manager');
  try {
    accessSync(file, fsConstants.X_OK);
  } catch {
    throw new Error(`${file} is missing; build it with \`bash scripts/setup-kube.sh\` (prints the bin directory; export it as KUBE_ASSETS)`);
  }
  return file;
}

export async function startGarbageCollector(cp: ControlPlane): Promise<GarbageCollector> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-gc-'));
  const logFile = path.join(dir, 'kube-controller-manager.log');
  const proc: ManagedProcess = startProcess('kube-controller-manager', kubeControllerManagerBinary(), [
    `--kubeconfig=${cp.kubeconfigPath}`,
    `--authentication-kubeconfig=${cp.kubeconfigPath}`,
    `--authorization-kubeconfig=${cp.kubeconfigPath}`,
    '--controllers=garbagecollector',
    '--leader-elect=false',
    // Nothing scrapes or probes it here: readiness is read from its log.
    '--secure-port=0',
    `--cert-dir=${dir}`,
    '--v=2',
  ], logFile);
  const stop = processStopper(proc, dir);
  try {
    await waitFor('the garbage collector synced', proc, logFile, Date.now() + 90_000, async () => /all resource monitors have synced/.test(await readFile(logFile, 'utf8').catch(() => '')));
  } catch (err) {
    await stop();
    throw err;
  }
  return { log: (lines) => tail(logFile, lines), stop };
}
