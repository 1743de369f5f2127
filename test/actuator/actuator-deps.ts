// An AclActuator for unit tests: the given client, operator settings and inventory; combined
// filters that always hold the shoot, and no-op hooks for everything else.
import type { OperatorConfig } from '../../src/config/operator-config.js';
import { AclActuator, type AclActuatorDeps } from '../../src/actuator/acl-actuator.js';
import type { ClusterClient } from '../../src/actuator/cluster-client.js';
import type { SeedInventory } from '../../src/gardener/seed-acl.js';
import { testLogger } from '../kube/kube-test-helpers.js';

export const EMPTY_INVENTORY: SeedInventory = { extensions: [], clusters: [], infrastructures: [], dnsRecords: [], gateways: [], deployments: [], services: [], configMaps: [] };

export function testActuator(
  client: ClusterClient,
  operator: OperatorConfig,
  inventory: SeedInventory = EMPTY_INVENTORY,
  tunnelHopMissing: (technicalID: string, generation: number) => readonly string[] = () => [],
  more: Partial<AclActuatorDeps> = {},
): AclActuator {
  return new AclActuator({
    client,
    operator,
    inventory: () => inventory,
    logger: testLogger(),
    combinedHolds: () => false,
    combinedChanged: () => undefined,
    combinedProtection: () => ({ uncovered: [], problem: undefined }),
    tunnelHopMissing,
    awaitCombined: () => undefined,
    warn: async () => undefined,
    ...more,
  });
}
