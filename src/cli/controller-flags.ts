// The flags of `gardener-acl controller`: the parser, the schema and the usage text read them here.
import { z } from 'zod';
import { CONTROLLER_DEFAULTS } from '../actuator/controller-defaults.js';
import { durationMs } from './duration.js';
import type { FlagTable } from './flag-table.js';
import { LOG_LEVEL_FLAG, boundedInt, controllerUsername, httpsUrl, portNumber } from './common-flags.js';
import { LAGGING_CACHE_MS, STUCK_CACHE_MS } from './probe-thresholds.js';
import { serviceRef } from './service-ref.js';

const CERTIFICATES = 'Seed webhook certificates (the leader keeps them; off unless the namespace is given)';

export const CONTROLLER_FLAGS = {
  kubeconfig: { value: 'PATH', defaultText: '$KUBECONFIG, else in-cluster', help: 'kubeconfig', schema: z.string().optional() },
  config: { value: 'PATH', defaultText: 'built-in defaults', help: 'OperatorConfiguration YAML', schema: z.string().optional() },
  'leader-elect': { value: 'true|false', default: 'true', help: 'Lease leader election', schema: z.enum(['true', 'false'], { error: 'must be true or false' }).transform((v) => v === 'true') },
  'leader-election-namespace': {
    value: 'NS',
    default: () => process.env.LEADER_ELECTION_NAMESPACE ?? 'garden',
    defaultText: '$LEADER_ELECTION_NAMESPACE or garden',
    help: "the Lease's namespace; the leader also renews Gardener's extension heartbeat Lease (gardener-extension-heartbeat) there",
    schema: z.string().min(1),
  },
  'leader-election-id': { value: 'NAME', default: 'gardener-acl-leader-election', help: 'name of the Lease', schema: z.string().min(1) },
  'lease-duration': { value: 'DURATION', default: '15s', help: 'leader election lease duration', schema: durationMs },
  'renew-deadline': { value: 'DURATION', default: '10s', help: 'leader gives up after failing to renew this long', schema: durationMs },
  'retry-period': { value: 'DURATION', default: '2s', help: 'leader election retry period', schema: durationMs },
  'probe-port': { value: 'PORT', default: '8080', help: '/healthz, /readyz, /metrics', schema: portNumber },
  'cache-unready-after': { value: 'DURATION', default: `${LAGGING_CACHE_MS / 1000}s`, help: '/readyz fails while a cache has had no open watch this long', schema: durationMs },
  'cache-unhealthy-after': {
    value: 'DURATION',
    default: `${STUCK_CACHE_MS / 60_000}m`,
    help: '/healthz fails (the kubelet restarts the container) when a cache has had no open watch this long',
    schema: durationMs,
  },
  workers: { value: 'N', default: String(CONTROLLER_DEFAULTS.workers), help: 'concurrent reconciles', schema: boundedInt(1, 100) },
  'resync-period': { value: 'DURATION', default: CONTROLLER_DEFAULTS.resyncPeriod, help: 'full resync', schema: durationMs },
  'combined-min-interval': {
    value: 'DURATION',
    default: CONTROLLER_DEFAULTS.combinedMinInterval,
    help: 'least time between two writes that change a CONNECT listener (rules and matcher forms: every write; ecds: its listener parts only); repairs never wait',
    schema: durationMs,
  },
  'served-check-interval': {
    value: 'DURATION',
    default: CONTROLLER_DEFAULTS.servedCheckInterval,
    help: "every gateway pod's Envoy is read this often (through a port-forward to its admin port 15000) to check each ACL shoot's protection is served, not only stored; 0s turns the check off (the status then says stored only)",
    schema: durationMs,
  },
  'served-check-max-read-mib': {
    value: 'N',
    default: String(CONTROLLER_DEFAULTS.servedCheckMaxReadMiB),
    help: 'largest read of one gateway pod (listeners and routes; a larger gateway is reported unchecked, not parsed); parsing takes about 2.3 times as much heap',
    schema: boundedInt(1, 4096, 'of MiB'),
  },
  'graceful-shutdown-timeout': { value: 'DURATION', default: '30s', help: 'on SIGTERM, wait this long for reconciles in flight before the lease is released', schema: durationMs },
  'log-level': LOG_LEVEL_FLAG,
  'no-seed-webhook': {
    help: 'the seed webhook is not installed: the leader deletes the MutatingWebhookConfiguration gardener-acl an earlier install in managed mode made (only one with the certificate manager\'s labels)',
    schema: z.boolean(),
  },
  'webhook-certificates-namespace': {
    value: 'NS',
    help: 'CA and serving certificate in Secrets gardener-acl-webhook-ca and gardener-acl-webhook-tls of NS (the webhook Pods mount the latter), renewed at 80 % of their lifetime; the caBundle of the MutatingWebhookConfiguration gardener-acl kept current',
    schema: z.string().min(1).optional(),
    group: CERTIFICATES,
  },
  'webhook-service': { value: 'NAME.NAMESPACE[:PORT]', help: "the webhook's Service (port 443 unless given)", schema: serviceRef.optional(), group: CERTIFICATES },
  'webhook-url': { value: 'URL', help: 'instead of --webhook-service: the URL the API server calls', schema: httpsUrl.optional(), group: CERTIFICATES },
  'webhook-config-owner': { value: 'CLUSTERROLE', help: 'owner of the configuration, so it goes with the installation', schema: z.string().min(1).optional(), group: CERTIFICATES },
  'webhook-timeout-seconds': { value: 'N', default: '10', help: 'timeoutSeconds of the registration, 1-30', schema: boundedInt(1, 30), group: CERTIFICATES },
  'controller-username': { value: 'USER', help: "this controller's user; its writes of combined filters skip the webhook", schema: controllerUsername, group: CERTIFICATES },
  'webhook-ca-validity': { value: 'DURATION', default: '30d', help: 'lifetime of the CA', schema: durationMs, group: CERTIFICATES },
  'webhook-cert-validity': { value: 'DURATION', default: '30d', help: 'lifetime of the serving certificate', schema: durationMs, group: CERTIFICATES },
} as const satisfies FlagTable;
