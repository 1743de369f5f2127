// `gardener-acl explain` on a Shoot manifest, the owner's ACL before it is applied: with the seed's
// objects it replaces what the seed holds for that shoot (and gives the verdicts the same ACL gives
// when it is the seed's own); alone, the shoot's node range and --always-allowed are what the seed adds.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { explainCommand } from '../../src/cli/explain-command.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { formatProblem } from '../../src/gardener/problems.js';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await explainCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

async function manifest(text: string): Promise<string> {
  const file = path.join(await mkdtemp(path.join(tmpdir(), 'acl-manifest-')), 'shoot.yaml');
  await writeFile(file, text);
  return file;
}

const PROD = (rule: string, extra = ''): string => `apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: prod, namespace: garden-team}
spec:
  dns: {domain: prod.team.example.com}
  networking: {nodes: 10.180.0.0/16}
  provider: {workers: [{name: pool-a}]}
${extra}  extensions:
  - type: acl
    providerConfig:
      rule: ${rule}
`;

describe('gardener-acl explain with a Shoot manifest', () => {
  it('with the seed’s objects: the manifest’s rule decides, not the seed’s Extension', async () => {
    // The seed admits 203.0.113.0/24 for shoot--team--prod; the manifest narrows it to 198.51.100.0/24.
    const file = await manifest(PROD('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}'));
    const seedOnly = await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.9', '--path', 'api', EMBEDDED_EXAMPLE]);
    expect(seedOnly.code).toBe(0);
    const withManifest = await run(['--client', '203.0.113.9', '--path', 'api', EMBEDDED_EXAMPLE, file]);
    expect(withManifest.code).toBe(1);
    expect(withManifest.out).toMatch(/^shoot--team--prod: ALLOW remote_ip \[198\.51\.100\.0\/24\]\n/);
    expect(withManifest.err).toBe(`note: shoot--team--prod: explaining the ACL in ${file} (document 1) (Shoot garden-team/prod), not the one the seed holds\n`);
    // The seed's own always-allowed ranges still apply (its additionalAllowedCIDRs 192.0.2.0/28).
    expect((await run(['--client', '192.0.2.3', '--path', 'api', EMBEDDED_EXAMPLE, file])).code).toBe(0);
  });

  it('alone: the shoot’s node range and the ranges given with --always-allowed are admitted, the rule decides the rest', async () => {
    const file = await manifest(PROD('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}'));
    const nodes = await run(['--client', '10.180.3.3', '--path', 'api', file]);
    expect(nodes.code).toBe(0);
    expect(nodes.out).toBe(
      'shoot--team--prod: ALLOW remote_ip [198.51.100.0/24]\n' +
        'admitted api           istio-ingress  SNI api.prod.team.example.com (port 9443)\n' +
        '         remote_ip 10.180.3.3 is in no ALLOW range, but remote_ip 10.180.3.3 is in the always-allowed range 10.180.0.0/16\n',
    );
    expect(nodes.err).toContain('note: without the seed\'s objects its always-allowed ranges (seed nodes and pods, shoot egress, the operator\'s additionalAllowedCIDRs) are unknown');
    const outside = await run(['--client', '10.250.0.9', file]);
    expect(outside.code).toBe(1);
    const given = await run(['--client', '10.250.0.9', '--always-allowed', '10.250.0.0/16', file]);
    expect(given.code).toBe(0);
    expect(given.out).toContain('is in the always-allowed range 10.250.0.0/16');
    expect(given.out).toContain('CONNECT port 8443');
    expect(given.err).not.toContain('are unknown');
  });

  it('refuses what cannot be answered: --always-allowed with the seed’s objects, a bad range, a manifest without its project namespace, two manifests without --shoot', async () => {
    const file = await manifest(PROD('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}'));
    const withSeed = await run(['--client', '10.0.0.1', '--always-allowed', '10.0.0.0/8', EMBEDDED_EXAMPLE, file]);
    expect(withSeed.code).toBe(2);
    expect(withSeed.err).toContain("--always-allowed is for a Shoot manifest explained without the seed's objects");
    const badRange = await run(['--client', '10.0.0.1', '--always-allowed', '10.0.0.0/33', file]);
    expect(badRange.code).toBe(2);
    expect(badRange.err).toMatch(/^--always-allowed "10\.0\.0\.0\/33" is not a CIDR/);
    const elsewhere = await manifest(PROD('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}').replace('namespace: garden-team', 'namespace: team-space'));
    const noId = await run(['--client', '10.0.0.1', elsewhere]);
    expect(noId.code).toBe(2);
    expect(noId.err).toContain('Shoot team-space/prod: cannot tell its technical ID: the namespace "team-space" is not garden-<project> and status.technicalID is not set');
    const second = await manifest(PROD('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}').replace('name: prod,', 'name: dev,'));
    const two = await run(['--client', '10.0.0.1', file, second]);
    expect(two.code).toBe(2);
    expect(two.err).toContain("\n--shoot is required: the inputs hold 2 Shoot manifests (shoot--team--prod, shoot--team--dev)");
    expect((await run(['--client', '10.180.0.1', '--shoot', 'shoot--team--dev', file, second])).code).toBe(0);
  });

  it('a manifest whose acl extension is removed explains the shoot without ACL', async () => {
    const file = await manifest(PROD('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}').replace('- type: acl', '- type: acl\n    disabled: true'));
    const result = await run(['--client', '203.0.113.200', '--path', 'api', EMBEDDED_EXAMPLE, file]);
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/^shoot--team--prod: no ACL/);
  });
});

describe('problems spanning several lines', () => {
  it('every line names the object, so none is orphaned', () => {
    expect(formatProblem({ severity: 'error', object: 'f.yaml (document 2): Extension a/acl', message: 'x: one\ny: two' })).toBe('error: f.yaml (document 2): Extension a/acl: x: one\nerror: f.yaml (document 2): Extension a/acl: y: two');
  });
});
