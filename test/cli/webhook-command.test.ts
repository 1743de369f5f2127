// `gardener-acl webhook` on ordinary mistakes: said in one line with the fix and exit 2, no stack.
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

async function webhook(...args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await run(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'webhook', ...args], { cwd: ROOT, timeout: 30_000 });
    return { code: 0, stderr: '' };
  } catch (error) {
    const e = error as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

describe('gardener-acl webhook input errors', () => {
  it('no certificates in --cert-dir: names the directory and the two other ways', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-no-certs-'));
    const { code, stderr } = await webhook('--webhooks', 'shoot', '--cert-dir', dir);
    expect(code).toBe(2);
    expect(stderr).toBe(
      `--cert-dir ${dir}: no usable tls.crt and tls.key (ENOENT: no such file or directory, open '${path.join(dir, 'tls.crt')}'); mount the serving Secret there, ` +
        'or give --certificates-namespace NS (the server keeps its own certificates) or --self-signed (development)\n',
    );
  });

  it('a port another process listens on: names it, exit 2, no stack', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const probePort = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    try {
      const { code, stderr } = await webhook('--webhooks', 'shoot', '--self-signed', '--host', '127.0.0.1', '--port', String(port), '--probe-port', String(probePort));
      expect(code).toBe(2);
      expect(stderr).toContain(`--port ${port}: another process listens on 127.0.0.1:${port}; stop it or choose another port with --port\n`);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
