import { KubeConfig } from '@kubernetes/client-node';

/** `--kubeconfig`, else $KUBECONFIG, else the in-cluster ServiceAccount. */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  const file = path ?? process.env.KUBECONFIG;
  if (file) kubeConfig.loadFromFile(file);
  else kubeConfig.loadFromCluster();
  return kubeConfig;
}
