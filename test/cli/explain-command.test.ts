// `gardener-acl explain` on bad input: an error about the shoot asked for (or the seed) gives no
// verdict and exit 2, naming the field; an error about another shoot does not stop the answer.
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { explainCommand } from '../../src/cli/explain-command.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await explainCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

/** The example seed with one CIDR of a shoot made invalid (by default shoot--team--prod's first). */
async function brokenExample(shoot = 'shoot--team--prod', from = '203.0.113.0/24', to = '203.0.113.0/33'): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'acl-explain-'));
  await cp(EMBEDDED_EXAMPLE, dir, { recursive: true });
  const file = path.join(dir, `${shoot}.yaml`);
  const text = await readFile(file, 'utf8');
  if (!text.includes(from)) throw new Error(`${file} has no ${from}`);
  await writeFile(file, text.replace(from, to));
  return dir;
}

describe('gardener-acl explain with bad input', () => {
  it('an invalid ACL of the shoot asked for: no verdict, exit 2, the field named and what the controller does meanwhile', async () => {
    const result = await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.9', await brokenExample()]);
    expect(result.code).toBe(2);
    expect(result.out).toBe('');
    expect(result.err).toContain('spec.providerConfig.rule.cidrs[0]: "203.0.113.0/33" is not a valid CIDR');
    expect(result.err).toContain('no verdict. The controller keeps the ACL it last applied');
  });

  it('an invalid ACL of another shoot: the verdict is given, the other error only counted', async () => {
    const result = await run(['--shoot', 'shoot--web--shop', '--client', '203.0.113.9', '--path', 'connect', await brokenExample()]);
    expect(result.code).not.toBe(2);
    expect(result.out).toMatch(/^shoot--web--shop: /);
    expect(result.err).toBe('(1 error(s) about other shoots not shown)\n');
  });

  it('an error about a shoot whose name the asked shoot is a prefix of (prod-eu, prod) does not stop the answer for the other', async () => {
    const dir = await brokenExample('shoot--team--prod-eu', '0.0.0.0/1', '10.0.0.300/8');
    const result = await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.5', '--path', 'api', dir]);
    expect(result.code).not.toBe(2);
    expect(result.out).toMatch(/^shoot--team--prod: /);
    expect(result.err).toBe('(1 error(s) about other shoots not shown)\n');
    // And the other way round: the broken shoot itself gets no verdict.
    expect((await run(['--shoot', 'shoot--team--prod-eu', '--client', '203.0.113.5', '--path', 'api', dir])).code).toBe(2);
  });

  it('a client address copied from an access log, with its port, gets the same verdict', async () => {
    const plain = await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.5', '--path', 'api']);
    expect(await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.5:443', '--path', 'api'])).toEqual(plain);
    const v6 = await run(['--shoot', 'shoot--team--prod', '--client', '[2001:db8:100::7]:50000', '--path', 'api']);
    expect(v6).toEqual(await run(['--shoot', 'shoot--team--prod', '--client', '2001:db8:100::7', '--path', 'api']));
    expect(v6.code).toBe(0);
  });

  it('--header with a path it has no effect on is refused, naming the fix', async () => {
    const result = await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.5', '--path', 'api', '--header', 'Reversed-VPN: x']);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/^--header describes a CONNECT request; it has no effect on --path api: drop --path \(every path\) or use --path connect\n/);
  });

  it('audit mode: a client the rule would refuse is admitted, and the exit code (3) says enforce would refuse', async () => {
    const refused = await run(['--shoot', 'shoot--team--prod', '--client', '192.0.2.99', '--path', 'api']);
    expect(refused.code).toBe(1);
    const dir = await brokenExample('shoot--team--prod', '      cidrs: [203.0.113.0/24, 2001:db8:100::/48]', '      cidrs: [203.0.113.0/24, 2001:db8:100::/48]\n      mode: audit');
    const audit = await run(['--shoot', 'shoot--team--prod', '--client', '192.0.2.99', '--path', 'api', '--output', 'json', dir]);
    expect(audit.code).toBe(3);
    const verdicts = (JSON.parse(audit.out) as { verdicts: { verdict: string; enforceWouldRefuse?: boolean; reason: string }[] }).verdicts;
    expect(verdicts.length).toBeGreaterThan(0);
    for (const v of verdicts) expect(v).toMatchObject({ verdict: 'admitted', enforceWouldRefuse: true, reason: expect.stringContaining('audit mode, nothing is refused; enforce would refuse') });
    // A client the rule admits: exit 0 in audit mode too.
    expect((await run(['--shoot', 'shoot--team--prod', '--client', '203.0.113.5', '--path', 'api', dir])).code).toBe(0);
  });

  it('a shoot the objects do not hold is exit 2, not an admission on every path', async () => {
    const result = await run(['--shoot', 'shoot--me--test', '--client', '203.0.113.5']);
    expect(result).toEqual({ code: 2, out: '', err: 'gardener-acl explain: no Cluster or Extension of shoot--me--test in the objects given; check the technical ID (shoot--<project>--<name>, the shoot namespace on the seed)\n' });
  });

  it('a missing path or operator configuration is exit 2', async () => {
    expect((await run(['--shoot', 'shoot--team--prod', '--client', '10.0.0.1', '/nonexistent'])).code).toBe(2);
    const config = await run(['--shoot', 'shoot--team--prod', '--client', '10.0.0.1', '--config', path.join(EMBEDDED_EXAMPLE, 'shoot--team--prod.yaml')]);
    expect(config).toMatchObject({ code: 2, err: expect.stringMatching(/no OperatorConfiguration in it\n$/) });
  });
});
