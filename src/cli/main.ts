#!/usr/bin/env node
// Each command's module is imported only when that command runs: together they pull in
// @kubernetes/client-node, fastify, pino and prom-client, which `--help` (and `completion`, sourced
// by every new shell) would otherwise wait for.
import type { CommandIO } from './command-io.js';
import { isCommandName, mainUsage, type CommandName } from './usage-texts.js';

const io: CommandIO = {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  drained: () => new Promise((resolve) => process.stdout.once('drain', resolve)),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Uint8Array));
    return Buffer.concat(chunks).toString('utf8');
  },
};

// A Record, not a switch, so that a command added to COMMANDS (the listing) without a runner fails to compile.
const RUN: Record<CommandName, (argv: readonly string[]) => Promise<number>> = {
  render: async (argv) => (await import('./render-command.js')).renderCommand(argv, io),
  explain: async (argv) => (await import('./explain-command.js')).explainCommand(argv, io),
  verify: async (argv) => (await import('./verify-command.js')).verifyCommand(argv, io),
  validate: async (argv) => (await import('./validate-command.js')).validateCommand(argv, io),
  controller: async (argv) => (await import('./controller-command.js')).controllerCommand(argv, io),
  'garden-controller': async (argv) => (await import('./garden-controller-command.js')).gardenControllerCommand(argv, io),
  registration: async (argv) => (await import('./registration-command.js')).registrationCommand(argv, io),
  webhook: async (argv) => (await import('./webhook-command.js')).webhookCommand(argv, io),
  'webhook-config': async (argv) => (await import('./webhook-command.js')).webhookConfigCommand(argv, io),
  completion: async (argv) => (await import('./completion-command.js')).completionCommand(argv, io),
  version: async () => {
    io.stdout(`gardener-acl ${(await import('./version.js')).packageVersion()}\n`);
    return 0;
  },
};

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (isCommandName(command)) return RUN[command](rest);
  switch (command) {
    case '--version':
      return RUN.version(rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.stdout(`${await mainUsage()}\n`);
      return command === undefined ? 2 : 0;
    default:
      io.stderr(`unknown command "${command}"\n${await mainUsage()}\n`);
      return 2;
  }
}

/** Whether the failure is a kubeconfig the user can fix (said in one line, not as a stack). */
async function isKubeConfigProblem(error: unknown): Promise<boolean> {
  // The name is checked first: kubeconfig.js loads @kubernetes/client-node, not worth it for other failures.
  if (!(error instanceof Error) || error.name !== 'KubeConfigProblem') return false;
  const { KubeConfigProblem } = await import('./kubeconfig.js');
  return error instanceof KubeConfigProblem;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  async (error: unknown) => {
    if (await isKubeConfigProblem(error).catch(() => false)) {
      process.stderr.write(`gardener-acl: ${(error as Error).message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`gardener-acl: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
