// `gardener-acl render` as a process: exit codes, stdout and the exact error text.
import { SHARED_HOP_ENTRY_OBJECT, SHARED_HOP_SHARDS, sharedHopObjectName } from '../../src/rbac/shared-tunnel-hop.js';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { ecdsBucketObjectName } from '../../src/rbac/connect-matcher-ecds.js';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { renderSeed } from '../../src/render/seed-render.js';
import { toYamlDocuments } from '../../src/kube/yaml-documents.js';
import { generatedSeedObjects, writeGeneratedSeed } from '../support/generated-seed.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), ...args], { cwd: ROOT, maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function seedDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-render-'));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  return dir;
}

const CLUSTER = `apiVersion: extensions.gardener.cloud/v1alpha1
kind: Cluster
metadata: {name: shoot--p--a}
spec:
  seed: {spec: {networks: {nodes: 10.250.0.0/16}}}
  shoot: {metadata: {name: a}, spec: {provider: {workers: []}}, status: {technicalID: shoot--p--a}}
`;
const GATEWAY = `apiVersion: apps/v1
kind: Deployment
metadata: {name: istio-ingressgateway, namespace: istio-ingress}
spec: {selector: {matchLabels: {app: istio-ingressgateway}}}
`;
const extension = (rule: string) => `apiVersion: extensions.gardener.cloud/v1alpha1
kind: Extension
metadata: {name: acl, namespace: shoot--p--a}
spec: {type: acl, providerConfig: {rule: ${rule}}}
`;

describe('gardener-acl render', () => {
  it('renders the embedded example seed as valid YAML when no path is given', async () => {
    const { code, stdout } = await cli('render');
    expect(code).toBe(0);
    const docs = parseAllDocuments(stdout);
    expect(docs.every((d) => d.errors.length === 0)).toBe(true);
    const kinds = docs.map((d) => (d.toJS() as { kind: string }).kind);
    expect(kinds.filter((k) => k === 'EnvoyFilter').length).toBeGreaterThanOrEqual(6);
    expect(kinds).toContain('EnvoyFilterPatch');
  });

  it('--config replaces the seed directory’s own OperatorConfiguration (as for explain); a file without one is refused', async () => {
    const config = await seedDir({ 'op.yaml': 'apiVersion: acl.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\ncombinedForm: rules\n' });
    const { code, stdout, stderr } = await cli('render', '--config', path.join(config, 'op.yaml'), path.join(ROOT, 'examples/seed'));
    expect(stderr).not.toContain('error:');
    expect(code).toBe(0);
    const names = parseAllDocuments(stdout).map((d) => (d.toJS() as { metadata?: { name?: string } }).metadata?.name ?? '');
    expect(names).toContain('acl-connect-8132-000');
    expect(names.some((n) => n.startsWith('acl-connect-ecds-'))).toBe(false);
    const empty = await seedDir({ 'op.yaml': CLUSTER });
    const refused = await cli('render', '--config', path.join(empty, 'op.yaml'), path.join(ROOT, 'examples/seed'));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`error: --config ${path.join(empty, 'op.yaml')}: no OperatorConfiguration in it`);
  });

  it('objects it does not read are named: a Shoot manifest (with where its ACL lives on a seed) and a misspelt kind; all of them, a Namespace too, are counted by kind', async () => {
    const dir = await seedDir({
      'ns.yaml': 'apiVersion: v1\nkind: Namespace\nmetadata: {name: shoot--p--a}\n',
      'shoot.yaml': 'apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\nmetadata: {name: test, namespace: garden-me}\nspec: {}\n',
      'typo.yaml': 'apiVersion: extensions.gardener.cloud/v1alpha1\nkind: Extention\nmetadata: {name: acl, namespace: shoot--p--a}\n',
    });
    const { code, stderr } = await cli('render', dir);
    expect(code).toBe(0);
    expect(stderr).toContain(`warning: ${path.join(dir, 'shoot.yaml')} (document 1): Shoot garden-me/test: a Shoot (core.gardener.cloud) lives in the garden: on a seed its ACL is the Extension acl in the shoot namespace, with the Cluster; the Shoot webhook checks a Shoot's providerConfig (offline: gardener-acl validate; gardener-acl explain takes a Shoot manifest as its shoot's ACL)`);
    expect(stderr).toContain('warning: the inputs: 3 object(s) of kinds not read: 1 Namespace, 1 Shoot, 1 Extention\n');
    expect(stderr).toContain('Extention shoot--p--a/acl: kind "Extention" is not read (gardener-acl reads Cluster, Extension, Infrastructure, DNSRecord, Gateway, Deployment, Service, ConfigMap, EnvoyFilter, OperatorConfiguration); check the spelling');
  });

  it('prints a JSON List with --output json', async () => {
    const dir = await seedDir({ 'seed.yaml': [CLUSTER, GATEWAY, extension('{action: ALLOW, type: remote_ip, cidrs: [203.0.113.0/24]}')].join('---\n') });
    const { code, stdout } = await cli('render', '--output', 'json', dir);
    expect(code).toBe(0);
    const list = JSON.parse(stdout) as { kind: string; items: { metadata: { name: string } }[] };
    expect(list.kind).toBe('List');
    // The default form: per port the listener part, and every bucket (empty ones too: the listeners
    // name them); then the tunnel hop: every shard (the entry may send any VPN tunnel to each), its entry.
    const buckets = Array.from({ length: defaultOperatorConfig().ecdsBuckets }, (_, b) => ecdsBucketObjectName(b));
    const hopShards = Array.from({ length: SHARED_HOP_SHARDS }, (_, k) => sharedHopObjectName(k));
    expect(list.items.map((i) => i.metadata.name)).toEqual(['acl-connect-8132-ecds', 'acl-connect-8443-ecds', ...buckets, ...hopShards, SHARED_HOP_ENTRY_OBJECT]);
  });

  it('writes a seed of many objects byte for byte as the yaml library and JSON.stringify would, and a short run on a pipe says nothing on stderr', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-render-many-'));
    await writeGeneratedSeed(dir, 30, 50);
    const whole = renderSeed(generatedSeedObjects(30, 50));
    const items = [...whole.envoyFilters, ...whole.patches];
    const yaml = await cli('render', dir);
    expect(yaml).toEqual({ code: 0, stdout: toYamlDocuments(items), stderr: '' });
    const json = await cli('render', '-o', 'json', dir);
    expect(json).toEqual({ code: 0, stdout: `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items }, null, 2)}\n`, stderr: '' });
  });

  it('exits 2 naming file, object and field for an invalid rule', async () => {
    const dir = await seedDir({ 'seed.yaml': [CLUSTER, GATEWAY, extension('{action: ALLOW, type: remote_ip, cidrs: [10.0.0.0/8, 10.0.0.300/8]}')].join('---\n') });
    const { code, stdout, stderr } = await cli('render', dir);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain(
      `error: ${path.join(dir, 'seed.yaml')} (document 3): Extension shoot--p--a/acl: spec.providerConfig.rule.cidrs[1]: "10.0.0.300/8" is not a valid CIDR ("10.0.0.300" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48`,
    );
    expect(stderr).toContain('gardener-acl render: 1 error(s); nothing printed');
  });

  it('exits 2 for broken YAML, objects that are not Kubernetes objects, and bad seed data', async () => {
    const dir = await seedDir({
      'a-broken.yaml': 'kind: [unclosed\n',
      'b-not-object.yaml': '- just\n- a list\n',
      'c-seed.yaml': [CLUSTER.replace('10.250.0.0/16', '10.250.0.0/99'), GATEWAY, extension('{action: ALLOW, type: remote_ip, cidrs: [203.0.113.0/24]}')].join('---\n'),
    });
    const { code, stderr } = await cli('render', dir);
    expect(code).toBe(2);
    expect(stderr).toContain(`error: ${path.join(dir, 'a-broken.yaml')} (document 1): invalid YAML:`);
    expect(stderr).toContain(`error: ${path.join(dir, 'b-not-object.yaml')} (document 1): not a Kubernetes object: must be an object, not ["just","a list"]`);
    expect(stderr).toContain(
      `error: ${path.join(dir, 'c-seed.yaml')} (document 1): Cluster shoot--p--a: spec.seed.spec.networks.nodes: "10.250.0.0/99" is not a valid CIDR (prefix length "99" must be a number from 0 to 32)`,
    );
  });

  it('exits 2 for a missing Cluster, a missing path and a bad flag', async () => {
    const dir = await seedDir({ 'seed.yaml': [GATEWAY, extension('{action: ALLOW, type: remote_ip, cidrs: [203.0.113.0/24]}')].join('---\n') });
    expect((await cli('render', dir)).stderr).toContain(
      `Extension shoot--p--a/acl: Cluster "shoot--p--a" not found; Gardener writes it before the Extension, so the seed inputs are incomplete`,
    );
    const missing = await cli('render', path.join(dir, 'nope'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`error: ${path.join(dir, 'nope')}: cannot read: ENOENT`);
    const flag = await cli('render', '--output', 'xml');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--output must be yaml or json, not "xml"');
    expect((await cli('frobnicate')).code).toBe(2);
  });
});
