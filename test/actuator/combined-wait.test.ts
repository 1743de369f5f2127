// When a shoot parked on the combined CONNECT filters is woken: the real combined syncer reads a
// store that the default form's write plan filled (the chart's defaults), one shoot staying and
// one going. A shoot going away waits for the stored filters to drop it; asked whether they
// protect it (as before this test), it was never woken and came back only by its doubling retry
// backoff: under CI load six deletions then took over 150 s instead of one sync.
import { describe, expect, it } from 'vitest';
import type { ClusterClient } from '../../src/actuator/cluster-client.js';
import { CombinedSyncer, planCombinedWrites } from '../../src/actuator/combined-syncer.js';
import { combinedWaitOver } from '../../src/actuator/combined-wait.js';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import type { AppliedAcl } from '../../src/gardener/applied-state.js';
import type { Extension } from '../../src/gardener/objects.js';
import { testLogger } from '../kube/kube-test-helpers.js';
import { DEFAULT_GATEWAY, ZONAL_GATEWAY, cidr, rule } from '../support/test-seed.js';
import { replayPlan, type Store } from '../support/write-plan-replay.js';

const operator = defaultOperatorConfig();
const GATEWAYS = [DEFAULT_GATEWAY, ZONAL_GATEWAY];

const acl = (i: number): AppliedAcl => ({ technicalID: `shoot--wait--s${i}`, rule: rule('ALLOW', 'remote_ip', [`203.0.${i}.0/24`]), alwaysAllowed: [cidr('10.250.0.0/16')], legacyProxyAllowed: [] });

function extension(shoot: AppliedAcl, going?: 'deleted' | 'migrating'): Extension {
  return {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: {
      name: 'acl',
      namespace: shoot.technicalID,
      ...(going === 'deleted' ? { deletionTimestamp: '2026-12-04T00:00:00Z', finalizers: ['extensions.gardener.cloud/acl'] } : {}),
      ...(going === 'migrating' ? { annotations: { 'gardener.cloud/operation': 'migrate' } } : {}),
    },
    spec: { type: 'acl' },
    status: { state: { applied: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [`203.0.${shoot.technicalID.slice(-1)}.0/24`], mode: 'enforce' }, alwaysAllowed: ['10.250.0.0/16'], legacyProxyAllowed: [] } } },
  } as unknown as Extension;
}

const noWrites: ClusterClient = new Proxy({} as ClusterClient, {
  get: () => () => Promise.reject(new Error('reading the stored filters writes nothing')),
});

describe('a shoot parked on the combined filters is woken when what it waits for is stored', () => {
  const [staying, going] = [acl(1), acl(2)];
  const store: Store = new Map();
  let extensions: Extension[] = [];
  const syncer = new CombinedSyncer({
    client: noWrites,
    operator,
    extensions: () => extensions,
    gateways: () => GATEWAYS,
    existing: () => [...store.values()],
    cachesSynced: () => true,
    logger: testLogger(),
  });
  const storeFor = (shoots: readonly AppliedAcl[]) => replayPlan(store, planCombinedWrites({ operator, gateways: GATEWAYS, shoots, stored: [...store.values()] }), () => []);

  it.each(['deleted', 'migrating'] as const)('a %s shoot: not while the stored filters hold it, at once when they no longer do', (how) => {
    store.clear();
    storeFor([staying, going]);
    extensions = [extension(staying), extension(going, how)];
    expect(combinedWaitOver(extension(going, how), syncer)).toBe(false);
    expect(combinedWaitOver(extension(staying), syncer)).toBe(true);
    storeFor([staying]);
    expect(syncer.holds(going.technicalID)).toBe(false);
    expect(combinedWaitOver(extension(going, how), syncer)).toBe(true);
  });

  it('a shoot that stays: not while the stored filters lack its recorded ACL, at once when they hold it', () => {
    store.clear();
    storeFor([staying]);
    const newcomer = acl(3);
    extensions = [extension(staying), extension(newcomer)];
    expect(combinedWaitOver(extension(newcomer), syncer)).toBe(false);
    storeFor([staying, newcomer]);
    expect(combinedWaitOver(extension(newcomer), syncer)).toBe(true);
    expect(combinedWaitOver(undefined, syncer)).toBe(true);
  });
});
