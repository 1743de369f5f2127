// Every object `gardener-acl registration` prints passes Gardener's own strict decoding (unknown
// fields are errors, as with the API server's strict field validation) and API validation
// (ValidateControllerRegistration, ValidateControllerDeployment, the operator's ValidateExtension).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { registrationCommand } from '../../src/cli/registration-command.js';
import { stringify as stringifyYaml } from 'yaml';
import { storableGardenObject } from '../istio/garden-fixture.js';
import { validateWithGardener } from '../support/gardener-contract.js';

async function registration(args: string[]): Promise<string> {
  let stdout = '';
  let stderr = '';
  const code = await registrationCommand(args, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  if (code !== 0) throw new Error(`registration ${args.join(' ')} exited ${code}: ${stderr}`);
  return stdout;
}

describe("Gardener's validation of the registration objects", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acl-gardener-validate-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const validate = async (name: string, yaml: string) => {
    const file = path.join(dir, name);
    await writeFile(file, yaml);
    return validateWithGardener([file]);
  };

  it('ControllerRegistration and ControllerDeployment (gardenlet install) pass', async () => {
    const run = await validate('registration.yaml', await registration(['--image-repository', 'registry.example.com/acl', '--image-tag', '0.2.0', '--policy', 'Always']));
    expect(run.steps.map((s) => [s.step.replace(/^.*#/, '#'), s.ok, s.error])).toEqual([
      ['read ' + path.join(dir, 'registration.yaml'), true, undefined],
      ['#0 ControllerRegistration', true, undefined],
      ['#1 ControllerDeployment', true, undefined],
    ]);
  });

  it('the operator Extension (gardener-operator install) passes', async () => {
    const ca = path.join(dir, 'ca.pem');
    await writeFile(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const run = await validate('operator.yaml', await registration([
      '--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0', '--admission-ca-bundle', ca,
    ]));
    expect(run.steps.slice(1).map((s) => [s.step.replace(/^.*#/, '#'), s.ok, s.error])).toEqual([['#0 Extension', true, undefined]]);
  });

  it('a Garden with an acl entry passes gardener-operator’s defaulting and ValidateGarden next to the printed Extension, and is refused without it', async () => {
    const extension = await registration(['--operator', '--chart-ref', 'ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/gardener-acl-admission:0.1.0']);
    const garden = stringifyYaml(storableGardenObject([{ type: 'acl', providerConfig: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'], mode: 'audit' } } }]));
    const run = await validate('garden.yaml', `${extension}---\n${garden}`);
    expect(run.steps.slice(1).map((s) => [s.step.replace(/^.*#/, '#'), s.ok, s.error])).toEqual([
      ['#0 Extension', true, undefined],
      ['#1 Garden', true, undefined],
    ]);
    const alone = await validate('garden-alone.yaml', garden);
    expect(alone.steps[1]?.error).toContain('spec.extensions[0].type: Unsupported value: "acl"');
  });

  it('the validator refuses what Gardener refuses (an admission value it does not know, a bad lifecycle)', async () => {
    const bad = await validate('bad.yaml', [
      'apiVersion: operator.gardener.cloud/v1alpha1',
      'kind: Extension',
      'metadata: {name: acl}',
      'spec:',
      '  resources: [{kind: Extension, type: acl}]',
      '  deployment:',
      '    admission:',
      '      runtimeCluster: {helm: {ociRepository: {ref: "ghcr.io/o/a:1"}}, values: {server: {enabled: true}}}',
      '---',
      'apiVersion: core.gardener.cloud/v1beta1',
      'kind: ControllerRegistration',
      'metadata: {name: acl}',
      'spec:',
      '  resources: [{kind: Extension, type: acl, lifecycle: {reconcile: Sometime}}]',
      '',
    ].join('\n'));
    expect(bad.ok).toBe(false);
    expect(bad.steps[1]?.error).toContain('unknown field "spec.deployment.admission.runtimeCluster.values"');
    expect(bad.steps[2]?.error).toContain('spec.resources[0].lifecycle.reconcile');
  });
});
