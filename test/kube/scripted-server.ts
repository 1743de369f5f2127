// A plain-HTTP server on loopback that plays the API server in tests of the transport and the
// informer (scripted answers, faults on demand), and the KubeConfig that reaches it.
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/** Starts `server` on 127.0.0.1 (any free port) and returns a KubeConfig for it; `started` collects it for the caller's cleanup. */
export async function listenScripted(server: http.Server, started: http.Server[]): Promise<KubeConfig> {
  started.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'scripted', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'anyone' }],
    contexts: [{ name: 'scripted', cluster: 'scripted', user: 'anyone' }],
    currentContext: 'scripted',
  });
  return kubeConfig;
}
