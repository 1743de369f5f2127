import type { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { GardenController } from '../actuator/garden-controller.js';
import { KubeClusterClient } from '../actuator/kube-cluster-client.js';
import { LeaseFence } from '../kube/lease-fence.js';
import type { CommandIO } from './command-io.js';
import { flagsSchema } from './flag-table.js';
import { GARDEN_CONTROLLER_FLAGS } from './garden-controller-flags.js';
import { KubeConfigProblem, loadKubeConfig } from './kubeconfig.js';
import { controllerCommandInput, runLeaderProcess } from './leader-process.js';
import { GARDEN_CONTROLLER_USAGE } from './usage-texts.js';

export { GARDEN_CONTROLLER_USAGE };

const argsSchema = flagsSchema(GARDEN_CONTROLLER_FLAGS);

export async function gardenControllerCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const input = await controllerCommandInput(argv, io, GARDEN_CONTROLLER_USAGE, GARDEN_CONTROLLER_FLAGS, argsSchema);
  if ('exitCode' in input) return input.exitCode;
  const { a, operator } = input;
  const virtualGardenPath = a['virtual-garden-kubeconfig'] ?? (process.env['GARDEN_KUBECONFIG'] || undefined);
  let kubeConfig: KubeConfig;
  let virtualGarden: KubeConfig | undefined;
  try {
    kubeConfig = loadKubeConfig(a.kubeconfig);
    virtualGarden = virtualGardenPath === undefined ? undefined : loadKubeConfig(virtualGardenPath);
  } catch (error) {
    if (!(error instanceof KubeConfigProblem)) throw error;
    io.stderr(`${error.message}\n`);
    return 2;
  }
  const logger = pino({ level: a['log-level'], base: { component: 'gardener-acl-garden-controller' } });
  if (!virtualGarden) logger.warn('no virtual garden kubeconfig (--virtual-garden-kubeconfig or $GARDEN_KUBECONFIG): the ManagedSeeds cannot be read, so no garden ACL is applied');
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // With leader election every write passes the lease fence: none is sent (and those in flight
  // are aborted) once this replica may have lost the lease.
  const fence = a['leader-elect'] ? new LeaseFence(`${a['leader-election-namespace']}/${a['leader-election-id']}`) : undefined;
  const client = new KubeClusterClient(kubeConfig, { registry, ...(fence ? { fence } : {}) });
  const controller = new GardenController({
    kubeConfig,
    client,
    ...(virtualGarden ? { virtualGarden } : {}),
    operator: operator,
    logger,
    registry,
    resyncPeriodMs: a['resync-period'],
  });
  return runLeaderProcess({ settings: a, kubeConfig, logger, registry, fence, work: controller, syncedFields: { virtualGarden: virtualGarden !== undefined } });
}
