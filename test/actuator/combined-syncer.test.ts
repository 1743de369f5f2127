// The combined CONNECT filters against a real kube-apiserver, judged only by what the API server
// stores: foreign deletes and edits are repaired, a missing gateway Deployment removes nothing,
// growth never leaves a shoot out (checked after EVERY stored change, through a watch), and one
// oversized shoot neither stops the others nor loses its own stored protection. The controller
// runs the chart's defaults but for 16 KiB objects: an oversized shoot (point 5) then needs a few
// hundred egress ranges instead of thousands.

import type { PolicyEntry } from '../../src/rbac/filter-values.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import { storedCoverage, uncoveredPaths } from '../../src/actuator/combined-coverage.js';
import { appliedAcls } from '../../src/actuator/combined-syncer.js';
import { AclController } from '../../src/actuator/controller.js';

import { envoyFilterObjectSchema, extensionSchema, type EnvoyFilterObject } from '../../src/gardener/objects.js';
import { ResilientInformer } from '../../src/kube/informer.js';
import { listAll } from '../../src/kube/list-watch.js';
import { createObject, deleteObject, getObject, mergePatch, patchStatus, type ObjectRef } from '../../src/kube/objects-client.js';
import { combinedForm, storedEntriesAnyForm } from '../../src/actuator/combined-forms.js';
import { ecdsListenerObjectName, parseEcdsBucketObjectName } from '../../src/rbac/connect-matcher-ecds.js';
import { jsonEqual } from '../../src/rbac/deep-equal.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs, testLogger } from '../kube/kube-test-helpers.js';
import { DEFAULT_GW, ZONAL_GW, allowRule, createSeed, gatewayObjects, technicalID, type ShootFixture, startTestController } from './seed-fixture.js';

const ENVOY_FILTERS = '/apis/networking.istio.io/v1alpha3/envoyfilters';
const CONNECT_SELECTOR = 'acl.gardener.cloud/role=connect';
const GATEWAYS = [DEFAULT_GW.namespace, ZONAL_GW.namespace];
const operator: OperatorConfig = { ...defaultOperatorConfig(), maxObjectBytes: 16 * 1024 };
const PORTS = operator.protectedPorts;
const FORM = combinedForm(operator);

const shoot = (i: number): ShootFixture => ({ project: 'grow', name: `s${String(i).padStart(2, '0')}`, providerConfig: allowRule(`203.0.${i}.0/24`) });
const BASE = Array.from({ length: 20 }, (_, i) => shoot(i));
const GROWTH = Array.from({ length: 6 }, (_, i) => shoot(20 + i));

const extRef = (s: ShootFixture): ObjectRef => ({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(s) });
const filterRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name, namespace });
const deploymentRef = (namespace: string): ObjectRef => ({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'istio-ingressgateway', namespace });

describe('combined CONNECT filters on a real kube-apiserver', () => {
  let cp: ControlPlane;
  let controller: AclController;

  const stored = async (): Promise<EnvoyFilterObject[]> =>
    (await listAll(cp.kubeConfig, ENVOY_FILTERS, { labelSelector: CONNECT_SELECTOR })).items.flatMap((raw) => envoyFilterObjectSchema.safeParse(raw).data ?? []);
  /** The policy every shoot with a recorded ACL must have in the stored filters. */
  const expectedPolicies = async (): Promise<Map<string, PolicyEntry<unknown>>> => {
    const extensions = (await listAll(cp.kubeConfig, '/apis/extensions.gardener.cloud/v1alpha1/extensions')).items.flatMap((raw) => extensionSchema.safeParse(raw).data ?? []);
    return new Map(appliedAcls(extensions).map((acl) => [acl.technicalID, FORM.entry(acl)]));
  };
  const uncovered = (filters: readonly EnvoyFilterObject[], expected: ReadonlyMap<string, PolicyEntry<unknown>>): string[] => {
    const coverage = storedCoverage(filters, undefined, FORM);
    return [...expected].flatMap(([id, policy]) => uncoveredPaths(coverage, id, policy, GATEWAYS, PORTS).map((path) => `${id} on ${path}`));
  };
  const settled = async (what: string) => {
    await eventually(what, async () => {
      if (!controller.idle()) return false;
      await sleep(500);
      return controller.idle();
    }, 60_000);
  };
  /** Every shoot with a recorded ACL is protected as stored on every gateway and port. */
  const allCovered = (what: string, ids?: readonly string[]) =>
    eventually(what, async () => {
      const expected = await expectedPolicies();
      if (ids && !ids.every((id) => expected.has(id))) return false;
      return uncovered(await stored(), expected).length === 0;
    }, 60_000);
  /** The combined objects of a gateway: the default form's are fixed (listener parts and every bucket), whatever the shoots. */
  const objectNames = async (namespace: string) =>
    (await stored()).filter((f) => f.metadata.namespace === namespace).map((f) => f.metadata.name).sort();

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW, ZONAL_GW], BASE);
    controller = await startTestController(cp.kubeConfig, { operator });
    await allCovered('20 shoots protected', BASE.map(technicalID));
    await settled('initial convergence');
  }, 180_000);

  afterAll(async () => {
    await controller?.stop();
    await cp?.stop();
  });

  it('point 1: a combined object deleted, relabelled or edited by someone else is repaired from what is stored (a listener part and a bucket holding shoots)', async () => {
    const bucket = (await stored()).find((f) => f.metadata.namespace === DEFAULT_GW.namespace && parseEcdsBucketObjectName(f.metadata.name) !== undefined && storedEntriesAnyForm(f).size > 0);
    expect(bucket).toBeDefined();
    for (const name of [ecdsListenerObjectName(8132), bucket?.metadata.name ?? '']) {
      const original = await getObject(cp.kubeConfig, filterRef(DEFAULT_GW.namespace, name));
      expect(original, name).toBeDefined();
      const repaired = (what: string) =>
        eventually(`${name}: ${what}`, async () => {
          const now = await getObject(cp.kubeConfig, filterRef(DEFAULT_GW.namespace, name));
          const labels = (now?.['metadata'] as { labels?: Record<string, string> } | undefined)?.labels;
          return now !== undefined && labels?.['acl.gardener.cloud/role'] === 'connect' && jsonEqual(now['spec'], original?.['spec']);
        }, 30_000);

      await deleteObject(cp.kubeConfig, filterRef(DEFAULT_GW.namespace, name));
      await repaired('deleted object recreated');

      // Without our label the object leaves the controller's label-selected cache; it is applied again all the same.
      await mergePatch(cp.kubeConfig, filterRef(DEFAULT_GW.namespace, name), { metadata: { labels: { 'acl.gardener.cloud/role': null } } });
      await repaired('label restored');

      await mergePatch(cp.kubeConfig, filterRef(DEFAULT_GW.namespace, name), { spec: { configPatches: [] } });
      await repaired('emptied spec restored');

      // A foreign selector key would make the object select no gateway pod; server-side apply alone would keep it.
      await mergePatch(cp.kubeConfig, filterRef(DEFAULT_GW.namespace, name), { spec: { workloadSelector: { labels: { istio: 'elsewhere', extra: 'foreign' } } } });
      await repaired('workload selector restored');
    }
    await settled('after foreign writes');
    expect(uncovered(await stored(), await expectedPolicies())).toEqual([]);
  }, 180_000);

  it('point 2: a gateway Deployment that is deleted, recreated or relabelled keeps its combined filters, and they keep being updated', async () => {
    const zonalBefore = await objectNames(ZONAL_GW.namespace);
    expect(zonalBefore.length).toBeGreaterThan(0);

    await deleteObject(cp.kubeConfig, deploymentRef(ZONAL_GW.namespace));
    await eventually('Deployment gone', async () => (await getObject(cp.kubeConfig, deploymentRef(ZONAL_GW.namespace))) === undefined);
    await sleep(1_000);
    await settled('after Deployment delete');
    expect(await objectNames(ZONAL_GW.namespace)).toEqual(zonalBefore);
    expect(uncovered(await stored(), await expectedPolicies())).toEqual([]);

    // An ACL change while the Deployment is missing reaches that gateway's filters too.
    const changed = BASE[0] as ShootFixture;
    await mergePatch(cp.kubeConfig, extRef(changed), {
      metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } },
      spec: { providerConfig: allowRule('203.0.0.0/24', '2001:db8::/32') },
    });
    await eventually('changed ACL recorded', async () => {
      const ext = extensionSchema.safeParse(await getObject(cp.kubeConfig, extRef(changed))).data;
      return appliedAcls(ext ? [ext] : [])[0]?.rule.cidrs.length === 2;
    }, 30_000);
    await allCovered('changed ACL on every gateway, including the one without Deployment');

    for (const obj of gatewayObjects(ZONAL_GW)) await createObject(cp.kubeConfig, obj, { ignoreAlreadyExists: true });
    await sleep(1_000);
    await settled('after Deployment recreate');
    expect(uncovered(await stored(), await expectedPolicies())).toEqual([]);

    // Relabelled: it leaves the label-selected cache of gateway Deployments.
    await mergePatch(cp.kubeConfig, deploymentRef(ZONAL_GW.namespace), { metadata: { labels: { app: 'renamed' } } });
    await sleep(1_000);
    await settled('after relabel');
    expect(await objectNames(ZONAL_GW.namespace)).toEqual(zonalBefore);
    expect(uncovered(await stored(), await expectedPolicies())).toEqual([]);
    await mergePatch(cp.kubeConfig, deploymentRef(ZONAL_GW.namespace), { metadata: { labels: { app: 'istio-ingressgateway' } } });
    await settled('after label restored');
  }, 180_000);

  it('point 3: growing 20 -> 26 shoots and shrinking back never stores a state in which an ACL shoot is in no bucket, and adds or removes no object', async () => {
    await settled('before growth');
    const baseIDs = new Set(BASE.map(technicalID));
    const basePolicies = new Map([...(await expectedPolicies())].filter(([id]) => baseIDs.has(id)));
    expect(basePolicies.size).toBe(20);
    const objectsBefore = await objectNames(DEFAULT_GW.namespace);

    // Every stored change, in order, checked against every base shoot; a grown shoot, once protected, must stay so until it is deleted.
    const violations: string[] = [];
    const protectedGrowth = new Map<string, PolicyEntry<unknown>>();
    const deleting = new Set<string>();
    let recording = false;
    let states = 0;
    const recorder: ResilientInformer<EnvoyFilterObject> = new ResilientInformer<EnvoyFilterObject>({
      kubeConfig: cp.kubeConfig,
      path: ENVOY_FILTERS,
      labelSelector: CONNECT_SELECTOR,
      logger: testLogger(),
      parse: (raw) => envoyFilterObjectSchema.safeParse(raw).data,
      onChange: (event, obj) => {
        if (!recording) return;
        states++;
        const filters = recorder.list();
        const live = new Map([...basePolicies, ...[...protectedGrowth].filter(([id]) => !deleting.has(id))]);
        for (const gap of uncovered(filters, live)) violations.push(`after ${event} ${obj.metadata.namespace}/${obj.metadata.name} rv ${obj.metadata.resourceVersion}: ${gap}`);
      },
    });
    await recorder.start();
    recording = true;
    try {
      expect(uncovered(recorder.list(), basePolicies)).toEqual([]);
      await createSeed(cp.kubeConfig, [], GROWTH);
      const growthIDs = GROWTH.map(technicalID);
      await allCovered('26 shoots protected', growthIDs);
      for (const [id, policy] of await expectedPolicies()) if (growthIDs.includes(id)) protectedGrowth.set(id, policy);
      await settled('after growth');
      expect(await objectNames(DEFAULT_GW.namespace)).toEqual(objectsBefore);

      for (const s of GROWTH) {
        deleting.add(technicalID(s));
        await deleteObject(cp.kubeConfig, extRef(s));
      }
      // A precondition, not a measure: CI's full run shares the two cores with every other suite.
      // There all six once took over 150 s (2026-12-03): a deleted shoot waiting for the combined
      // filters to drop it was never woken when they did, only by its doubling retry backoff
      // (fixed and tested in combined-wait.test.ts); the wait stays generous.
      await eventually('the 6 grown shoots deleted', async () => (await Promise.all(GROWTH.map((s) => getObject(cp.kubeConfig, extRef(s))))).every((o) => o === undefined), 240_000);
      await settled('after shrink');
      expect(await objectNames(DEFAULT_GW.namespace)).toEqual(objectsBefore);
      await sleep(1_000);
    } finally {
      recording = false;
      await recorder.stop();
    }
    expect(states).toBeGreaterThan(10);
    expect(violations).toEqual([]);
  }, 420_000);

  it('point 5: a shoot too large for a shard keeps its stored policy while every other shoot stays protected and deletable', async () => {
    await settled('before oversized shoot');
    const big = BASE[1] as ShootFixture;
    const bigID = technicalID(big);
    const bigPolicy = (await expectedPolicies()).get(bigID) as PolicyEntry<unknown>;
    expect(bigPolicy).toBeDefined();

    // 200 egress ranges (each with its IPv4-mapped twin) make the policy larger than a 16 KiB object.
    const egress = Array.from({ length: 200 }, (_, i) => `198.18.${i}.7/32`);
    await patchStatus(cp.kubeConfig, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure', name: big.name, namespace: bigID }, { egressCIDRs: egress });
    await eventually('oversized ACL recorded', async () => {
      const ext = extensionSchema.safeParse(await getObject(cp.kubeConfig, extRef(big))).data;
      return (appliedAcls(ext ? [ext] : [])[0]?.alwaysAllowed.length ?? 0) > 200;
    }, 30_000);

    // Another shoot arrives and is protected everywhere.
    const late = shoot(40);
    await createSeed(cp.kubeConfig, [], [late]);
    await eventually('new shoot protected next to the oversized one', async () => {
      const expected = await expectedPolicies();
      expected.delete(bigID);
      return expected.has(technicalID(late)) && uncovered(await stored(), expected).length === 0;
    }, 60_000);
    await settled('after new shoot');
    // Its own status says so; it is not Succeeded while the stored filters do not hold its ACL.
    const bigStatus = extensionSchema.safeParse(await getObject(cp.kubeConfig, extRef(big))).data?.status as { lastOperation?: { state?: string }; lastError?: { description?: string } } | undefined;
    expect(bigStatus?.lastOperation?.state).toBe('Error');
    expect(bigStatus?.lastError?.description).toMatch(new RegExp(`^the combined CONNECT filters do not protect this shoot as recorded on .*: the combined CONNECT policy of ${bigID} needs \\d+ bytes, more than the \\d+ bytes one combined filter may hold`));
    // The oversized shoot keeps its old policy wherever it was stored.
    expect(uncovered(await stored(), new Map([[bigID, bigPolicy]]))).toEqual([]);

    // Deleting another ACL shoot still completes and removes only that shoot.
    const gone = BASE[19] as ShootFixture;
    await deleteObject(cp.kubeConfig, extRef(gone));
    // A precondition (see point 3): under CI's full load this once took over 60 s.
    await eventually(`${technicalID(gone)} deleted`, async () => (await getObject(cp.kubeConfig, extRef(gone))) === undefined, 150_000);
    await settled('after delete');
    const coverage = storedCoverage(await stored(), undefined, FORM);
    for (const namespace of GATEWAYS) for (const port of PORTS) expect(coverage.get(namespace)?.get(port)?.has(technicalID(gone))).toBe(false);
    expect(uncovered(await stored(), new Map([[bigID, bigPolicy]]))).toEqual([]);
  }, 300_000);
});
