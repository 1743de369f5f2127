// A shoot that fits no bucket of the default form is never reported Succeeded: its Extension
// shows the Error with the fix, one Warning Event tells the owner, and the operator's metric
// names it, on a real kube-apiserver. One bucket of 16 KiB here (another setting than the
// chart's: the boundary is what is tested, and this makes it a handful of shoots instead of
// thousands; the default's capacity is in test/rbac/ecds-capacity.test.ts). Raising the
// bucket count places it, and the report goes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { parseCidr, type Cidr } from '../../src/acl/cidr.js';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import type { AclController } from '../../src/actuator/controller.js';
import { combinedForm } from '../../src/actuator/combined-forms.js';
import { listAll } from '../../src/kube/list-watch.js';
import { getObject, type ObjectRef } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { rule } from '../support/test-seed.js';
import { DEFAULT_GW, allowRule, createSeed, startTestController, technicalID, type ShootFixture } from './seed-fixture.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const ONE_BUCKET: OperatorConfig = { ...defaultOperatorConfig(), ecdsBuckets: 1, maxObjectBytes: 16 * 1024 };
const cidrsOf = (i: number) => Array.from({ length: 20 }, (_, j) => `203.${i}.${j}.0/24`);
const SHOOTS: ShootFixture[] = Array.from({ length: 12 }, (_, i) => ({ project: 'cap', name: `s${String(i).padStart(2, '0')}`, providerConfig: allowRule(...cidrsOf(i)) }));
// What the fixtures give every shoot besides its rule (seed nodes and pods, shoot nodes, egress).
const ALWAYS = ['10.250.0.0/16', '10.96.0.0/11', '10.180.0.0/16', '198.51.100.1/32'].map((t) => (parseCidr(t) as { cidr: Cidr }).cidr);

/** The shoots the planner leaves out of one bucket, in the fixtures' order. */
function unplacedByPlanner(operator: OperatorConfig): string[] {
  const shoots = SHOOTS.map((s, i) => ({ technicalID: technicalID(s), rule: rule('ALLOW', 'remote_ip', cidrsOf(i)), alwaysAllowed: ALWAYS, legacyProxyAllowed: [] }));
  return [...combinedForm(operator).place(shoots, []).unplaced.keys()].sort();
}

describe('a shoot that fits no bucket (real kube-apiserver)', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  let controller: AclController | undefined;
  const registry = new Registry();
  const extRef = (id: string): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: id });
  const status = async (id: string) => ((await getObject(cp.kubeConfig, extRef(id))) as { status?: { lastOperation?: { state?: string }; lastError?: { description?: string } } } | undefined)?.status;

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], SHOOTS);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
  }, 120_000);
  afterAll(async () => {
    await controller?.stop();
    await grm?.stop();
    await cp?.stop();
  });

  it('the shoots past the boundary show Error with the fix, one ACLNotEnforced Event each and the metric; the others Succeeded', async () => {
    // Which shoots fit depends on the order their ACLs are recorded (a stored shoot keeps its place),
    // so the planner only says how many cannot.
    expect(unplacedByPlanner(ONE_BUCKET).length).toBeGreaterThan(0);
    controller = await startTestController(cp.kubeConfig, { operator: ONE_BUCKET, registry });
    const ids = SHOOTS.map(technicalID);
    const unplacedMessage = (id: string) =>
      new RegExp(`^the combined CONNECT filters do not protect this shoot as recorded on .*: ${id} needs \\d+ bytes in ECDS bucket 0 of 1, which other shoots fill up to the \\d+ bytes one object may hold; raise ecdsBuckets or maxObjectBytes in the OperatorConfiguration$`);
    const outcome = await eventually('every shoot Succeeded or reported unplaced', async () => {
      const statuses = await Promise.all(ids.map(async (id) => [id, await status(id)] as const));
      const succeeded = statuses.filter(([, s]) => s?.lastOperation?.state === 'Succeeded').map(([id]) => id);
      const reported = statuses.filter(([id, s]) => s?.lastOperation?.state === 'Error' && unplacedMessage(id).test(s.lastError?.description ?? '')).map(([id]) => id);
      return succeeded.length + reported.length === ids.length && { succeeded, reported };
    }, 120_000);
    expect(outcome.reported.length).toBeGreaterThan(0);
    expect(outcome.succeeded.length).toBeGreaterThan(0);
    const events = async () =>
      (await listAll(cp.kubeConfig, '/api/v1/events')).items
        .map((e) => e as { reason?: string; message?: string; involvedObject?: { namespace?: string } })
        .filter((e) => e.reason === 'ACLNotEnforced');
    await eventually('events', async () => new Set((await events()).map((e) => e.involvedObject?.namespace)).size === outcome.reported.length, 30_000);
    // Retried reconciles tell the owner once, not once per attempt; no Event for a placed shoot.
    for (const id of outcome.reported) {
      const own = (await events()).filter((e) => e.involvedObject?.namespace === id);
      expect(own).toHaveLength(1);
      expect(own[0]?.message).toContain(`${id} needs`);
      expect(own[0]?.message).toMatch(/the seed's operator can fix it$/);
    }
    for (const id of outcome.succeeded) expect((await events()).filter((e) => e.involvedObject?.namespace === id)).toEqual([]);
    const metric = await registry.getSingleMetricAsString('gardener_acl_combined_unplaced_shoots');
    for (const id of outcome.reported) expect(metric).toContain(`gardener_acl_combined_unplaced_shoots{shoot="${id}"} 1`);
    for (const id of outcome.succeeded) expect(metric).not.toContain(`shoot="${id}"`);
  }, 240_000);

  it('more buckets (the fix the message names): every shoot placed and Succeeded, the metric empty', async () => {
    await controller?.stop();
    const fixed: OperatorConfig = { ...ONE_BUCKET, ecdsBuckets: 8 };
    expect(unplacedByPlanner(fixed)).toEqual([]);
    const after = new Registry();
    controller = await startTestController(cp.kubeConfig, { operator: fixed, registry: after });
    await eventually('every shoot Succeeded', async () => (await Promise.all(SHOOTS.map((s) => status(technicalID(s))))).every((s) => s?.lastOperation?.state === 'Succeeded'), 120_000);
    expect(await after.getSingleMetricAsString('gardener_acl_combined_unplaced_shoots')).not.toContain('shoot=');
  }, 240_000);
});
