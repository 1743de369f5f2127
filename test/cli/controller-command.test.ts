// `gardener-acl controller` refuses bad flags and configuration with exit code 2 and says why.
import { execFile, spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

async function controller(...args: string[]): Promise<{ code: number; stderr: string }> {
  return controllerWithEnv(process.env, ...args);
}

async function controllerWithEnv(env: NodeJS.ProcessEnv, ...args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await run(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller', ...args], { cwd: ROOT, timeout: 30_000, env });
    return { code: 0, stderr: '' };
  } catch (error) {
    const e = error as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

describe('gardener-acl controller input errors', () => {
  it.each([
    [['--workers', '0'], '--workers: must be a whole number from 1 to 100'],
    [['--workers', 'many'], '--workers: must be a number'],
    [['--resync-period', '5x'], '--resync-period: "5x" is not a duration; write e.g. 500ms, 30s, 10m, 1h or 30d'],
    [['--leader-elect', 'maybe'], '--leader-elect: must be true or false'],
    [['--lease-duration', '1s', '--renew-deadline', '2s'], '--lease-duration must exceed --renew-deadline'],
    [['--frobnicate'], "Unknown option '--frobnicate'"],
    [['--no-seed-webhook', '--webhook-certificates-namespace', 'garden', '--webhook-service', 'gardener-acl.garden'], '--no-seed-webhook and --webhook-certificates-namespace contradict each other: give one'],
  ])('%j', async (args, message) => {
    const { code, stderr } = await controller(...args);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  });

  it('a kubeconfig it cannot use is said in one line with the fix, exit 2, no stack', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-kubeconfig-'));
    const empty = path.join(dir, 'empty.yaml');
    await writeFile(empty, '{}\n');
    const broken = path.join(dir, 'broken.yaml');
    await writeFile(broken, 'clusters: [\n');
    const fix = 'give a kubeconfig with --kubeconfig or $KUBECONFIG (or run in a cluster, with its ServiceAccount)';
    const missing = await controller('--kubeconfig', '/nonexistent/kubeconfig');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^kubeconfig \/nonexistent\/kubeconfig: ENOENT: no such file or directory/);
    expect(missing.stderr).toContain(fix);
    const none = await controller('--kubeconfig', empty);
    expect(none).toEqual({ code: 2, stderr: `kubeconfig ${empty}: its current context (none) names no cluster with a server; ${fix}\n` });
    const yaml = await controller('--kubeconfig', broken);
    expect(yaml.code).toBe(2);
    expect(yaml.stderr).toMatch(new RegExp(`^kubeconfig ${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
    for (const r of [missing, none, yaml]) expect(r.stderr).not.toMatch(/\n\s+at /);
    // None at all, outside a cluster and without ~/.kube/config: said at once, not retried forever.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT'].includes(k)));
    const nothing = await controllerWithEnv({ ...env, HOME: dir });
    expect(nothing).toEqual({ code: 2, stderr: `no kubeconfig: not in a cluster, and neither --kubeconfig, $KUBECONFIG nor ${path.join(dir, '.kube', 'config')} is there; ${fix}\n` });
  });

  it('SIGTERM before the first list completed: a clean exit 0, no internal error', async () => {
    // An API server that accepts connections and never answers: the caches never list.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-sigterm-'));
    const kubeconfig = path.join(dir, 'kubeconfig');
    const server = `https://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    await writeFile(kubeconfig, `apiVersion: v1\nkind: Config\nclusters: [{name: s, cluster: {server: '${server}', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: s, context: {cluster: s, user: u}}]\ncurrent-context: s\n`);
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller', '--kubeconfig', kubeconfig, '--leader-elect', 'false', '--probe-port', '0'], { cwd: ROOT });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      // Give it time to start listing (tsx start-up included), then stop it.
      for (let i = 0; i < 150 && !stdout.includes('gardener-acl-controller'); i++) await new Promise((r) => setTimeout(r, 100));
      child.kill('SIGTERM');
      const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      expect(stderr).not.toContain('internal error');
      expect(code).toBe(0);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  }, 60_000);

  it('names the file and field of an invalid OperatorConfiguration', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-controller-'));
    const file = path.join(dir, 'operator.yaml');
    await writeFile(file, 'apiVersion: acl.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nadditionalAllowedCIDRs: [10.0.0.0/33]\n');
    const { code, stderr } = await controller('--config', file);
    expect(code).toBe(2);
    expect(stderr).toContain(`${file}: additionalAllowedCIDRs[0]: "10.0.0.0/33" is not a valid CIDR (prefix length "33" must be a number from 0 to 32)`);
  });
});
