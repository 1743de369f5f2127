// The flags of `gardener-acl garden-controller`: the runtime cluster's process that protects the
// virtual garden. Leader election, probes and caches as the seed controller's (same words).
import { z } from 'zod';
import { CONTROLLER_FLAGS } from './controller-flags.js';
import type { FlagTable } from './flag-table.js';

export const GARDEN_CONTROLLER_FLAGS = {
  kubeconfig: { ...CONTROLLER_FLAGS.kubeconfig, help: 'kubeconfig of the runtime cluster' },
  'virtual-garden-kubeconfig': {
    value: 'PATH',
    defaultText: '$GARDEN_KUBECONFIG, else none',
    help: "kubeconfig of the virtual garden, to read its ManagedSeeds and their Shoots in namespace garden (get, list, watch); without it no ACL is applied (a seed's gardenlet could be locked out) and the Extension says so",
    schema: z.string().min(1).optional(),
  },
  config: CONTROLLER_FLAGS.config,
  'leader-elect': CONTROLLER_FLAGS['leader-elect'],
  'leader-election-namespace': CONTROLLER_FLAGS['leader-election-namespace'],
  'leader-election-id': { ...CONTROLLER_FLAGS['leader-election-id'], default: 'gardener-acl-garden-leader-election' },
  'lease-duration': CONTROLLER_FLAGS['lease-duration'],
  'renew-deadline': CONTROLLER_FLAGS['renew-deadline'],
  'retry-period': CONTROLLER_FLAGS['retry-period'],
  'probe-port': CONTROLLER_FLAGS['probe-port'],
  'cache-unready-after': CONTROLLER_FLAGS['cache-unready-after'],
  'cache-unhealthy-after': CONTROLLER_FLAGS['cache-unhealthy-after'],
  'resync-period': CONTROLLER_FLAGS['resync-period'],
  'graceful-shutdown-timeout': CONTROLLER_FLAGS['graceful-shutdown-timeout'],
  'log-level': CONTROLLER_FLAGS['log-level'],
} as const satisfies FlagTable;
