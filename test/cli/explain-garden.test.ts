// `gardener-acl explain --garden` from files as an operator gets them with kubectl (a List of the
// runtime cluster's objects, a List of the virtual garden's ManagedSeeds and Shoots): the verdict
// on every chain of the virtual garden's API server, the range that decided, exit codes, and the
// notes and refusals an operator meets. Envoy's agreement with these verdicts, client by client,
// is asserted in test/istio/garden-rendered.test.ts.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { explainCommand } from '../../src/cli/explain-command.js';
import { gardenObject, managedSeedObjects, virtualGardenRuntimeObjects } from '../istio/garden-fixture.js';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await explainCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

const RULE = { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8:a::/48'] } };

describe('gardener-acl explain --garden', () => {
  let runtime: string;
  let virtual: string;
  let auditRuntime: string;

  beforeAll(async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'acl-explain-garden-'));
    const list = (items: readonly unknown[]) => stringifyYaml({ apiVersion: 'v1', kind: 'List', items });
    const garden = (providerConfig: unknown) => {
      const g = gardenObject() as { spec: Record<string, unknown> };
      return { ...g, spec: { ...g.spec, extensions: [{ type: 'acl', providerConfig }] } };
    };
    runtime = path.join(dir, 'runtime.yaml');
    auditRuntime = path.join(dir, 'runtime-audit.yaml');
    virtual = path.join(dir, 'virtual-garden.yaml');
    await writeFile(runtime, list([garden(RULE), ...virtualGardenRuntimeObjects('passthrough')]));
    await writeFile(auditRuntime, list([garden({ rule: { ...RULE.rule, mode: 'audit' } }), ...virtualGardenRuntimeObjects('passthrough')]));
    const { managedSeeds, shoots } = managedSeedObjects([{ name: 'seed-eu', egressCIDRs: ['198.51.100.20/32'] }]);
    await writeFile(virtual, list([...managedSeeds, ...shoots]));
  });

  it('a ManagedSeed’s gardenlet is admitted on every chain, by its egress', async () => {
    const result = await run(['--garden', '--client', '198.51.100.20', runtime, virtual]);
    expect(result).toEqual({
      code: 0,
      err: '',
      out: [
        "the virtual garden's API server: ALLOW remote_ip [203.0.113.0/24, 2001:db8:a::/48]",
        'admitted api           virtual-garden-istio-ingress  SNI api.garden.example.test, api.garden2.example.test, gardener.garden.example.test, gardener.garden2.example.test (port 9443)',
        '         remote_ip 198.51.100.20 is in no ALLOW range, but remote_ip 198.51.100.20 is in the always-allowed range 198.51.100.20/32',
        '',
      ].join('\n'),
    });
  });

  it('an outsider is refused (exit 1); in audit mode admitted, saying enforce would refuse (exit 3)', async () => {
    const refused = await run(['--garden', '--client', '100.64.1.1:443', runtime, virtual]);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('refused  api');
    expect(refused.out).toContain('remote_ip 100.64.1.1 is in no ALLOW range (203.0.113.0/24, 2001:db8:a::/48) and remote_ip 100.64.1.1 in no always-allowed range');
    const audited = await run(['--garden', '--client', '100.64.1.1', '--output', 'json', auditRuntime, virtual]);
    expect(audited.code).toBe(3);
    const json = JSON.parse(audited.out) as { technicalID: string; verdicts: { verdict: string; enforceWouldRefuse?: boolean }[] };
    expect(json.technicalID).toBe('virtual-garden');
    expect(json.verdicts.map((v) => [v.verdict, v.enforceWouldRefuse])).toEqual([['admitted', true]]);
  });

  it('without the virtual garden’s objects it says that no gardenlet egress is admitted in the answer', async () => {
    const result = await run(['--garden', '--client', '198.51.100.20', runtime]);
    expect(result.code).toBe(1);
    expect(result.err).toBe("note: no ManagedSeed among the inputs: no seed's gardenlet egress is admitted in this explanation (add kubectl get managedseeds,shoots -n garden -o yaml of the virtual garden)\n");
  });

  it('refuses what does not apply to the garden, and inputs without its acl entry', async () => {
    const withShoot = await run(['--garden', '--shoot', 'shoot--p--a', '--client', '203.0.113.9', runtime]);
    expect(withShoot.code).toBe(2);
    expect(withShoot.err).toContain('--garden does not take --shoot (the garden is not a shoot)');
    const connect = await run(['--garden', '--path', 'connect', '--client', '203.0.113.9', runtime]);
    expect(connect.err).toContain('--garden does not take --path connect (the virtual garden has only the api path)');
    const both = await run(['--garden', '--client', '203.0.113.9', '--kubeconfig', '/nonexistent', runtime]);
    expect(both).toMatchObject({ code: 2, err: 'gardener-acl explain --garden: with --kubeconfig the objects come from the runtime cluster (and --virtual-garden-kubeconfig); drop the PATHs\n' });
    const forShoot = await run(['--shoot', 'shoot--p--a', '--client', '203.0.113.9', '--virtual-garden-kubeconfig', '/x']);
    expect(forShoot.code).toBe(2);
    expect(forShoot.err).toContain('--virtual-garden-kubeconfig is for --garden (the virtual garden’s ManagedSeeds)');
    const noEntry = await run(['--garden', '--client', '203.0.113.9', virtual]);
    expect(noEntry).toMatchObject({ code: 2, out: '' });
    expect(noEntry.err).toBe(
      "gardener-acl explain --garden: no acl entry in a Garden's spec.extensions and no Extension garden/garden-acl of class garden among the inputs; give the Garden (kubectl get garden -o yaml)\n",
    );
  });
});
