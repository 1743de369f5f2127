// Shared by the rollout tests of the seed webhook and the garden admission.
import { connect } from 'node:tls';
import type { RunningContainer } from './chart-processes.js';

export const certsIn = (pem: string): string[] => pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];

/** The caBundle of a stored webhook configuration, as PEM certificates. */
export const bundleOf = (configuration: Record<string, unknown> | undefined): string[] =>
  certsIn(Buffer.from(((configuration?.['webhooks'] ?? []) as { clientConfig: { caBundle?: string } }[])[0]?.clientConfig.caBundle ?? '', 'base64').toString());

/** A Secret's value, decoded. */
export const secretValue = (secret: Record<string, unknown> | undefined, key: string): string =>
  Buffer.from(((secret?.['data'] ?? {}) as Record<string, string>)[key] ?? '', 'base64').toString();

/** The certificate a server presents (no verification: it is compared with what is stored). */
export function presented(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false, servername: 'gardener-acl' }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert.toString());
      else reject(new Error('no peer certificate'));
    });
    socket.on('error', reject);
  });
}

/** SIGTERM, then wait for the exit (the webhook drains for its --shutdown-delay first). */
export async function stopProcess(p: RunningContainer): Promise<void> {
  const exited = new Promise((resolve) => p.child.once('exit', resolve));
  p.child.kill('SIGTERM');
  await exited;
}
