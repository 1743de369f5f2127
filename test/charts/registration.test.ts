// `gardener-acl registration`: the objects parse, the packed chart is exactly charts/gardener-acl
// (unpacked with tar, linted by Helm), the bytes are deterministic, and bad input exits 2.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { registrationCommand } from '../../src/cli/registration-command.js';
import { chartFiles } from '../../src/registration/chart-archive.js';
import { readValuesSchema } from '../../src/registration/values-schema.js';
import { SEED_CHART, helm } from './helm.js';

const run = promisify(execFile);

async function registration(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await registrationCommand(args, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

type Objects = { kind: string; apiVersion: string; metadata: { name: string }; spec?: { resources: Record<string, unknown>[]; deployment: Record<string, unknown> }; helm?: { rawChart: string; values: unknown } }[];

describe('gardener-acl registration', () => {
  let dir: string;
  let objects: Objects;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-registration-'));
    const result = await registration(['--image-repository', 'registry.example.com/acl', '--image-tag', '0.2.0']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    objects = parseAllDocuments(result.stdout).map((d) => d.toJS() as Objects[number]);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints a ControllerRegistration with the acl lifecycle and a ControllerDeployment with the chart', () => {
    expect(objects.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`)).toEqual(['core.gardener.cloud/v1beta1 ControllerRegistration/acl', 'core.gardener.cloud/v1 ControllerDeployment/acl']);
    const [reg, dep] = objects;
    expect(reg?.spec?.resources).toEqual([
      { kind: 'Extension', type: 'acl', primary: true, reconcileTimeout: '3m', workerlessSupported: true, lifecycle: { reconcile: 'BeforeKubeAPIServer', delete: 'AfterKubeAPIServer', migrate: 'AfterKubeAPIServer' } },
    ]);
    expect(reg?.spec?.resources[0]).not.toHaveProperty('autoEnable');
    expect(reg?.spec?.deployment).toEqual({ policy: 'OnDemand', deploymentRefs: [{ name: 'acl' }] });
    expect(dep?.helm?.values).toEqual({ image: { repository: 'registry.example.com/acl', tag: '0.2.0' } });
  });

  it('the rawChart unpacks to exactly the files of charts/gardener-acl, and Helm lints it', async () => {
    const tgz = path.join(dir, 'chart.tgz');
    await writeFile(tgz, Buffer.from(objects[1]?.helm?.rawChart ?? '', 'base64'));
    const listing = (await run('tar', ['-tzf', tgz])).stdout.trim().split('\n');
    const files = await chartFiles(SEED_CHART);
    expect(listing).toEqual(files.map((f) => `gardener-acl/${f}`));
    expect(files).toContain('values.schema.json');
    await run('tar', ['-xzf', tgz, '-C', dir]);
    for (const f of files) expect(await readFile(path.join(dir, 'gardener-acl', f), 'utf8'), f).toBe(await readFile(path.join(SEED_CHART, f), 'utf8'));
    const lint = await helm(['lint', '--strict', tgz]);
    expect(lint.stdout).toContain('0 chart(s) failed');
  });

  it('packs deterministically: the same chart gives the same bytes', async () => {
    const again = await registration(['--image-repository', 'registry.example.com/acl', '--image-tag', '0.2.0']);
    const rawChart = (parseAllDocuments(again.stdout)[1]?.toJS() as Objects[number]).helm?.rawChart;
    expect(rawChart).toBe(objects[1]?.helm?.rawChart);
  });

  it('--values merges a values file under the image flags; --output json', async () => {
    const values = path.join(dir, 'values.yaml');
    await writeFile(values, 'config:\n  maxCIDRs: 100\nimage:\n  pullPolicy: Always\n');
    const result = await registration(['--values', values, '--image-tag', '1.0.0', '--output', 'json', '--policy', 'Always']);
    const list = JSON.parse(result.stdout) as { items: Objects };
    expect(list.items[1]?.helm?.values).toEqual({ config: { maxCIDRs: 100 }, image: { pullPolicy: 'Always', tag: '1.0.0' } });
    expect(list.items[0]?.spec?.deployment).toMatchObject({ policy: 'Always' });
  });

  it('values the seed chart would refuse are refused now, each named (not later at gardenlet’s render on every seed)', async () => {
    const values = path.join(dir, 'bad-values.yaml');
    await writeFile(values, 'replicas: "two"\nconfig: {maxCIDRs: 5000, combinedForm: fancy}\nbogus: 1\n');
    const result = await registration(['--values', values]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `--values ${values}: 4 value(s) the chart gardener-acl refuses (values.schema.json):\n` +
        '  replicas: must be integer, not string "two"\n' +
        '  config.maxCIDRs: must be at most 1000, not 5000\n' +
        '  config.combinedForm: must be one of "rules", "matcher", "ecds", not "fancy"\n' +
        '  bogus: not a value of the chart; check the spelling (values.schema.json lists them)\n',
    );
    // Helm agrees on every one of them.
    const helmSays = await helm(['template', 'x', SEED_CHART, '-f', values]);
    expect(helmSays.code).not.toBe(0);
    for (const field of ['replicas', 'maxCIDRs', 'combinedForm', 'bogus']) expect(helmSays.stderr).toContain(field);
    // And the admission chart's values, with --operator.
    const admission = path.join(dir, 'bad-admission.yaml');
    await writeFile(admission, 'replicas: 0\n');
    const op = await registration(['--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0', '--admission-values', admission]);
    expect(op.code).toBe(2);
    expect(op.stderr).toMatch(new RegExp(`^--admission-values ${admission.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: 1 value\\(s\\) the chart gardener-acl-admission refuses \\(values\\.schema\\.json\\):\\n  replicas: must be at least 1, not 0\\n$`));
  });

  it('the check understands every keyword of both charts’ schemas (so it never passes what Helm refuses)', async () => {
    for (const chart of ['gardener-acl', 'gardener-acl-admission']) {
      const schema = await readValuesSchema(path.join(path.dirname(SEED_CHART), chart));
      expect(typeof schema, String(schema)).toBe('object');
    }
  });

  it('--operator prints a gardener-operator Extension with both admission renders', async () => {
    const ca = path.join(dir, 'ca.pem');
    await writeFile(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const result = await registration(['--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0', '--admission-ca-bundle', ca]);
    expect(result.code).toBe(0);
    const [ext] = parseAllDocuments(result.stdout).map((d) => d.toJS() as { apiVersion: string; kind: string; spec: { resources: unknown[]; deployment: { extension: unknown; admission: unknown } } });
    expect(ext?.apiVersion).toBe('operator.gardener.cloud/v1alpha1');
    expect(ext?.kind).toBe('Extension');
    // The same resource as for gardenlet, also registered for the garden (the Garden's acl entry).
    expect(ext?.spec.resources).toEqual([{ ...(objects[0]?.spec?.resources[0] as object), clusterCompatibility: ['shoot', 'garden'] }]);
    // gardener-operator renders the runtime cluster's deployment (the garden ACL) with runtimeClusterValues.
    expect(ext?.spec.deployment.extension).toEqual({ helm: { ociRepository: { ref: 'ghcr.io/org/charts/gardener-acl:0.1.0' } }, values: {}, runtimeClusterValues: {}, policy: 'OnDemand' });
    // gardener-operator's AdmissionDeploymentSpec: helm per cluster, values shared by both renders.
    expect(ext?.spec.deployment.admission).toEqual({
      runtimeCluster: { helm: { ociRepository: { ref: 'ghcr.io/org/charts/gardener-acl-admission:0.1.0' } } },
      virtualCluster: { helm: { ociRepository: { ref: 'ghcr.io/org/charts/gardener-acl-admission:0.1.0' } } },
      values: { webhook: { registration: { url: 'https://gardener-acl-admission.garden.svc' }, tls: { mode: 'secret', secretName: 'gardener-acl-admission-tls', caBundle: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' } } },
    });
  });

  it('--operator without --admission-ca-bundle: the admission server keeps its own certificates (mode managed)', async () => {
    const result = await registration(['--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0']);
    expect(result.code, result.stderr).toBe(0);
    const [ext] = parseAllDocuments(result.stdout).map((d) => d.toJS() as { spec: { deployment: { admission: { values: unknown } } } });
    expect(ext?.spec.deployment.admission.values).toEqual({ webhook: { registration: { url: 'https://gardener-acl-admission.garden.svc' }, tls: { mode: 'managed' } } });
  });

  it('--operator with a private registry: the image flags reach the admission chart too, and --admission-values carries its other values', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'acl-registration-'));
    const file = path.join(dir, 'admission.yaml');
    await writeFile(file, 'replicas: 3\nimage: {pullPolicy: Always}\nwebhook: {registration: {url: https://ignored.example}}\n');
    const result = await registration(['--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0', '--image-repository', 'registry.internal/acl/gardener-acl', '--image-tag', '0.2.0', '--admission-values', file]);
    expect(result.code).toBe(0);
    const [ext] = parseAllDocuments(result.stdout).map((d) => d.toJS() as { spec: { deployment: { extension: { values: unknown }; admission: { values: unknown } } } });
    expect(ext?.spec.deployment.extension.values).toMatchObject({ image: { repository: 'registry.internal/acl/gardener-acl', tag: '0.2.0' } });
    expect((ext?.spec.deployment.extension as { runtimeClusterValues?: unknown }).runtimeClusterValues).toEqual(ext?.spec.deployment.extension.values);
    // The registration URL and TLS mode are the command's: a values file cannot point the API server elsewhere.
    expect(ext?.spec.deployment.admission.values).toEqual({
      replicas: 3,
      image: { pullPolicy: 'Always', repository: 'registry.internal/acl/gardener-acl', tag: '0.2.0' },
      webhook: { registration: { url: 'https://gardener-acl-admission.garden.svc' }, tls: { mode: 'managed' } },
    });
  });

  it('--operator --virtual-garden-kubeconfig-secret: the garden ACL’s deployment in the runtime cluster gets the Secret, the seeds’ does not', async () => {
    const result = await registration(['--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0', '--image-tag', '0.2.0', '--virtual-garden-kubeconfig-secret', 'virtual-garden-access']);
    expect(result.code).toBe(0);
    const [ext] = parseAllDocuments(result.stdout).map((d) => d.toJS() as { spec: { deployment: { extension: { values: unknown; runtimeClusterValues: unknown } } } });
    expect(ext?.spec.deployment.extension.values).toEqual({ image: { tag: '0.2.0' } });
    expect(ext?.spec.deployment.extension.runtimeClusterValues).toEqual({ image: { tag: '0.2.0' }, garden: { virtualGardenKubeconfigSecret: 'virtual-garden-access' } });
  });

  it.each([
    [['--virtual-garden-kubeconfig-secret', 'x'], '--virtual-garden-kubeconfig-secret: only with --operator'],
    [['--policy', 'Sometimes'], '--policy: must be OnDemand, Always or AlwaysExceptNoShoots'],
    [['--name', 'ACL'], '--name: must be a lower-case DNS label'],
    [['--image-tag', 'has space'], '--image-tag: must be an image tag such as 0.1.0'],
    [['--chart', '/nonexistent'], '--chart: cannot pack /nonexistent'],
    [['--operator'], '--chart-ref: is required with --operator'],
    [['--chart-ref', 'ghcr.io/x/y:1'], '--chart-ref: only with --operator'],
    [['--operator', '--chart-ref', 'not a ref', '--admission-chart-ref', 'ghcr.io/x/y:1', '--admission-ca-bundle', '/dev/null'], '--chart-ref: must be an OCI reference'],
    [['--bogus'], "Unknown option '--bogus'"],
  ])('%j exits 2: %s', async (args, message) => {
    const result = await registration(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(message);
  });

  it('a values file that is not a map exits 2', async () => {
    const values = path.join(dir, 'list.yaml');
    await writeFile(values, '- a\n- b\n');
    const result = await registration(['--values', values]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('must be a YAML map of chart values');
  });
});
