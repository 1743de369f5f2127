/**
 * ResilientInformer against a real kube-apiserver (list + watch, plain JSON from both paths,
 * recovery from an API server restart, a cut connection and a silent one, resync), and against a
 * scripted HTTP server for the exact protocol cases (410 relist, clean re-watch, bookmarks).
 */
import { readdirSync } from 'node:fs';
import http from 'node:http';
import { Writable } from 'node:stream';

import type { KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';

import { configMapSchema, extensionSchema, type Extension } from '../../src/gardener/objects.js';
import { ResilientInformer, type ChangeEvent, type ResilientInformerOptions } from '../../src/kube/informer.js';
import { createObject, deleteObject, getObject, mergePatch, patchStatus, refOf, serverSideApply } from '../../src/kube/objects-client.js';
import type { ControlPlane } from './control-plane.js';
import { eventually, extension, sleep, startWithCRDs, testLogger } from './kube-test-helpers.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { listenScripted } from './scripted-server.js';

const EXT_API = '/apis/extensions.gardener.cloud/v1alpha1';

function parseWith<S extends z.ZodType>(schema: S): (raw: unknown) => z.infer<S> | undefined {
  return (raw) => {
    const r = schema.safeParse(raw);
    return r.success ? r.data : undefined;
  };
}

interface Recorded {
  event: ChangeEvent;
  name: string;
  resourceVersion: string | undefined;
  oldResourceVersion: string | undefined;
}

/** Collects onChange calls. */
function recorder() {
  const events: Recorded[] = [];
  const onChange = (event: ChangeEvent, obj: Extension, old?: Extension) =>
    events.push({
      event,
      name: obj.metadata.name,
      resourceVersion: obj.metadata.resourceVersion,
      oldResourceVersion: old?.metadata.resourceVersion,
    });
  const of = (event: ChangeEvent) => events.filter((e) => e.event === event).map((e) => e.name);
  return { events, onChange, of };
}

/** A logger whose lines can be searched. */
function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

function extensionInformer(
  kubeConfig: KubeConfig,
  namespace: string,
  extra: Partial<ResilientInformerOptions<Extension>> = {},
): ResilientInformer<Extension> {
  return new ResilientInformer<Extension>({
    kubeConfig,
    path: `${EXT_API}/namespaces/${namespace}/extensions`,
    parse: parseWith(extensionSchema),
    logger: testLogger(),
    initialBackoffMs: 100,
    maxBackoffMs: 1_000,
    ...extra,
  });
}

describe('ResilientInformer against a real kube-apiserver', () => {
  let cp: ControlPlane;
  const informers: ResilientInformer<{ metadata: { name: string } }>[] = [];
  const track = <T extends { metadata: { name: string } }>(i: ResilientInformer<T>) => {
    informers.push(i as unknown as ResilientInformer<{ metadata: { name: string } }>);
    return i;
  };

  beforeAll(async () => {
    cp = await startWithCRDs(['inf-basic', 'inf-cut', 'inf-silent', 'inf-restart', 'inf-resync', 'inf-cm']);
  }, 120_000);

  afterEach(async () => {
    await Promise.all(informers.splice(0).map((i) => i.stop()));
  });

  afterAll(async () => {
    await cp?.stop();
  });

  it('lists, then reports watch events; list and watch objects are the same plain JSON', async () => {
    const ns = 'inf-basic';
    const kc = cp.kubeConfig;
    await serverSideApply(kc, extension(ns, 'a'), 'test');
    await serverSideApply(kc, extension(ns, 'b'), 'test');
    const rec = recorder();
    const informer = track(extensionInformer(kc, ns, { onChange: rec.onChange }));
    expect(informer.hasSynced()).toBe(false);
    await informer.start();
    expect(informer.hasSynced()).toBe(true);
    expect(rec.of('add').sort()).toEqual(['a', 'b']);
    expect(informer.list(ns).map((e) => e.metadata.name).sort()).toEqual(['a', 'b']);
    expect(informer.list('other')).toEqual([]);

    // A listed object equals what GET returns (strings, not Dates; apiVersion/kind present).
    const fromList = informer.get('a', ns);
    expect(fromList).toEqual(await getObject(kc, { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'a', namespace: ns }));
    expect(typeof fromList?.metadata.creationTimestamp).toBe('string');

    await serverSideApply(kc, extension(ns, 'c'), 'test');
    const fromWatch = await eventually('add of c', () => informer.get('c', ns));
    expect(fromWatch).toEqual(await getObject(kc, refOf(extension(ns, 'c'))));
    expect(Object.keys(fromWatch).sort()).toEqual(Object.keys(fromList ?? {}).sort());
    expect(Object.keys(fromWatch.metadata).sort()).toEqual(Object.keys(fromList?.metadata ?? {}).sort());

    const before = informer.get('a', ns)?.metadata.resourceVersion;
    await mergePatch(kc, refOf(extension(ns, 'a')), { spec: { providerConfig: { rule: { action: 'DENY' } } } });
    await eventually('update of a', () => rec.events.find((e) => e.event === 'update' && e.name === 'a'));
    const update = rec.events.find((e) => e.event === 'update' && e.name === 'a');
    expect(update?.oldResourceVersion).toBe(before);
    expect(update?.resourceVersion).not.toBe(before);

    await patchStatus(kc, refOf(extension(ns, 'b')), { observedGeneration: 1 });
    await eventually('status of b', () => informer.get('b', ns)?.status?.observedGeneration === 1);

    await deleteObject(kc, refOf(extension(ns, 'c')));
    await eventually('delete of c', () => rec.of('delete').includes('c'));
    expect(informer.get('c', ns)).toBeUndefined();
    expect(rec.of('add').sort()).toEqual(['a', 'b', 'c']);
  });

  it('fills apiVersion/kind of listed built-in objects, as watch events carry them', async () => {
    const ns = 'inf-cm';
    const kc = cp.kubeConfig;
    await createObject(kc, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'listed', namespace: ns }, data: { a: '1' } });
    const informer = track(
      new ResilientInformer({ kubeConfig: kc, path: `/api/v1/namespaces/${ns}/configmaps`, parse: parseWith(configMapSchema), logger: testLogger() }),
    );
    await informer.start();
    expect(informer.get('listed', ns)).toMatchObject({ apiVersion: 'v1', kind: 'ConfigMap', data: { a: '1' } });
    await createObject(kc, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'watched', namespace: ns } });
    const watched = await eventually('watched ConfigMap', () => informer.get('watched', ns));
    expect(watched).toMatchObject({ apiVersion: 'v1', kind: 'ConfigMap' });
  });

  describe('through a proxy that can take the network away', () => {
    let proxy: TcpProxy;
    beforeAll(async () => {
      proxy = await startTcpProxy(Number(new URL(cp.server).port));
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it('after a cut connection, reports what changed meanwhile: delete, update, add; no duplicate add', async () => {
      const ns = 'inf-cut';
      const kc = cp.kubeConfig;
      for (const name of ['keep', 'change', 'remove']) await serverSideApply(kc, extension(ns, name), 'test');
      const rec = recorder();
      const informer = track(extensionInformer(proxy.kubeConfigVia(kc), ns, { onChange: rec.onChange }));
      await informer.start();
      expect(rec.of('add').sort()).toEqual(['change', 'keep', 'remove']);

      proxy.setMode('refuse');
      await deleteObject(kc, refOf(extension(ns, 'remove')));
      await mergePatch(kc, refOf(extension(ns, 'change')), { metadata: { labels: { changed: 'yes' } } });
      await serverSideApply(kc, extension(ns, 'new'), 'test');
      await sleep(500); // the informer fails to reconnect meanwhile
      expect(rec.events).toHaveLength(3);
      proxy.setMode('forward');

      await eventually('all changes', () => rec.of('add').includes('new') && rec.of('delete').includes('remove') && rec.of('update').includes('change'));
      await sleep(300); // nothing else trickles in
      expect(rec.of('add').sort()).toEqual(['change', 'keep', 'new', 'remove']);
      expect(rec.of('update')).toEqual(['change']);
      expect(rec.of('delete')).toEqual(['remove']);
      expect(informer.list().map((e) => e.metadata.name).sort()).toEqual(['change', 'keep', 'new']);
    });

    it('a silent (half-open) watch is ended by the client-side watchdog and restarted', async () => {
      const ns = 'inf-silent';
      const kc = cp.kubeConfig;
      const { logger, lines } = capturingLogger();
      const rec = recorder();
      const informer = track(
        extensionInformer(proxy.kubeConfigVia(kc), ns, {
          onChange: rec.onChange,
          logger,
          watchTimeoutSeconds: 1,
          watchdogGraceMs: 500,
        }),
      );
      await informer.start();
      await sleep(1_500); // a server-side watch timeout passes: a clean re-watch, no error
      expect(lines.join('')).not.toMatch(/watch failed/);

      proxy.setMode('blackhole');
      await serverSideApply(kc, extension(ns, 'during-silence'), 'test');
      await eventually('watchdog', () => lines.some((l) => l.includes('nothing received for 1500 ms')), 5_000);
      expect(rec.events).toHaveLength(0);
      proxy.setMode('forward');
      await eventually('recovery', () => rec.of('add').includes('during-silence'), 5_000);
    });
  });

  it('recovers from an API server restart: sees objects created after it, no duplicate adds', async () => {
    const ns = 'inf-restart';
    const kc = cp.kubeConfig;
    for (const name of ['before-1', 'before-2']) await serverSideApply(kc, extension(ns, name), 'test');
    const rec = recorder();
    // kube-apiserver's graceful shutdown waits for open custom-resource watches (it stops
    // listening at once but exits only when they end, or at the harness's SIGKILL after 10 s);
    // a short server-side watch timeout keeps the restart quick.
    const informer = track(extensionInformer(kc, ns, { onChange: rec.onChange, watchTimeoutSeconds: 2 }));
    await informer.start();

    const started = Date.now();
    await cp.restartApiServer();
    const restartMs = Date.now() - started;
    // Right after the restart, while the informer is still reconnecting (backoff):
    await serverSideApply(kc, extension(ns, 'during-reconnect'), 'test');
    await deleteObject(kc, refOf(extension(ns, 'before-2')));
    await eventually('during-reconnect seen', () => informer.get('during-reconnect', ns), 10_000);
    const recoveredMs = Date.now() - started;
    await serverSideApply(kc, extension(ns, 'after'), 'test');
    await eventually('after seen', () => informer.get('after', ns), 5_000);
    await eventually('before-2 deleted', () => rec.of('delete').includes('before-2'), 5_000);

    expect(rec.of('add').sort()).toEqual(['after', 'before-1', 'before-2', 'during-reconnect']);
    expect(rec.of('delete')).toEqual(['before-2']);
    expect(rec.of('update')).toEqual([]);
    console.info(`informer: API server restart took ${restartMs} ms; informer caught up after ${recoveredMs} ms`);
  });

  it('re-watches after each server-side watch timeout from the last resourceVersion, without relists or socket leaks', async () => {
    const ns = 'inf-resync';
    const { logger, lines } = capturingLogger();
    const informer = track(extensionInformer(cp.kubeConfig, ns, { logger, watchTimeoutSeconds: 1 }));
    await informer.start();
    await sleep(1_100);
    const openFds = () => readdirSync('/proc/self/fd').length;
    const before = openFds();
    const watchesBefore = lines.filter((l) => l.includes('"msg":"watching"')).length;
    await sleep(2_300);
    const watches = lines.filter((l) => l.includes('"msg":"watching"')).length - watchesBefore;
    expect(watches).toBeGreaterThanOrEqual(2);
    expect(lines.filter((l) => l.includes('"msg":"listed"'))).toHaveLength(1);
    expect(lines.join('')).not.toMatch(/watch failed/);
    expect(openFds() - before).toBeLessThanOrEqual(2);
  });

  it('calls onResync with every cached object each resync period', async () => {
    const ns = 'inf-resync';
    const kc = cp.kubeConfig;
    for (const name of ['x', 'y']) await serverSideApply(kc, extension(ns, name), 'test');
    const resyncs: string[][] = [];
    const informer = track(
      extensionInformer(kc, ns, { resyncPeriodMs: 200, onResync: (objs) => resyncs.push(objs.map((o) => o.metadata.name).sort()) }),
    );
    await informer.start();
    await eventually('two resyncs', () => resyncs.length >= 2, 3_000);
    expect(resyncs[0]).toEqual(['x', 'y']);
    await informer.stop();
    const count = resyncs.length;
    await sleep(400);
    expect(resyncs.length).toBe(count); // stop() ends the resync timer
  });
});

// ---------------------------------------------------------------------------------------------
// Scripted API server: exact control over list/watch responses.
// ---------------------------------------------------------------------------------------------

type Handler = (url: URL, res: http.ServerResponse, call: { list: number; watch: number }) => void;

function ext(name: string, resourceVersion: string): Record<string, unknown> {
  return {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    metadata: { name, namespace: 'ns', resourceVersion },
    spec: { type: 'acl' },
  };
}

function sendList(res: http.ServerResponse, resourceVersion: string, items: Record<string, unknown>[]): void {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'ExtensionList', metadata: { resourceVersion }, items }));
}

function sendEvents(res: http.ServerResponse, events: unknown[], end: boolean): void {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.flushHeaders(); // an open watch with no event yet is still an accepted watch
  for (const e of events) res.write(`${JSON.stringify(e)}\n`);
  if (end) res.end();
}

describe('ResilientInformer protocol cases (scripted server)', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** An HTTP server answering with `handler`, and an informer of Extensions pointed at it. */
  async function scripted(handler: Handler, extra: Partial<ResilientInformerOptions<Extension>> = {}) {
    const requests: URL[] = [];
    const timed: { url: URL; at: number }[] = [];
    const calls = { list: 0, watch: 0 };
    const server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://scripted');
      requests.push(url);
      timed.push({ url, at: Date.now() });
      if (url.searchParams.get('watch') === 'true') calls.watch++;
      else calls.list++;
      handler(url, res, calls);
    });
    const kubeConfig = await listenScripted(server, []);
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const rec = recorder();
    const informer = new ResilientInformer<Extension>({
      kubeConfig,
      path: `${EXT_API}/extensions`,
      parse: parseWith(extensionSchema),
      onChange: rec.onChange,
      logger: testLogger(),
      ...extra,
    });
    cleanups.push(() => informer.stop());
    return { informer, rec, requests, timed };
  }

  it('410 in the watch stream relists and diffs: delete for gone, update for changed, nothing for unchanged', async () => {
    const { informer, rec } = await scripted((url, res, calls) => {
      if (url.searchParams.get('watch') !== 'true') {
        if (calls.list === 1) sendList(res, '10', [ext('same', '5'), ext('changed', '6'), ext('gone', '7')]);
        else sendList(res, '20', [ext('same', '5'), ext('changed', '16'), ext('new', '18')]);
        return;
      }
      if (calls.watch === 1) {
        sendEvents(res, [{ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }], true);
      } else {
        sendEvents(res, [], false); // stays open until the informer stops
      }
    });
    await informer.start();
    const sameBefore = informer.get('same', 'ns');
    await eventually('relist', () => informer.lastResourceVersion() === '20', 3_000);
    // The unchanged object stays the cached one (not a second copy parsed from the relist).
    expect(informer.get('same', 'ns')).toBe(sameBefore);
    expect(rec.events.map((e) => `${e.event} ${e.name}`)).toEqual([
      'add same',
      'add changed',
      'add gone',
      'delete gone',
      'update changed',
      'add new',
    ]);
    expect(informer.list().map((e) => e.metadata.name).sort()).toEqual(['changed', 'new', 'same']);
  });

  it('a cleanly ended watch resumes from the last resourceVersion (bookmarks included) without relisting', async () => {
    const { informer, rec, requests } = await scripted(
      (url, res, calls) => {
        if (url.searchParams.get('watch') !== 'true') return sendList(res, '10', [ext('a', '9')]);
        if (calls.watch === 1) {
          const events = [
            { type: 'ADDED', object: ext('a', '9') }, // already cached, same resourceVersion: no event
            { type: 'MODIFIED', object: ext('a', '11') },
            { type: 'BOOKMARK', object: { kind: 'Extension', metadata: { resourceVersion: '15' } } },
          ];
          sendEvents(res, events, true);
        } else {
          sendEvents(res, [{ type: 'DELETED', object: ext('a', '16') }], false);
        }
      },
      { labelSelector: 'x=y', watchTimeoutSeconds: 42 },
    );
    await informer.start();
    await eventually('delete', () => rec.of('delete').includes('a'), 3_000);
    expect(rec.events.map((e) => `${e.event} ${e.name}`)).toEqual(['add a', 'update a', 'delete a']);
    const watches = requests.filter((u) => u.searchParams.get('watch') === 'true');
    expect(requests.length - watches.length).toBe(1); // one list only
    expect(watches.map((u) => u.searchParams.get('resourceVersion'))).toEqual(['10', '15']);
    expect(Object.fromEntries(watches[0]?.searchParams ?? [])).toMatchObject({
      allowWatchBookmarks: 'true',
      timeoutSeconds: '42',
      labelSelector: 'x=y',
    });
  });

  it('retries a failing list with backoff; start() resolves on the first successful list', async () => {
    const { informer } = await scripted(
      (url, res, calls) => {
        if (url.searchParams.get('watch') === 'true') return sendEvents(res, [], false);
        if (calls.list < 3) {
          res.writeHead(500, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ kind: 'Status', code: 500, message: 'etcd is sad' }));
          return;
        }
        sendList(res, '3', [ext('a', '1')]);
      },
      { initialBackoffMs: 50 },
    );
    const t = Date.now();
    await informer.start();
    expect(Date.now() - t).toBeGreaterThanOrEqual(25 + 50); // two jittered backoffs: ≥ 25 + 50 ms
    expect(informer.get('a', 'ns')).toBeDefined();
  });

  it('ignores objects that do not parse, keeping the cached version', async () => {
    const { informer, rec } = await scripted((url, res) => {
      if (url.searchParams.get('watch') === 'true') {
        return sendEvents(res, [{ type: 'MODIFIED', object: { ...ext('a', '2'), spec: { type: 42 } } }], false);
      }
      sendList(res, '1', [ext('a', '1'), { ...ext('bad', '1'), spec: {} }]);
    });
    await informer.start();
    await eventually('watch event consumed', () => informer.lastResourceVersion() === '2', 3_000);
    expect(informer.list().map((e) => e.metadata.name)).toEqual(['a']);
    expect(informer.get('a', 'ns')?.metadata.resourceVersion).toBe('1');
    expect(rec.events.map((e) => `${e.event} ${e.name}`)).toEqual(['add a']);
  });

  it('lists in pages of listPageSize and keeps a per-namespace index in step with list and watch', async () => {
    const inNs = (name: string, namespace: string, resourceVersion: string) => ({ ...ext(name, resourceVersion), metadata: { name, namespace, resourceVersion } });
    const pages: Record<string, { items: Record<string, unknown>[]; next?: string }> = {
      '': { items: [inNs('a', 'one', '1'), inNs('b', 'one', '2')], next: 'p2' },
      p2: { items: [inNs('c', 'two', '3')], next: 'p3' },
      p3: { items: [inNs('d', 'two', '4')] },
    };
    const { informer, rec, requests } = await scripted(
      (url, res) => {
        if (url.searchParams.get('watch') === 'true') {
          return sendEvents(res, [{ type: 'ADDED', object: inNs('e', 'three', '6') }, { type: 'DELETED', object: inNs('c', 'two', '7') }, { type: 'MODIFIED', object: inNs('a', 'one', '8') }], false);
        }
        const page = pages[url.searchParams.get('continue') ?? ''];
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ kind: 'ExtensionList', apiVersion: 'extensions.gardener.cloud/v1alpha1', metadata: { resourceVersion: '5', ...(page?.next ? { continue: page.next } : {}) }, items: page?.items ?? [] }));
      },
      { listPageSize: 2 },
    );
    await informer.start();
    const lists = requests.filter((u) => u.searchParams.get('watch') !== 'true');
    expect(lists.map((u) => [u.searchParams.get('limit'), u.searchParams.get('continue')])).toEqual([['2', null], ['2', 'p2'], ['2', 'p3']]);
    expect(informer.size()).toBe(4);
    await eventually('watch events applied', () => informer.lastResourceVersion() === '8', 3_000);
    const names = (namespace?: string) => informer.list(namespace).map((e) => e.metadata.name).sort();
    expect(names('one')).toEqual(['a', 'b']);
    expect(names('two')).toEqual(['d']);
    expect(names('three')).toEqual(['e']);
    expect(names('none')).toEqual([]);
    expect(names()).toEqual(['a', 'b', 'd', 'e']);
    expect(informer.list('one').find((e) => e.metadata.name === 'a')?.metadata.resourceVersion).toBe('8');
    expect(rec.events.map((e) => `${e.event} ${e.name}`)).toEqual(['add a', 'add b', 'add c', 'add d', 'add e', 'delete c', 'update a']);
  });

  it('keep: refused objects are never cached, and a cached one that stops matching leaves with a delete', async () => {
    const typed = (name: string, type: string, resourceVersion: string) => ({ ...ext(name, resourceVersion), spec: { type } });
    const { informer, rec } = await scripted(
      (url, res, calls) => {
        if (url.searchParams.get('watch') !== 'true') return sendList(res, '3', [typed('mine', 'acl', '1'), typed('other', 'dns', '2'), typed('turns', 'acl', '3')]);
        if (calls.watch > 1) return sendEvents(res, [], false);
        sendEvents(res, [{ type: 'MODIFIED', object: typed('other', 'dns', '4') }, { type: 'MODIFIED', object: typed('turns', 'dns', '5') }, { type: 'ADDED', object: typed('late', 'acl', '6') }], false);
      },
      { keep: (e) => e.spec.type === 'acl' },
    );
    await informer.start();
    await eventually('watch events applied', () => informer.lastResourceVersion() === '6', 3_000);
    expect(informer.list().map((e) => e.metadata.name).sort()).toEqual(['late', 'mine']);
    expect(informer.list('ns').map((e) => e.metadata.name).sort()).toEqual(['late', 'mine']);
    expect(rec.events.map((e) => `${e.event} ${e.name}`)).toEqual(['add mine', 'add turns', 'delete turns', 'add late']);
  });

  /** Watch requests the scripted server received, as ms since `t0`. */
  const watchTimes = (requests: readonly { url: URL; at: number }[], t0: number) =>
    requests.filter((r) => r.url.searchParams.get('watch') === 'true').map((r) => r.at - t0);

  it('a slow 5xx answer to a watch never counts as a healthy watch: the backoff keeps growing (issue 10 point 7)', async () => {
    const { informer, timed } = await scripted(
      (url, res) => {
        if (url.searchParams.get('watch') !== 'true') return sendList(res, '1', [ext('a', '1')]);
        // Refused after 1.1 s: on main this counted as a healthy watch and reset the backoff.
        setTimeout(() => {
          res.writeHead(503, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ kind: 'Status', code: 503, message: 'slow refusal' }));
        }, 1_100);
      },
      { initialBackoffMs: 400, maxBackoffMs: 10_000 },
    );
    const t0 = Date.now();
    await informer.start();
    await sleep(9_000);
    const starts = watchTimes(timed, t0);
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] ?? 0) - 1_100);
    // Backoffs 200-400, 400-800, 800-1600, 1600-3200 ms: each gap at least the previous lower bound doubled.
    expect(gaps.length).toBeGreaterThanOrEqual(3);
    expect(gaps.length).toBeLessThanOrEqual(4);
    expect(gaps[2]).toBeGreaterThanOrEqual(800 - 50);
  }, 20_000);

  it('honours Retry-After of a 429 on list and watch: never sooner than the server asked', async () => {
    const { informer, timed } = await scripted(
      (url, res, calls) => {
        const tooMany = () => {
          res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '2' });
          res.end(JSON.stringify({ kind: 'Status', code: 429, reason: 'TooManyRequests', message: 'storage is (re)initializing' }));
        };
        if (url.searchParams.get('watch') !== 'true') return calls.list === 1 ? tooMany() : sendList(res, '1', [ext('a', '1')]);
        return tooMany();
      },
      { initialBackoffMs: 10, maxBackoffMs: 100 },
    );
    const t0 = Date.now();
    await informer.start();
    const listed = Date.now() - t0;
    expect(listed).toBeGreaterThanOrEqual(2_000 - 20);
    await sleep(6_500);
    const starts = watchTimes(timed, t0);
    // First watch right after the list, then one per 2 s at most, although the backoff alone is ≤ 100 ms.
    expect(starts.length).toBeGreaterThanOrEqual(3);
    expect(starts.length).toBeLessThanOrEqual(4);
    for (let i = 1; i < starts.length; i++) expect((starts[i] ?? 0) - (starts[i - 1] ?? 0)).toBeGreaterThanOrEqual(2_000 - 20);
  }, 20_000);

  it('an accepted but silent watch is failed after watchIdleTimeoutMs, well before the server-side timeout', async () => {
    const { informer, timed } = await scripted(
      (url, res) => {
        if (url.searchParams.get('watch') !== 'true') return sendList(res, '1', [ext('a', '1')]);
        sendEvents(res, [], false); // accepted, then nothing: a half-open connection looks like this
      },
      { watchTimeoutSeconds: 300, watchIdleTimeoutMs: 1_200, initialBackoffMs: 2_000, maxBackoffMs: 4_000 },
    );
    const t0 = Date.now();
    await informer.start();
    await eventually('second watch', () => watchTimes(timed, t0).length >= 2, 5_000);
    const starts = watchTimes(timed, t0);
    // Re-opened at once from the resourceVersion: no backoff, no relist.
    expect((starts[1] ?? 0) - (starts[0] ?? 0)).toBeLessThan(1_200 + 300);
    expect(timed.filter((r) => r.url.searchParams.get('watch') !== 'true')).toHaveLength(1);
    expect(timed.filter((r) => r.url.searchParams.get('watch') === 'true').map((r) => r.url.searchParams.get('resourceVersion'))).toEqual(starts.map(() => '1'));
    // Watching again (each silent watch is failed and re-opened at once; a loaded machine can catch the moment in between).
    await eventually('watching', () => informer.isWatching(), 1_000);
  });

  it('stop() before the first successful list rejects start()', async () => {
    const { informer } = await scripted((_url, res) => {
      res.writeHead(503);
      res.end();
    });
    const starting = informer.start();
    await sleep(50);
    await informer.stop();
    await expect(starting).rejects.toThrow(/stopped before its first list/);
  });
});
