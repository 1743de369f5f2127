// The flags of `gardener-acl webhook` and `gardener-acl webhook-config`: the parser, the schema
// and the usage text read them here.
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { durationMs } from './duration.js';
import type { FlagTable } from './flag-table.js';
import { LOG_LEVEL_FLAG, boundedInt, controllerUsername, httpsUrl, portFrom, portNumber } from './common-flags.js';
import { serviceRef } from './service-ref.js';

export const WEBHOOK_NAMES = ['envoyfilter', 'shoot', 'garden'] as const;
/** The seed's and the virtual garden's; the Garden webhook (runtime cluster) is asked for by name. */
const DEFAULT_WEBHOOKS = 'envoyfilter,shoot';

const webhookList = z
  .string()
  .transform((s) => s.split(',').map((w) => w.trim()).filter(Boolean))
  .pipe(z.array(z.enum(WEBHOOK_NAMES, { error: `each webhook must be one of ${WEBHOOK_NAMES.join(', ')}` })).min(1));

const MANAGED = 'Certificates managed in-process (e.g. the garden admission; every replica may run it)';

export const WEBHOOK_FLAGS = {
  webhooks: { value: 'LIST', default: DEFAULT_WEBHOOKS, help: 'envoyfilter,shoot,garden; envoyfilter needs seed access, garden (Gardens of the runtime cluster) is registered in the cluster of --kubeconfig', schema: webhookList },
  kubeconfig: { value: 'PATH', defaultText: '$KUBECONFIG, else in-cluster', help: 'seed kubeconfig for the caches', schema: z.string().optional() },
  config: { value: 'PATH', defaultText: 'built-in defaults', help: 'OperatorConfiguration YAML', schema: z.string().optional() },
  host: { value: 'ADDRESS', default: '0.0.0.0', help: 'listen address', schema: z.string().min(1) },
  port: { value: 'PORT', default: '9443', help: 'HTTPS port', schema: portNumber },
  'cert-dir': {
    value: 'DIR',
    default: () => path.join(tmpdir(), 'k8s-webhook-server', 'serving-certs'),
    defaultText: '$TMPDIR/k8s-webhook-server/serving-certs',
    help: 'tls.crt and tls.key, reloaded on change',
    schema: z.string().min(1),
  },
  'cert-poll-interval': { value: 'DURATION', default: '10s', help: 'also re-read the pair this often', schema: durationMs },
  'self-signed': { help: 'generate a CA and serving certificate instead of reading --cert-dir', schema: z.boolean() },
  service: { value: 'NAME.NAMESPACE', help: 'Service the API server calls (SANs of the self-signed certificate)', schema: serviceRef.optional() },
  'ca-out': { value: 'PATH', help: 'write the self-signed CA (the caBundle) to PATH', schema: z.string().optional() },
  'probe-port': { value: 'PORT', default: '8081', help: 'plain HTTP /healthz, /readyz, /metrics', schema: portNumber },
  'shutdown-delay': {
    value: 'DURATION',
    default: '10s',
    help: 'on SIGTERM, answer /readyz 503 and keep serving this long before the listener closes, so the endpoint is unpublished while requests still succeed (keep it below terminationGracePeriodSeconds)',
    schema: durationMs,
  },
  'controller-username': {
    value: 'USER',
    help: "the controller's authenticated user (e.g. system:serviceaccount:garden:gardener-acl); its writes of combined filters pass unchanged, everyone else's are refused",
    schema: controllerUsername,
  },
  'log-level': LOG_LEVEL_FLAG,
  'certificates-namespace': {
    value: 'NS',
    help: 'CA and serving certificate in Secrets NAME-ca and NAME-tls of NS (the --kubeconfig cluster), renewed at 80 % of their lifetime; the stored pair is written into --cert-dir; the webhook configurations (named gardener-acl) are created with a current caBundle',
    schema: z.string().min(1).optional(),
    group: MANAGED,
  },
  'certificates-name': {
    value: 'NAME',
    default: 'gardener-acl-admission',
    help: 'prefix of the two Secrets',
    schema: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,58}[a-z0-9])?$/, { error: 'must be a DNS label of at most 60 characters' }),
    group: MANAGED,
  },
  'register-url': { value: 'URL', help: 'the URL the API server calls (instead of --service)', schema: httpsUrl.optional(), group: MANAGED },
  'webhook-config-kubeconfig': {
    value: 'PATH',
    defaultText: '$GARDEN_KUBECONFIG, which gardener-operator injects, else --kubeconfig',
    help: 'the API server whose configurations these are',
    schema: z.string().min(1).optional(),
    group: MANAGED,
  },
  'webhook-config-owner': { value: 'CLUSTERROLE', help: 'owner of the configurations there, so they go with the installation', schema: z.string().min(1).optional(), group: MANAGED },
  'garden-service': {
    value: 'NAME.NAMESPACE[:PORT]',
    help: "the Service the runtime cluster's API server calls for the Garden webhook (port 443 unless given; default --service, else --register-url)",
    schema: serviceRef.optional(),
    group: MANAGED,
  },
  'garden-webhook-config-owner': {
    value: 'CLUSTERROLE',
    defaultText: '--webhook-config-owner',
    help: 'owner of gardener-acl-garden in the runtime cluster, so it goes with the installation there',
    schema: z.string().min(1).optional(),
    group: MANAGED,
  },
  'timeout-seconds': { value: 'N', default: '10', help: 'timeoutSeconds of the registrations, 1-30', schema: boundedInt(1, 30), group: MANAGED },
  'ca-validity': { value: 'DURATION', default: '30d', help: 'lifetime of the CA', schema: durationMs, group: MANAGED },
  'cert-validity': { value: 'DURATION', default: '30d', help: 'lifetime of the serving certificate', schema: durationMs, group: MANAGED },
} as const satisfies FlagTable;

export const WEBHOOK_CONFIG_FLAGS = {
  url: { value: 'URL', help: 'the URL the API server calls', schema: httpsUrl.optional() },
  service: { value: 'NAME.NAMESPACE[:PORT]', help: 'instead of --url: the Service the API server calls (port 443 unless given)', schema: serviceRef.optional() },
  'ca-bundle-file': { value: 'PATH', help: 'PEM of the CA that signed the serving certificate (required)', schema: z.string({ error: 'is required' }).min(1) },
  webhooks: { value: 'LIST', default: DEFAULT_WEBHOOKS, help: 'envoyfilter,shoot,garden', schema: webhookList },
  'timeout-seconds': { value: 'N', default: '10', help: 'timeoutSeconds, 1-30', schema: boundedInt(1, 30) },
  'controller-username': {
    value: 'NAME',
    help: "exempt this user's (the controller's) writes of combined filters (the name the other commands use; --controller-user is accepted too)",
    schema: controllerUsername,
  },
  'controller-user': { value: 'NAME', help: 'the same as --controller-username', schema: controllerUsername },
  'legacy-proxy-port': {
    value: 'N',
    default: '8443',
    help: "the legacy apiserver-proxy port whose Gardener filters the webhook patches (OperatorConfiguration legacyProxyPort)",
    schema: portFrom(1),
  },
} as const satisfies FlagTable;
