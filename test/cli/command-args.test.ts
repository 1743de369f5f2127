// The argument handling all commands share: --help, a flag the parser refuses and a value the
// schema refuses each give the same streams, text and exit code in every command.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { argsUsageError, parseCommandArgs } from '../../src/cli/command-args.js';
import { REGISTRATION_USAGE, registrationCommand } from '../../src/cli/registration-command.js';
import type { CommandIO } from '../../src/cli/command-io.js';
import { WEBHOOK_CONFIG_USAGE, webhookConfigCommand } from '../../src/cli/webhook-command.js';

const USAGE = 'usage: test [--name NAME] [PATH...]';

interface CapturedIO extends CommandIO {
  out: string;
  err: string;
}

function capture(): CapturedIO {
  const io: CapturedIO = {
    out: '',
    err: '',
    stdout: (text) => (io.out += text),
    stderr: (text) => void (io.err += text),
  };
  return io;
}

const FLAGS = { name: { type: 'string', default: 'acl' } } as const;

describe('parseCommandArgs', () => {
  it.each([['--help'], ['-h']])('%s prints the usage to stdout and exits 0', (flag) => {
    const io = capture();
    expect(parseCommandArgs([flag], io, USAGE, FLAGS)).toEqual({ exitCode: 0 });
    expect(io).toMatchObject({ out: `${USAGE}\n`, err: '' });
  });

  it.each([
    [['--bogus'], "Unknown option '--bogus'"],
    [['--help', '--bogus'], "Unknown option '--bogus'"],
    [['path'], "Unexpected argument 'path'. This command does not take positional arguments"],
  ])('%j prints why and the usage to stderr and exits 2', (argv, message) => {
    const io = capture();
    expect(parseCommandArgs(argv, io, USAGE, FLAGS)).toEqual({ exitCode: 2 });
    expect(io).toMatchObject({ out: '', err: `${message}\n${USAGE}\n` });
  });

  it('gives the values with their defaults, and positionals where the command takes them', () => {
    const io = capture();
    expect(parseCommandArgs(['a', '--', '-b'], io, USAGE, FLAGS, { allowPositionals: true })).toEqual({ values: { name: 'acl' }, positionals: ['a', '-b'] });
    expect(io).toMatchObject({ out: '', err: '' });
  });
});

describe('argsUsageError', () => {
  const schema = z
    .object({ name: z.string().regex(/^[a-z]+$/, { error: 'must be lower-case' }), other: z.string().optional() })
    .refine((a) => a.other === undefined, { error: 'no --other with this' });

  it('prefixes the flag an issue is about, and leaves an issue about no flag as it is', () => {
    const io = capture();
    const bad = schema.safeParse({ name: 'ACL' });
    const unflagged = schema.safeParse({ name: 'acl', other: 'x' });
    expect(argsUsageError(io, USAGE, [...(bad.error?.issues ?? []), ...(unflagged.error?.issues ?? [])])).toBe(2);
    expect(io).toMatchObject({ out: '', err: `--name: must be lower-case\nno --other with this\n${USAGE}\n` });
  });

  it("'message-only' prints the messages alone, for schemas whose messages name their flag", () => {
    const io = capture();
    expect(argsUsageError(io, USAGE, schema.safeParse({ name: 'ACL' }).error?.issues ?? [], 'message-only')).toBe(2);
    expect(io.err).toBe(`must be lower-case\n${USAGE}\n`);
  });
});

describe('commands built on it', () => {
  it.each([
    ['registration', registrationCommand, REGISTRATION_USAGE, ['--policy', 'Sometimes'], '--policy: must be OnDemand, Always or AlwaysExceptNoShoots'],
    ['registration', registrationCommand, REGISTRATION_USAGE, ['--operator', '--chart-ref', 'oci://ghcr.io/org/charts/gardener-acl:0.1.0', '--admission-chart-ref', 'ghcr.io/org/charts/a:1'], '--chart-ref: "oci://ghcr.io/org/charts/gardener-acl:0.1.0": drop the oci:// scheme; gardener-operator\'s ociRepository.ref is registry/repository:tag, e.g. ghcr.io/org/charts/gardener-acl:0.1.0'],
    ['webhook-config', webhookConfigCommand, WEBHOOK_CONFIG_USAGE, ['--ca-bundle-file', 'ca.pem'], 'give exactly one of --url and --service'],
    ['webhook-config', webhookConfigCommand, WEBHOOK_CONFIG_USAGE, ['--ca-bundle-file', 'ca.pem', '--service', 'a.b:99999'], '--service: "a.b:99999": port 99999 is not 1 to 65535'],
    ['webhook-config', webhookConfigCommand, WEBHOOK_CONFIG_USAGE, ['--ca-bundle-file', 'ca.pem', '--url', 'https://x', '--controller-user', 'a', '--controller-username', 'b'], '--controller-user and --controller-username name the same flag; give one'],
  ])('%s: --help, an unknown flag and a refused value', async (_name, command, usage, invalid, message) => {
    const help = capture();
    expect(await command(['--help'], help)).toBe(0);
    expect(help).toMatchObject({ out: `${usage}\n`, err: '' });
    const unknown = capture();
    expect(await command(['--bogus'], unknown)).toBe(2);
    expect(unknown).toMatchObject({ out: '', err: `Unknown option '--bogus'\n${usage}\n` });
    const refused = capture();
    expect(await command(invalid, refused)).toBe(2);
    expect(refused).toMatchObject({ out: '', err: `${message}\n${usage}\n` });
  });
});
