// Issue 13 (render memory): the streaming render produces the same documents, in the same order,
// as the whole-seed render, and the command's streamed output is byte for byte one JSON List or
// one multi-document YAML of them; on a seed with many shards, gateways and legacy patches.
import { describe, expect, it } from 'vitest';
import { renderCommand } from '../../src/cli/render-command.js';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { renderSeed, renderSeedStream } from '../../src/render/seed-render.js';
import { toYamlDocuments } from '../../src/kube/yaml-documents.js';
import type { SourcedObject } from '../../src/gardener/inventory.js';

/** The example seed with a small object budget and 60 more ACL shoots, so that the combined filters need many shards. */
async function manyShardSeed(): Promise<SourcedObject[]> {
  const { objects } = await loadDocuments([EMBEDDED_EXAMPLE]);
  const extra: SourcedObject[] = [];
  for (let i = 0; i < 60; i++) {
    const id = `shoot--bulk--s${String(i).padStart(2, '0')}`;
    const cidrs = Array.from({ length: 8 }, (_, j) => `10.${i}.${j}.0/24`);
    extra.push(
      { source: `bulk #${i}`, object: { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Cluster', metadata: { name: id }, spec: { seed: { spec: { networks: { nodes: '10.250.0.0/16' } } }, shoot: { metadata: { name: `s${i}` }, spec: { provider: { workers: [] } }, status: { technicalID: id } } } } },
      { source: `bulk #${i}`, object: { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', metadata: { name: 'acl', namespace: id }, spec: { type: 'acl', providerConfig: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs, mode: i % 3 === 0 ? 'audit' : 'enforce' } } } } },
    );
  }
  const operator = objects.find((o) => (o.object as { kind?: string }).kind === 'OperatorConfiguration')!;
  const small = { ...(operator.object as object), maxObjectBytes: 16 * 1024 };
  return [...objects.filter((o) => o !== operator), { source: 'small budget', object: small }, ...extra];
}

async function commandOutput(output: 'json' | 'yaml', dir: string): Promise<string> {
  let out = '';
  let writes = 0;
  const code = await renderCommand(['--output', output, dir], { stdout: (t) => ((out += t), ++writes % 7 !== 0), stderr: () => undefined, drained: async () => undefined });
  expect(code).toBe(0);
  return out;
}

describe('streaming render', () => {
  it('yields exactly the whole-seed render, object by object, on a seed of many shards', async () => {
    const objects = await manyShardSeed();
    const whole = renderSeed(objects);
    expect(whole.problems.filter((p) => p.severity === 'error')).toEqual([]);
    const streamed = [...renderSeedStream(objects).documents()];
    expect(whole.envoyFilters.filter((f) => f.metadata.name.startsWith('acl-connect-')).length).toBeGreaterThan(10);
    expect(whole.patches.length).toBeGreaterThan(0);
    expect(JSON.stringify(streamed)).toBe(JSON.stringify([...whole.envoyFilters, ...whole.patches]));
  });

  it('the command writes, piece by piece, the bytes of one JSON List and of one multi-document YAML', async () => {
    const { writeFile, mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const dir = await mkdtemp(path.join(tmpdir(), 'acl-render-stream-'));
    const objects = await manyShardSeed();
    await writeFile(path.join(dir, 'seed.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects.map((o) => o.object) }));
    const whole = renderSeed(objects);
    const items = [...whole.envoyFilters, ...whole.patches];
    expect(await commandOutput('json', dir)).toBe(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items }, null, 2)}\n`);
    expect(await commandOutput('yaml', dir)).toBe(toYamlDocuments(items));
  });

  it('a shoot too large for any shard is an input error before anything is written: exit 2, empty stdout', async () => {
    const { writeFile, mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const dir = await mkdtemp(path.join(tmpdir(), 'acl-render-oversized-'));
    const objects = (await manyShardSeed()).map((o) => o.object as { kind?: string; metadata?: { namespace?: string }; status?: Record<string, unknown> });
    // maxCIDRs bounds the rule, not the shoot's egress ranges: 1,000 of them make its policy larger than a 16 KiB object may hold.
    const egress = Array.from({ length: 1000 }, (_, i) => `172.${16 + (i >> 8)}.${i & 255}.0/24`);
    const tiny = objects.map((o) => (o.kind === 'Infrastructure' && o.metadata?.namespace === 'shoot--team--prod-eu' ? { ...o, status: { egressCIDRs: egress } } : o));
    await writeFile(path.join(dir, 'seed.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: tiny }));
    for (const output of ['json', 'yaml']) {
      let out = '';
      let err = '';
      const code = await renderCommand(['--output', output, dir], { stdout: (t) => (out += t), stderr: (t) => (err += t) });
      expect({ code, out }).toEqual({ code: 2, out: '' });
      // The default form's bucket: 16 KiB less its lookups and guards.
      expect(err).toMatch(/^error: seed: the combined CONNECT policy of shoot--team--prod-eu needs \d+ bytes, more than the 8721 bytes one combined filter may hold \(operator maxObjectBytes 16384 minus 7663 for the object around it\); list fewer or wider CIDRs, or raise maxObjectBytes$/m);
    }
  });
});
