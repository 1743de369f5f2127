// The CLI as it ships: compiled by tsc (not run through tsx) into a package laid out as npm
// installs it (package.json, dist/, examples/, node_modules), then started with node as a user
// would. Also the image's layout (examples under dist/, none at the root), and the completion
// scripts driven in a real bash.
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { completionCommand } from '../../src/cli/completion-command.js';
import { controllerCommand } from '../../src/cli/controller-command.js';
import { gardenControllerCommand } from '../../src/cli/garden-controller-command.js';
import { explainCommand } from '../../src/cli/explain-command.js';
import { registrationCommand } from '../../src/cli/registration-command.js';
import type { CommandIO } from '../../src/cli/command-io.js';
import { renderCommand } from '../../src/cli/render-command.js';
import { COMMANDS, commandUsage, type CommandName } from '../../src/cli/usage-texts.js';
import { validateCommand } from '../../src/cli/validate-command.js';
import { verifyCommand } from '../../src/cli/verify-command.js';
import { webhookCommand, webhookConfigCommand } from '../../src/cli/webhook-command.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const execFileP = promisify(execFile);

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function run(file: string, args: readonly string[], options: { cwd?: string } = {}): Promise<Ran> {
  try {
    const { stdout, stderr } = await execFileP(file, [...args], { cwd: options.cwd ?? tmpdir(), maxBuffer: 64 << 20, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: unknown; stdout?: string; stderr?: string; message: string };
    if (typeof e.code !== 'number') throw error;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** Packages --help must not load: what makes the commands slow to start. */
const HEAVY = ['@kubernetes/client-node', 'fastify', 'pino', 'prom-client', 'selfsigned'];

let work: string;
/** The npm-install layout: package.json, dist/src, examples/ at the root. */
let pkg: string;
/** The image's layout (Containerfile): package.json, dist/src, dist/examples, no examples/ at the root. */
let image: string;
let guard: string;
const main = (root: string) => path.join(root, 'dist', 'src', 'cli', 'main.js');
const cli = (...args: string[]) => run(process.execPath, [main(pkg), ...args]);

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'gardener-acl-compiled-'));
  pkg = path.join(work, 'pkg');
  image = path.join(work, 'image');
  await mkdir(pkg);
  await symlink(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'), 'dir');
  await cp(path.join(ROOT, 'package.json'), path.join(pkg, 'package.json'));
  await cp(path.join(ROOT, 'examples'), path.join(pkg, 'examples'), { recursive: true });
  // Only src/ is compiled, as the image ships it; tsconfig.json's own include would compile the tests too.
  const tsconfig = path.join(work, 'tsconfig.build.json');
  await writeFile(
    tsconfig,
    JSON.stringify({
      extends: path.join(ROOT, 'tsconfig.json'),
      compilerOptions: { rootDir: ROOT, outDir: path.join(pkg, 'dist'), typeRoots: [path.join(ROOT, 'node_modules', '@types')], sourceMap: false, incremental: false },
      include: [path.join(ROOT, 'src')],
    }),
  );
  const tsc = await run(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', tsconfig], { cwd: ROOT });
  if (tsc.code !== 0) throw new Error(`tsc failed (exit ${tsc.code}):\n${tsc.stdout}${tsc.stderr}`);

  await mkdir(image);
  await symlink(path.join(ROOT, 'node_modules'), path.join(image, 'node_modules'), 'dir');
  await cp(path.join(ROOT, 'package.json'), path.join(image, 'package.json'));
  await cp(path.join(pkg, 'dist'), path.join(image, 'dist'), { recursive: true });
  await cp(path.join(ROOT, 'examples'), path.join(image, 'dist', 'examples'), { recursive: true });

  // A module hook that refuses the heavy packages: the process fails if anything imports one.
  const hooks = path.join(work, 'refuse-heavy-hooks.mjs');
  await writeFile(
    hooks,
    `const HEAVY = ${JSON.stringify(HEAVY)};
export async function resolve(specifier, context, next) {
  if (HEAVY.some((h) => specifier === h || specifier.startsWith(h + '/'))) throw new Error('imported ' + specifier);
  return next(specifier, context);
}
`,
  );
  guard = path.join(work, 'refuse-heavy.mjs');
  await writeFile(guard, `import { register } from 'node:module';\nregister(${JSON.stringify(new URL(`file://${hooks}`).href)});\n`);
}, 300_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the compiled gardener-acl', () => {
  it('--help exits 0 and lists every command with its usage', async () => {
    const { code, stdout } = await cli('--help');
    expect(code).toBe(0);
    for (const { name, summary } of COMMANDS) {
      expect(stdout).toMatch(new RegExp(`^  ${name} +${summary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'));
      if (name !== 'version') expect(stdout).toContain(`usage: gardener-acl ${name}`);
    }
  });

  it('--help loads none of the packages the commands run on', async () => {
    const help = await run(process.execPath, ['--import', guard, main(pkg), '--help']);
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    // The guard works: verify reads live seeds, so its module loads @kubernetes/client-node.
    const verify = await run(process.execPath, ['--import', guard, main(pkg), 'verify', '--help']);
    expect(verify.code).toBe(1);
    expect(verify.stderr).toContain('imported @kubernetes/client-node');
  });

  it('render without a path prints the embedded example seed, as the source tree does', async () => {
    const { code, stdout } = await cli('render');
    expect(code).toBe(0);
    const objects = parseAllDocuments(stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    expect(objects.filter((o) => o.kind === 'EnvoyFilter').map((o) => o.metadata.name)).toContain('acl-shoot--team--prod');
    let fromSource = '';
    const io: CommandIO = { stdout: (t) => (fromSource += t), stderr: () => undefined };
    expect(await renderCommand([], io)).toBe(0);
    expect(stdout).toBe(fromSource);
  });

  it('render without a path in the image layout (examples under dist/) prints the same', async () => {
    const inImage = await run(process.execPath, [main(image), 'render']);
    expect(inImage.code).toBe(0);
    expect(inImage.stdout).toBe((await cli('render')).stdout);
  });

  it('explain without a path explains a shoot of the embedded example seed', async () => {
    const { code, stdout, stderr } = await cli('explain', '--shoot', 'shoot--team--prod', '--client', '203.0.113.9');
    expect(stderr).not.toContain('cannot read');
    expect([0, 1, 3]).toContain(code);
    expect(stdout).toMatch(/^shoot--team--prod: /);
  });

  it('an owner’s offline check as a user runs it: validate refuses what the webhook refuses (exit 1), explain answers for the manifest alone (exit 0)', async () => {
    const manifest = path.join(work, 'my-shoot.yaml');
    const shoot = (rule: string) =>
      `apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\nmetadata: {name: prod, namespace: garden-team}\nspec:\n  extensions:\n  - type: acl\n    providerConfig: {rule: ${rule}}\n`;
    await writeFile(manifest, shoot('{action: ALLOW, type: remote_ip, cidrs: [10.0.0.300/8]}'));
    const refused = await cli('validate', manifest);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`error: ${manifest} (document 1): Shoot garden-team/prod: the Shoot webhook refuses it (422 Invalid): spec.extensions[0].providerConfig.rule.cidrs[0]: "10.0.0.300/8" is not a valid CIDR`);
    await writeFile(manifest, shoot('{action: ALLOW, type: remote_ip, cidrs: [198.51.100.0/24]}'));
    expect((await cli('validate', manifest)).code).toBe(0);
    const explained = await cli('explain', '--client', '198.51.100.7', '--always-allowed', '10.250.0.0/16', manifest);
    expect(explained.code).toBe(0);
    expect(explained.stdout).toMatch(/^shoot--team--prod: ALLOW remote_ip \[198\.51\.100\.0\/24\]\nadmitted api /);
  });

  it('version prints package.json\'s version', async () => {
    const { version } = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(await cli('version')).toEqual({ code: 0, stdout: `gardener-acl ${version}\n`, stderr: '' });
  });

  it('completion of an unknown shell exits 2, naming it and the choices', async () => {
    const { code, stdout, stderr } = await cli('completion', 'fish');
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^SHELL "fish" has no completion script; give one of bash, zsh\nusage: gardener-acl completion bash\|zsh/);
  });

  it('completion zsh is a zsh completion function for gardener-acl', async () => {
    const { code, stdout } = await cli('completion', 'zsh');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^#compdef gardener-acl\n/);
    expect(stdout).toContain('compdef _gardener-acl gardener-acl');
    for (const { name } of COMMANDS) expect(stdout).toMatch(new RegExp(`^    ${name}\\)$`, 'm'));
  });
});

describe('completion bash, sourced into bash', () => {
  let script: string;
  beforeAll(async () => {
    const { code, stdout } = await cli('completion', 'bash');
    expect(code).toBe(0);
    script = path.join(work, 'gardener-acl.bash');
    await writeFile(script, stdout);
  });

  /** What bash offers for the command line `words` (the last one being completed), as its completion function sees it. */
  async function complete(...words: string[]): Promise<string[]> {
    // The function is found as bash's `complete -p` reports it, so the registration is tested too.
    const driver = `set -u
source "$1"; shift
spec=$(complete -p gardener-acl)
[[ $spec == 'complete -o default -F '*' gardener-acl' ]] || { echo "registered as: $spec" >&2; exit 3; }
fn=\${spec#*-F }; fn=\${fn%% *}
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=\${#COMP_LINE}
COMPREPLY=()
"$fn" gardener-acl "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\\n' "\${COMPREPLY[@]}"`;
    const { code, stdout, stderr } = await run('bash', ['--norc', '--noprofile', '-c', driver, 'bash', script, ...words]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    return stdout.split('\n').filter((w) => w !== '');
  }

  it('completes a command', async () => {
    expect(await complete('gardener-acl', 'ren')).toEqual(['render']);
    expect(await complete('gardener-acl', 'webhook')).toEqual(['webhook', 'webhook-config']);
  });

  it("offers a command's flags, and the words a flag takes", async () => {
    expect(await complete('gardener-acl', 'render', '--o')).toEqual(['--output']);
    expect(await complete('gardener-acl', 'render', '--output', '')).toEqual(['yaml', 'json']);
    expect(await complete('gardener-acl', 'explain', '--path', 'c')).toEqual(['connect']);
    expect(await complete('gardener-acl', 'completion', '')).toEqual(['bash', 'zsh']);
  });

  it('leaves paths to bash (no words: complete -o default completes file names)', async () => {
    expect(await complete('gardener-acl', 'render', 'examples/')).toEqual([]);
  });

  it("offers every --flag each command's usage text names", async () => {
    for (const { name } of COMMANDS) {
      const usage = (await commandUsage(name)) ?? '';
      const named = new Set(usage.match(/(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]/g) ?? []);
      const offered = await complete('gardener-acl', name, '--');
      expect({ name, missing: [...named].filter((f) => !offered.includes(f)) }).toEqual({ name, missing: [] });
    }
  });
});

describe('the flags completion offers', () => {
  const RUN: Record<Exclude<CommandName, 'version'>, (argv: readonly string[], io: CommandIO) => Promise<number>> = {
    render: renderCommand,
    explain: explainCommand,
    verify: verifyCommand,
    validate: validateCommand,
    controller: controllerCommand,
    'garden-controller': gardenControllerCommand,
    registration: registrationCommand,
    webhook: webhookCommand,
    'webhook-config': webhookConfigCommand,
    completion: completionCommand,
  };

  it("are each accepted by the command's parser (a usage text naming a flag the command lacks fails here)", async () => {
    const { commandCompletions } = await import('../../src/cli/completion-command.js');
    for (const { name, flags } of await commandCompletions()) {
      if (name === 'version') continue;
      for (const flag of flags) {
        let err = '';
        // With --help after it the command stops at the parser: usage (0), or a flag missing its value (2).
        const code = await RUN[name]([flag, '--help'], { stdout: () => undefined, stderr: (t) => (err += t) });
        expect({ name, flag, unknown: err.includes('Unknown option') }).toEqual({ name, flag, unknown: false });
        expect([0, 2]).toContain(code);
      }
    }
  });
});
