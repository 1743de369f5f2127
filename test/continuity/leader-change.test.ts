// One writer across leader changes, judged by the protection-continuity checker on a real
// kube-apiserver: two `gardener-acl controller` processes, each reaching the API server through
// its own fault proxy (so every request is attributed to its sender with its arrival time). The
// leader is stopped in the middle of a reconcile while the proxy holds its responses back (its
// writes take effect, it believes them still in flight): by SIGTERM (graceful: stop work, wait,
// release) and by SIGKILL (no release; the other waits the lease out). After each: no request of
// the old leader arrived after the new leader's first write, no stored state left an ACL shoot
// unprotected, and the new leader brings every shoot to its new ACL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { mergePatch } from '../../src/kube/objects-client.js';
import { DEFAULT_GW, allowRule, createSeed, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs } from '../kube/kube-test-helpers.js';
import { startApiFaultProxy, type ApiFaultProxy } from '../support/api-fault-proxy.js';
import { rule } from '../support/test-seed.js';
import { ContinuityChecker } from './checker.js';
import { cidrs, type ShootExpectation } from './protection-oracle.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Long enough that a renewal (GET and PUT, each answered late) still fits the renew deadline.
const LEASE = { duration: 6_000, renewDeadline: 4_000, retryPeriod: 500 };
const RESPONSE_DELAY_MS = 800;
const operator = defaultOperatorConfig();
const ALWAYS = ['10.250.0.0/16', '10.96.0.0/11', '10.180.0.0/16', '198.51.100.1/32'];
const SHOOTS: ShootFixture[] = Array.from({ length: 6 }, (_, i) => ({ project: 'lead', name: `s${i}`, providerConfig: allowRule(`203.0.${i}.0/24`) }));
type CidrOf = (i: number) => string;
/** Every shoot, protected by any of the ACLs given (an ACL change in flight has two). */
const expectations = (...acls: CidrOf[]): ShootExpectation[] =>
  SHOOTS.map((s, i) => ({ technicalID: technicalID(s), rules: acls.map((cidrOf) => rule('ALLOW', 'remote_ip', [cidrOf(i)])), alwaysAllowed: cidrs(ALWAYS), sniGateways: [DEFAULT_GW.namespace] }));
const INITIAL: CidrOf = (i) => `203.0.${i}.0/24`;
const SECOND: CidrOf = (i) => `198.18.${i}.0/24`;
const THIRD: CidrOf = (i) => `192.0.2.${i * 16}/28`;

interface Replica {
  readonly name: string;
  readonly child: ChildProcess;
  readonly proxy: ApiFaultProxy;
  readonly exited: Promise<number | null>;
  output(): string;
  leads(): boolean;
}

const isWrite = (method: string) => method !== 'GET';

describe('one writer across leader changes (two controller processes, real kube-apiserver)', () => {
  let cp: ControlPlane;
  let dir: string;
  let checker: ContinuityChecker;
  const replicas: Replica[] = [];

  async function startReplica(name: string): Promise<Replica> {
    const proxy = await startApiFaultProxy(cp);
    const kubeconfig = path.join(dir, `${name}.kubeconfig`);
    await writeFile(kubeconfig, proxy.kubeConfigVia(cp.kubeConfig).exportConfig());
    const child = spawn(
      process.execPath,
      [
        '--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller',
        '--kubeconfig', kubeconfig,
        '--leader-election-namespace', 'kube-system',
        '--lease-duration', `${LEASE.duration}ms`, '--renew-deadline', `${LEASE.renewDeadline}ms`, '--retry-period', `${LEASE.retryPeriod}ms`,
        '--probe-port', '0', '--graceful-shutdown-timeout', '20s',
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const lines: string[] = [];
    child.stdout?.on('data', (d: Buffer) => lines.push(d.toString()));
    child.stderr?.on('data', (d: Buffer) => lines.push(d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const replica: Replica = { name, child, proxy, exited, output: () => lines.join(''), leads: () => lines.join('').includes('became leader') };
    replicas.push(replica);
    return replica;
  }

  /** Every shoot protected exactly by `cidrOf`; from then on the checker holds them to it. */
  const protectedAs = async (what: string, cidrOf: CidrOf) => {
    const expected = expectations(cidrOf);
    await eventually(what, () => checker.currentGaps(expected).length === 0, 90_000).catch((error: Error) => {
      throw new Error(`${error.message}; gaps: ${checker.currentGaps(expected).slice(0, 3).join(' | ')}\n${replicas.map((r) => `${r.name}: ${r.output().slice(-1500)}`).join('\n')}`);
    });
    checker.expect(expected);
  };

  /** Every shoot's ACL from `from` to `to`; meanwhile either protects it, nothing less. */
  const changeEveryAcl = async (from: CidrOf, cidrOf: CidrOf) => {
    checker.expect(expectations(from, cidrOf));
    for (const [i, s] of SHOOTS.entries()) {
      await mergePatch(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) }, {
        metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
        spec: { providerConfig: allowRule(cidrOf(i)) },
      });
    }
  };

  /** Every request of `old` arrived before the first write of `next`. */
  const noOverlap = (old: Replica, next: Replica) => {
    const lastOld = Math.max(...old.proxy.requests.map((r) => r.at));
    const firstNextWrite = Math.min(...next.proxy.requests.filter((r) => isWrite(r.method)).map((r) => r.at));
    expect(Number.isFinite(firstNextWrite), `${next.name} wrote`).toBe(true);
    expect(lastOld, `${old.name}'s last request vs ${next.name}'s first write`).toBeLessThan(firstNextWrite);
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-leaders-'));
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], SHOOTS);
    checker = new ContinuityChecker(cp.kubeConfig, { gateways: [DEFAULT_GW.namespace], connectPorts: operator.protectedPorts, sniPort: operator.sniPort });
    await checker.start([]);
  }, 120_000);

  afterAll(async () => {
    for (const r of replicas) r.child.kill('SIGKILL');
    await checker?.stop();
    for (const r of replicas) await r.proxy.close();
    await cp?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('SIGTERM mid-reconcile with slow responses: the old leader finishes and releases before the new one writes; no gap', async () => {
    const a = await startReplica('a');
    await eventually('a leads', () => a.leads(), 60_000);
    checker.expect(expectations(INITIAL));
    await protectedAs('initial ACLs', INITIAL);
    const b = await startReplica('b');
    await sleep(1_000);
    expect(b.leads()).toBe(false);

    a.proxy.setMode({ kind: 'delay-responses', delayMs: RESPONSE_DELAY_MS });
    const changedAt = performance.now();
    await changeEveryAcl(INITIAL, SECOND);
    // Mid-reconcile: a has begun writing the new ACLs (its responses are held back).
    await eventually('a at work', () => a.proxy.requests.some((r) => isWrite(r.method) && r.path.includes('/managedresources') && r.at > changedAt), 30_000);
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    await eventually('b leads', () => b.leads(), 30_000);
    await protectedAs('new ACLs by b', SECOND);
    // a kept working after SIGTERM (its reconciles in flight finished) before it let go.
    expect(a.proxy.requests.filter((r) => isWrite(r.method) && r.at > changedAt).length).toBeGreaterThan(1);
    noOverlap(a, b);
    expect(checker.report().controllerGaps).toEqual([]);
  }, 240_000);

  it('SIGKILL mid-reconcile with slow responses: no release, the other waits the lease out; no write overlaps, no gap', async () => {
    const b = replicas.find((r) => r.name === 'b') as Replica;
    const c = await startReplica('c');
    await sleep(1_000);
    expect(c.leads()).toBe(false);

    b.proxy.setMode({ kind: 'delay-responses', delayMs: RESPONSE_DELAY_MS });
    const changedAt = performance.now();
    await changeEveryAcl(SECOND, THIRD);
    await eventually('b at work', () => b.proxy.requests.some((r) => isWrite(r.method) && r.path.includes('/managedresources') && r.at > changedAt), 30_000);
    const killedAt = performance.now();
    b.child.kill('SIGKILL');
    await eventually('c leads', () => c.leads(), 30_000);
    // It must wait out the lease b renewed last.
    const firstWrite = Math.min(...c.proxy.requests.filter((r) => isWrite(r.method)).map((r) => r.at));
    expect(firstWrite - killedAt).toBeGreaterThan(LEASE.duration - LEASE.renewDeadline);
    await protectedAs('new ACLs by c', THIRD);
    noOverlap(b, c);
    expect(checker.report().controllerGaps).toEqual([]);
  }, 240_000);
});
