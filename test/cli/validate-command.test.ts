// `gardener-acl validate`: the Shoot webhook's verdict and texts offline, and the controller's check
// of an Extension's providerConfig; exit 0 admitted, 1 refused, 2 nothing checkable or bad input.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateCommand } from '../../src/cli/validate-command.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { validateShoot } from '../../src/webhook/shoot-validator.js';

async function run(args: string[], stdin?: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await validateCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t), ...(stdin === undefined ? {} : { readStdin: () => Promise.resolve(stdin) }) });
  return { code, out, err };
}

async function file(name: string, text: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'acl-validate-'));
  const target = path.join(dir, name);
  await writeFile(target, text);
  return target;
}

const shoot = (name: string, rule: string): string => `apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: ${name}, namespace: garden-team}
spec:
  extensions:
  - type: acl
    providerConfig:
      rule: ${rule}
`;

describe('gardener-acl validate', () => {
  it('a valid Shoot: exit 0 and the webhook’s warnings, word for word', async () => {
    const manifest = shoot('prod', '{action: ALLOW, type: remote_ip, cidrs: [10.1.2.3/8]}');
    const result = await run([await file('shoot.yaml', manifest)]);
    expect(result.code).toBe(0);
    expect(result.out).toBe('1 object(s) checked, 0 refused (maxCIDRs 50)\n');
    const webhook = validateShoot({ uid: 'u', kind: { group: 'core.gardener.cloud', version: 'v1beta1', kind: 'Shoot' }, operation: 'CREATE', object: (await import('yaml')).parse(manifest) }, 50);
    expect(webhook.allowed).toBe(true);
    const warnings = webhook.allowed ? (webhook.warnings ?? []) : [];
    expect(warnings.length).toBeGreaterThan(0);
    for (const warning of warnings) expect(result.err).toContain(`: Shoot garden-team/prod: ${warning}\n`);
    expect(result.err).toContain('"10.1.2.3/8" has host bits set');
  });

  it('a refused Shoot: exit 1, the webhook’s code, reason and message, every line naming file and object', async () => {
    const target = await file('bad.yaml', shoot('bad', '{action: PERMIT, type: remote_ip, cidr: [10.0.0.0/8]}'));
    const result = await run([target]);
    expect(result.code).toBe(1);
    expect(result.out).toBe('1 object(s) checked, 1 refused (maxCIDRs 50)\n');
    const at = `error: ${target} (document 1): Shoot garden-team/bad: `;
    expect(result.err).toBe(
      `${at}the Shoot webhook refuses it (422 Invalid): spec.extensions[0].providerConfig.rule.action: "PERMIT" is not a valid action; use ALLOW or DENY\n` +
        `${at}spec.extensions[0].providerConfig.rule.cidrs: is required; the rule has "cidr" instead: rename it to cidrs\n`,
    );
  });

  it('maxCIDRs comes from --config or --max-cidrs, as the operator set it for the webhook', async () => {
    const target = await file('two.yaml', shoot('two', '{action: ALLOW, type: remote_ip, cidrs: [10.0.0.0/8, 192.168.0.0/16]}'));
    expect((await run([target])).code).toBe(0);
    const limited = await run(['--max-cidrs', '1', target]);
    expect(limited.code).toBe(1);
    expect(limited.err).toContain('has 2 distinct ranges (repeated entries and ranges inside others not counted), more than the maximum of 1 set by the operator');
    const config = await file('op.yaml', 'apiVersion: acl.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nmaxCIDRs: 1\n');
    expect((await run(['--config', config, target])).code).toBe(1);
    const both = await run(['--config', config, '--max-cidrs', '1', target]);
    expect(both.code).toBe(2);
    expect(both.err).toMatch(/^give either --config or --max-cidrs, not both\n/);
    const bad = await run(['--max-cidrs', 'many', target]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/^--max-cidrs must be a whole number from 1 to 99999, not "many"\n/);
  });

  it('Extension objects of the seed get the controller’s check; other kinds are counted, not silently skipped', async () => {
    const result = await run([EMBEDDED_EXAMPLE]);
    expect(result.code).toBe(0);
    expect(result.out).toBe('4 object(s) checked, 0 refused (maxCIDRs 50)\n');
    expect(result.err).toContain("Extension shoot--team--prod-eu/acl: spec.providerConfig.rule.cidrs: ::/0 refuses every IPv6 client on every path");
    expect(result.err).toMatch(/note: not checked: 3 Deployment, 1 Service, 7 Gateway, 5 Cluster, 3 Infrastructure, 1 EnvoyFilter \(validate checks Shoot manifests and Extension objects of type acl\)\n$/);
    // The directory's own OperatorConfiguration sets maxCIDRs, as for render and explain.
    const dir = path.dirname(await file('00-operator.yaml', 'apiVersion: acl.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nmaxCIDRs: 1\n'));
    await writeFile(path.join(dir, 'shoot.yaml'), shoot('two', '{action: ALLOW, type: remote_ip, cidrs: [10.0.0.0/8, 192.168.0.0/16]}'));
    const own = await run([dir]);
    expect(own.code).toBe(1);
    expect(own.out).toBe('1 object(s) checked, 1 refused (maxCIDRs 1)\n');
    const bad = await run([await file('ext.yaml', 'apiVersion: extensions.gardener.cloud/v1alpha1\nkind: Extension\nmetadata: {name: acl, namespace: shoot--a--b}\nspec: {type: acl, providerConfig: {rule: {action: ALLOW, type: remote_ip, cidrs: []}}}\n')]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('Extension shoot--a--b/acl: the controller refuses it (the Extension goes Error with this lastError): spec.providerConfig.rule.cidrs: must list at least one CIDR');
  });

  it('a Shoot without the acl extension is admitted with a note; nothing checkable or a typo of kind is exit 2', async () => {
    const plain = await run([await file('plain.yaml', 'apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\nmetadata: {name: p, namespace: garden-team}\nspec: {extensions: [{type: ACL}]}\n')]);
    expect(plain.code).toBe(0);
    expect(plain.err).toContain('Shoot garden-team/p: no enabled extension of type "acl" in spec.extensions: it has no ACL');
    const typo = await run([await file('typo.yaml', 'kind: Shot\nmetadata: {name: p}\n')]);
    expect(typo.code).toBe(2);
    expect(typo.err).toBe('note: not checked: 1 Shot (validate checks Shoot manifests and Extension objects of type acl)\ngardener-acl validate: no Shoot or acl Extension in the input; nothing was checked\n');
    const none = await run([]);
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/^give at least one FILE/);
  });

  it('reads stdin for -', async () => {
    const result = await run(['-'], shoot('s', '{action: DENY, type: remote_ip, cidrs: [0.0.0.0/0]}'));
    expect(result.code).toBe(0);
    expect(result.err).toContain('warning: stdin (document 1): Shoot garden-team/s: ');
  });
});
