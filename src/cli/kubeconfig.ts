import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

/** A kubeconfig that cannot be used, said in one line with the fix (no stack). */
export class KubeConfigProblem extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeConfigProblem';
  }
}

const FIX = 'give a kubeconfig with --kubeconfig or $KUBECONFIG (or run in a cluster, with its ServiceAccount)';

/**
 * `--kubeconfig`, else $KUBECONFIG, else the in-cluster ServiceAccount when running in a Pod,
 * else ~/.kube/config, as kubectl would. Throws KubeConfigProblem when none is usable: a missing
 * or unreadable file, YAML that does not parse, or no current cluster (an empty file, `{}`).
 */
export function loadKubeConfig(file: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  const inCluster = process.env.KUBERNETES_SERVICE_HOST !== undefined && process.env.KUBERNETES_SERVICE_PORT !== undefined;
  const home = path.join(homedir(), '.kube', 'config');
  const chosen = file ?? process.env.KUBECONFIG ?? (inCluster ? undefined : existsSync(home) ? home : undefined);
  if (chosen === undefined) {
    if (!inCluster) throw new KubeConfigProblem(`no kubeconfig: not in a cluster, and neither --kubeconfig, $KUBECONFIG nor ${home} is there; ${FIX}`);
    kubeConfig.loadFromCluster();
    return kubeConfig;
  }
  try {
    kubeConfig.loadFromFile(chosen);
  } catch (error) {
    const reason = error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
    throw new KubeConfigProblem(`kubeconfig ${chosen}: ${reason}; ${FIX}`);
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster?.server) {
    const context = kubeConfig.getCurrentContext();
    throw new KubeConfigProblem(`kubeconfig ${chosen}: its current context ${context ? JSON.stringify(context) : '(none)'} names no cluster with a server; ${FIX}`);
  }
  return kubeConfig;
}
