// Whether a webhook server can answer yet. A fail-closed registration that points at no running
// server refuses every write it covers, so the certificate manager registers a webhook only once
// its backend answers (certificate-manager.ts); an existing registration stays either way (failing
// open would let writes through without their ACL).
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { listAll } from '../kube/list-watch.js';

const endpointSliceSchema = z.looseObject({
  endpoints: z.array(z.looseObject({ conditions: z.looseObject({ ready: z.boolean().nullish() }).optional() })).nullish(),
});

/**
 * The Service has a ready endpoint in its EndpointSlices (`ready` unset counts as ready, as the
 * API documents): a webhook Pod passed its readiness probe, so the API server's call reaches one.
 */
export async function serviceHasReadyEndpoint(kubeConfig: KubeConfig, namespace: string, service: string): Promise<boolean> {
  const { items } = await listAll(kubeConfig, `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/endpointslices`, {
    labelSelector: `kubernetes.io/service-name=${service}`,
  });
  return items.some((item) => (endpointSliceSchema.safeParse(item).data?.endpoints ?? []).some((e) => e.conditions?.ready !== false));
}

/**
 * Something answers HTTPS at the webhook's URL (any HTTP status: the server is up and has a
 * certificate). Its certificate is not checked here: nothing is sent but a GET of the path.
 */
export function urlAnswers(url: string, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const request = https.get(url, { rejectUnauthorized: false, timeout: timeoutMs }, (response) => {
      response.resume();
      resolve(true);
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(false));
  });
}
