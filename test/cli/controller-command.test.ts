// `gardener-acl controller` refuses bad flags and configuration with exit code 2 and says why.
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

async function controller(...args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await run(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), 'controller', ...args], { cwd: ROOT, timeout: 30_000 });
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
  ])('%j', async (args, message) => {
    const { code, stderr } = await controller(...args);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  });

  it('names the file and field of an invalid OperatorConfiguration', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'gardener-acl-controller-'));
    const file = path.join(dir, 'operator.yaml');
    await writeFile(file, 'apiVersion: acl.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nadditionalAllowedCIDRs: [10.0.0.0/33]\n');
    const { code, stderr } = await controller('--config', file);
    expect(code).toBe(2);
    expect(stderr).toContain(`${file}: additionalAllowedCIDRs[0]: "10.0.0.0/33" is not a valid CIDR (prefix length "33" must be a number from 0 to 32)`);
  });
});
