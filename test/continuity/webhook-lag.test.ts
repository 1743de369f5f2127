// The EnvoyFilter webhook with a lagging cache: its watches go half-open (the fault proxy in front
// of its API connection stalls them), so it keeps admitting Gardener's legacy apiserver-proxy
// filter with the ACL it saw last. The controller (direct to the API server) changes the shoot's
// ACL and nudges the filter; it must read back what the webhook admitted and not report
// Succeeded until the stored filter carries the new ACL. Meanwhile the stored filter always
// carries the old or the new ACL, never none; once the webhook's watchdog re-opens its watches
// the new ACL is stored and the Extension turns Succeeded.
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AclController } from '../../src/actuator/controller.js';
import { webhookConfigCommand } from '../../src/cli/webhook-command.js';
import { createObject, getObject, mergePatch, type ObjectRef } from '../../src/kube/objects-client.js';
import { InformerCacheSource } from '../../src/webhook/informer-cache-source.js';
import { storedEnvoyFilterUid } from '../../src/webhook/stored-filter-uid.js';
import { DEFAULT_GW, allowRule, createSeed, startTestController, technicalID, type ShootFixture } from '../actuator/seed-fixture.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, sleep, startWithCRDs, testLogger } from '../kube/kube-test-helpers.js';
import { startApiFaultProxy, type ApiFaultProxy } from '../support/api-fault-proxy.js';
import { legacyFilter, startTestWebhook, type TestWebhook } from '../webhook/webhook-fixtures.js';
import { startResourceManager, type ResourceManager } from '../support/gardener-resource-manager.js';

const A: ShootFixture = { project: 'lag', name: 'a', providerConfig: allowRule('203.0.113.0/24') };
const WATCH_IDLE_MS = 8_000;
const extRef: ObjectRef = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: technicalID(A) };
const filterRef: ObjectRef = { apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', name: technicalID(A), namespace: DEFAULT_GW.namespace };

describe('a webhook whose cache lags: Succeeded only once the legacy filter is stored with the new ACL', () => {
  let cp: ControlPlane;
  let grm: ResourceManager | undefined;
  let proxy: ApiFaultProxy;
  let cache: InformerCacheSource;
  let hook: TestWebhook;
  let controller: AclController;

  const storedFilter = async () => JSON.stringify((await getObject(cp.kubeConfig, filterRef))?.['spec'] ?? {});
  const extension = async () =>
    (await getObject(cp.kubeConfig, extRef)) as { metadata: { generation?: number }; status?: { lastOperation?: { state?: string }; observedGeneration?: number } } | undefined;
  /** Succeeded for the generation stored now (not the success of the ACL before the change). */
  const succeededNow = async () => {
    const e = await extension();
    return e?.status?.lastOperation?.state === 'Succeeded' && e.status.observedGeneration === e.metadata.generation;
  };

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await createSeed(cp.kubeConfig, [DEFAULT_GW], [A]);
    // Succeeded means applied: the real resource manager applies the per-shoot filters.
    grm = await startResourceManager(cp);
    proxy = await startApiFaultProxy(cp);
    cache = new InformerCacheSource(proxy.kubeConfigVia(cp.kubeConfig), testLogger(), { watchIdleTimeoutMs: WATCH_IDLE_MS });
    await cache.start();
    hook = await startTestWebhook(cache, { storedUid: storedEnvoyFilterUid(proxy.kubeConfigVia(cp.kubeConfig)) });
    const caFile = path.join(hook.certDir, 'ca.crt');
    await writeFile(caFile, hook.ca.cert);
    let yaml = '';
    // The in-process controller authenticates as the test admin: its combined-filter writes pass.
    const code = await webhookConfigCommand(['--webhooks', 'envoyfilter', '--url', hook.url, '--ca-bundle-file', caFile, '--timeout-seconds', '5', '--controller-user', 'gardener-acl-test-admin'], {
      stdout: (t) => (yaml += t),
      stderr: (t) => (yaml += t),
    });
    expect(code, yaml).toBe(0);
    for (const doc of parseAllDocuments(yaml)) await createObject(cp.kubeConfig, doc.toJSON() as never);
    controller = await startTestController(cp.kubeConfig);
    await eventually('A Succeeded', async () => (await extension())?.status?.lastOperation?.state === 'Succeeded', 60_000);
    // Gardener's legacy filter, admitted with A's ACL (the webhook registration takes a moment).
    await eventually('legacy filter admitted with the ACL', async () => {
      await createObject(cp.kubeConfig, legacyFilter(technicalID(A), DEFAULT_GW.namespace) as never, { ignoreAlreadyExists: true });
      await mergePatch(cp.kubeConfig, filterRef, {});
      return (await storedFilter()).includes('203.0.113.0');
    }, 30_000);
  }, 180_000);

  afterAll(async () => {
    await controller?.stop();
    await hook?.stop();
    await cache?.stop();
    await proxy?.close();
    await grm?.stop();
    await cp?.stop();
  });

  it('the webhook’s watches stall; an ACL change stays Processing while the webhook admits the old ACL, and Succeeds once it caught up', async () => {
    proxy.setMode({ kind: 'stall-watches' });
    await sleep(500);
    await mergePatch(cp.kubeConfig, extRef, { metadata: { annotations: { 'gardener.cloud/operation': 'reconcile' } }, spec: { providerConfig: allowRule('198.18.0.0/15') } });
    const seen: string[] = [];
    const succeeded: boolean[] = [];
    const started = Date.now();
    // While the webhook cannot see the change, the filter keeps the old ACL and the Extension does not claim success.
    while (Date.now() - started < WATCH_IDLE_MS - 2_000) {
      const spec = await storedFilter();
      seen.push(spec.includes('198.18.0.0') ? 'new' : spec.includes('203.0.113.0') ? 'old' : 'none');
      succeeded.push(await succeededNow());
      await sleep(200);
    }
    expect(seen.filter((s) => s !== 'old'), 'stored legacy filter while the webhook lags').toEqual([]);
    expect(succeeded.filter(Boolean), 'Succeeded for the new generation while the webhook lags').toEqual([]);
    expect((await extension())?.status?.lastOperation?.state).toBe('Processing');
    proxy.setMode({ kind: 'forward' });
    // The watchdog re-opens the webhook's watches; the controller's retry then gets the new ACL admitted.
    await eventually('new ACL in the legacy filter', async () => (await storedFilter()).includes('198.18.0.0') && !(await storedFilter()).includes('203.0.113.0'), 60_000);
    await eventually('Succeeded', succeededNow, 60_000);
  }, 120_000);

  it('a legacy filter Gardener creates is stored refusing everyone (a create reveals no range), and the controller, which watches them, brings the ACL within seconds', async () => {
    const name = `${technicalID(A)}-apiserver-proxy`;
    const ref: ObjectRef = { ...filterRef, name };
    await createObject(cp.kubeConfig, legacyFilter(technicalID(A), DEFAULT_GW.namespace, name) as never);
    const createdAt = Date.now();
    const created = JSON.stringify((await getObject(cp.kubeConfig, ref))?.['spec'] ?? {});
    expect(created).toContain('"principals":[{"any":true}]');
    expect(created).not.toContain('198.18.0.0');
    await eventually('the controller brought the ACL', async () => JSON.stringify((await getObject(cp.kubeConfig, ref))?.['spec'] ?? {}).includes('198.18.0.0'), 10_000);
    console.log(`[webhook] a created legacy filter carried the ACL ${Date.now() - createdAt} ms after the create`);
  });
});
