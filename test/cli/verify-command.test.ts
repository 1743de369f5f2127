// `gardener-acl verify` on bad input: each mistake ends with exit 2 and a line that names it and
// the fix, before any verdict (the verdicts themselves are tested on a real Envoy in
// test/served/served-protection-live.test.ts).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyCommand } from '../../src/cli/verify-command.js';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await verifyCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

async function file(name: string, text: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'acl-verify-'));
  await writeFile(path.join(dir, name), text);
  return path.join(dir, name);
}

describe('gardener-acl verify with bad input', () => {
  it('neither or both dump sources: usage error naming both', async () => {
    for (const args of [[], ['--config-dump', 'x.json', '--admin-url', 'http://127.0.0.1:15000']]) {
      const result = await run(args);
      expect(result.code).toBe(2);
      expect(result.err).toContain("give exactly one of --config-dump FILE (the gateway Envoy's /config_dump) and --admin-url URL (its admin address), or --kubeconfig alone to read every gateway pod of the live seed");
    }
  });

  it('a seed with several gateways and no --gateway: the gateways are listed', async () => {
    const result = await run(['--config-dump', 'x.json']);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/^the seed has \d+ gateways; name one with --gateway \(istio-ingress, /);
  });

  it('an unknown gateway namespace, an unknown shoot, a bad technical ID', async () => {
    const gateway = await run(['--config-dump', 'x.json', '--gateway', 'istio-ingres']);
    expect(gateway.code).toBe(2);
    expect(gateway.err).toMatch(/^gardener-acl verify: --gateway istio-ingres is not an ingress gateway namespace of this seed; the seed's are istio-ingress/);
    const shoot = await run(['--config-dump', 'x.json', '--gateway', 'istio-ingress', '--shoot', 'shoot--team--nope']);
    expect(shoot.code).toBe(2);
    expect(shoot.err).toBe('gardener-acl verify: no Cluster or Extension of shoot--team--nope in the objects given; check the technical ID (shoot--<project>--<name>, the shoot namespace on the seed)\n');
    const id = await run(['--config-dump', 'x.json', '--shoot', 'team-prod']);
    expect(id.code).toBe(2);
    expect(id.err).toContain('--shoot "team-prod" is not a technical ID; write shoot--<project>--<name>');
  });

  it('a dump that cannot be read, is not JSON, or holds no listener: no verdict', async () => {
    const missing = await run(['--config-dump', '/nonexistent/dump.json', '--gateway', 'istio-ingress']);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/^gardener-acl verify: cannot read the gateway's config dump: .*ENOENT/);
    const notJson = await run(['--config-dump', await file('dump.json', '<html>'), '--gateway', 'istio-ingress']);
    expect(notJson.code).toBe(2);
    expect(notJson.err).toMatch(/^gardener-acl verify: cannot read the gateway's config dump: .*JSON/);
    const empty = await run(['--config-dump', await file('dump.json', '{"configs":[{"@type":"type.googleapis.com/envoy.admin.v3.BootstrapConfigDump"}]}'), '--gateway', 'istio-ingress']);
    expect(empty).toEqual({ code: 2, out: '', err: "gardener-acl verify: the config dump holds no listeners; give the gateway Envoy's whole admin /config_dump (not a single section, not a sidecar's)\n" });
  });

  it('an admin URL nothing answers on: no verdict, the URL named', async () => {
    // A loopback port that was free a moment ago.
    const server = createServer();
    const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
    await new Promise((resolve) => server.close(resolve));
    const result = await run(['--admin-url', `http://127.0.0.1:${port}`, '--gateway', 'istio-ingress']);
    expect(result.code).toBe(2);
    expect(result.err).toBe(`gardener-acl verify: cannot read the gateway's config dump: GET http://127.0.0.1:${port}/config_dump: connect ECONNREFUSED 127.0.0.1:${port}\n`);
  });
});
