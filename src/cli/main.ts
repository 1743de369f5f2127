#!/usr/bin/env node
import { CONTROLLER_USAGE, controllerCommand } from './controller-command.js';
import { EXPLAIN_USAGE, explainCommand } from './explain-command.js';
import { VERIFY_USAGE, verifyCommand } from './verify-command.js';
import { REGISTRATION_USAGE, registrationCommand } from './registration-command.js';
import { renderCommand, RENDER_USAGE, type CommandIO } from './render-command.js';
import { packageVersion } from './version.js';
import { WEBHOOK_CONFIG_USAGE, WEBHOOK_USAGE, webhookCommand, webhookConfigCommand } from './webhook-command.js';
import { KubeConfigProblem } from './kubeconfig.js';

const USAGE = `usage: gardener-acl <command> [options]

commands:
  render       print the EnvoyFilters for a seed's objects (offline)
  explain      why a client is admitted or refused on each path into a shoot's control plane
  verify       whether a gateway's Envoy serves every ACL shoot's protection (its config dump)
  controller   run the extension controller on a seed
  registration print the ControllerRegistration/ControllerDeployment (or gardener-operator Extension)
  webhook      serve the admission webhooks (EnvoyFilters on the seed, Shoots in the garden)
  webhook-config  print the webhook registration objects
  version      print the version

${RENDER_USAGE}

${EXPLAIN_USAGE}

${VERIFY_USAGE}

${CONTROLLER_USAGE}

${WEBHOOK_USAGE}

${WEBHOOK_CONFIG_USAGE}

${REGISTRATION_USAGE}`;

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

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'render':
      return renderCommand(rest, io);
    case 'explain':
      return explainCommand(rest, io);
    case 'verify':
      return verifyCommand(rest, io);
    case 'controller':
      return controllerCommand(rest, io);
    case 'registration':
      return registrationCommand(rest, io);
    case 'webhook':
      return webhookCommand(rest, io);
    case 'webhook-config':
      return webhookConfigCommand(rest, io);
    case 'version':
    case '--version':
      io.stdout(`gardener-acl ${packageVersion()}\n`);
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.stdout(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      io.stderr(`unknown command "${command}"\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // Input the user can fix is said in one line, not as a stack.
    if (error instanceof KubeConfigProblem) {
      process.stderr.write(`gardener-acl: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`gardener-acl: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
