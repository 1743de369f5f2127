// Two `gardener-acl controller` processes against one real API server: one leads and reconciles;
// when it is killed (no chance to release the Lease), the other takes over and keeps working.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getObject } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { DEFAULT_GW, allowRule, createSeed, technicalID, type ShootFixture } from './seed-fixture.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LEASE = { duration: 3_000, renewDeadline: 2_000, retryPeriod: 500 };

interface Replica {
  readonly child: ChildProcess;
  readonly lines: string[];
  leads(): boolean;
}

function startReplica(kubeconfig: string): Replica {
  const child = spawn(
    process.execPath,
    [
      '--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller',
      '--kubeconfig', kubeconfig,
      '--leader-election-namespace', 'kube-system',
      '--lease-duration', `${LEASE.duration}ms`,
      '--renew-deadline', `${LEASE.renewDeadline}ms`,
      '--retry-period', `${LEASE.retryPeriod}ms`,
      '--probe-port', '0',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: string[] = [];
  const collect = (chunk: Buffer): void => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return { child, lines, leads: () => lines.some((l) => l.includes('became leader')) };
}

const reconciled = (cp: ControlPlane, s: ShootFixture) =>
  eventually(`${technicalID(s)} reconciled`, async () => {
    const ext = (await getObject(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) })) as
      | { status?: { lastOperation?: { state?: string } } }
      | undefined;
    return ext?.status?.lastOperation?.state === 'Succeeded';
  }, 60_000);

describe('leader election between two controller processes (real API server)', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  const replicas: Replica[] = [];

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [{ project: 'p', name: 'a', providerConfig: allowRule('203.0.113.0/24') }]);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
  }, 120_000);

  afterAll(async () => {
    for (const r of replicas) r.child.kill('SIGKILL');
    await grm?.stop();
    await cp?.stop();
  });

  it('elects exactly one leader, and the other takes over when the leader is killed', async () => {
    replicas.push(startReplica(cp.kubeconfigPath), startReplica(cp.kubeconfigPath));
    await eventually('a leader', () => replicas.some((r) => r.leads()), 60_000);
    await reconciled(cp, { project: 'p', name: 'a' });
    expect(replicas.filter((r) => r.leads())).toHaveLength(1);

    const leader = replicas.find((r) => r.leads()) as Replica;
    const follower = replicas.find((r) => r !== leader) as Replica;
    const killedAt = Date.now();
    leader.child.kill('SIGKILL');
    await eventually('the follower takes over', () => follower.leads(), 30_000);
    const takeoverMs = Date.now() - killedAt;
    // It must wait out the lease it saw renewed last, and not much longer.
    expect(takeoverMs).toBeLessThan(LEASE.duration + 4 * LEASE.retryPeriod + 3_000);

    const B: ShootFixture = { project: 'p', name: 'b', providerConfig: allowRule('198.51.100.0/24') };
    await createSeed(cp.kubeConfig, [], [B]);
    await reconciled(cp, B);
  });
});
