// The argument handling every command shares, so that --help, a flag the parser refuses and a
// value the schema refuses answer alike (text, stream and exit code) whichever command it is.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { z } from 'zod';
import type { CommandIO } from './command-io.js';

/** The exit code of every invalid command line, as each command's usage text promises. */
const INVALID_INPUT = 2;

type FlagOptions = NonNullable<ParseArgsConfig['options']>;

const HELP_FLAG = { help: { type: 'boolean', short: 'h' } } as const;

interface CommandParseConfig<Flags extends FlagOptions> {
  args: string[];
  options: Flags & typeof HELP_FLAG;
  allowPositionals: boolean;
}

/** The flags' values, typed from their options (a flag with a default is always there). */
export type CommandArgs<Flags extends FlagOptions> = {
  readonly values: ReturnType<typeof parseArgs<CommandParseConfig<Flags>>>['values'];
  readonly positionals: readonly string[];
};

/** exitCode: the command line was answered already (the usage, or why it is refused). */
export type ParsedCommandArgs<Flags extends FlagOptions> = CommandArgs<Flags> | { readonly exitCode: number };

export interface ParseCommandArgsOptions {
  /** Only commands that read paths take them; the others refuse any positional. */
  readonly allowPositionals?: boolean;
}

/** parseArgs with -h/--help added; help prints the usage to stdout, a parse error prints it to stderr. */
export function parseCommandArgs<const Flags extends FlagOptions>(
  argv: readonly string[],
  io: CommandIO,
  usage: string,
  flags: Flags,
  { allowPositionals = false }: ParseCommandArgsOptions = {},
): ParsedCommandArgs<Flags> {
  let parsed: CommandArgs<Flags>;
  try {
    parsed = parseArgs<CommandParseConfig<Flags>>({ args: [...argv], options: { ...flags, ...HELP_FLAG }, allowPositionals });
  } catch (error) {
    return { exitCode: usageError(io, usage, (error as Error).message) };
  }
  // HELP_FLAG is among the options, but parseArgs' conditional types cannot show it while Flags is generic.
  const { help } = parsed.values as { readonly help?: boolean };
  if (help) {
    io.stdout(`${usage}\n`);
    return { exitCode: 0 };
  }
  return parsed;
}

/** Prints why the command line is refused, then the usage, to stderr; returns the exit code. */
export function usageError(io: CommandIO, usage: string, message: string): number {
  io.stderr(`${message}\n${usage}\n`);
  return INVALID_INPUT;
}

/**
 * 'flag-prefixed' puts the flag an issue is about before its message; 'message-only' is for
 * schemas whose messages name their flag already (and whose positionals have no flag to name).
 */
export type IssueStyle = 'flag-prefixed' | 'message-only';

/** usageError for the issues of a schema that refused the flags, one line each. */
export function argsUsageError(io: CommandIO, usage: string, issues: readonly z.core.$ZodIssue[], style: IssueStyle = 'flag-prefixed'): number {
  return usageError(io, usage, issues.map((issue) => describeIssue(issue, style)).join('\n'));
}

function describeIssue(issue: z.core.$ZodIssue, style: IssueStyle): string {
  const [flag] = issue.path;
  return style === 'flag-prefixed' && flag !== undefined ? `--${String(flag)}: ${issue.message}` : issue.message;
}
