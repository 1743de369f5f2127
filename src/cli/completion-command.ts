// `gardener-acl completion bash|zsh`: a completion script whose flags are read from each command's
// usage text, the one place a flag is documented, so a flag added there is completed without a
// second list to keep in step (test/cli/compiled-cli.test.ts checks the parsers accept each one).
import { z } from 'zod';
import { argsUsageError, parseCommandArgs } from './command-args.js';
import type { CommandIO } from './command-io.js';
import { COMMANDS, COMPLETION_SHELLS, COMPLETION_USAGE, commandUsage, type CommandName } from './usage-texts.js';

export interface CommandCompletion {
  readonly name: CommandName;
  readonly summary: string;
  /** Long flags, sorted, --help among them for every command that has a usage text. */
  readonly flags: readonly string[];
  /** The words a flag takes, for flags the usage shows as `--flag a|b|c` or `--flag NAME  a|b|c`. */
  readonly values: ReadonlyMap<string, readonly string[]>;
  /** Words completed as the first argument (completion's shells). */
  readonly positionals: readonly string[];
}

// A flag starts a word: `shoot--project--name` holds no flag.
const FLAG = /(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*/g;
const FLAG_WITH_CHOICES = /(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?:[ =]| [A-Z][A-Z_]* +)([A-Za-z][A-Za-z0-9]*(?:\|[A-Za-z][A-Za-z0-9]*)+)(?![\w|])/g;

/** The long flags a usage text names, sorted, with --help (every command takes it). */
export function usageFlags(usage: string): string[] {
  return [...new Set([...(usage.match(FLAG) ?? []), '--help'])].sort();
}

/** The words of each flag the usage text shows with a fixed set of values. */
export function usageFlagValues(usage: string): Map<string, string[]> {
  const values = new Map<string, string[]>();
  for (const [, flag, choices] of usage.matchAll(FLAG_WITH_CHOICES)) {
    if (flag === undefined || choices === undefined) continue;
    values.set(flag, [...new Set([...(values.get(flag) ?? []), ...choices.split('|')])]);
  }
  return values;
}

/** What the scripts complete for each command, in the order of the listing. */
export async function commandCompletions(): Promise<CommandCompletion[]> {
  return Promise.all(
    COMMANDS.map(async ({ name, summary }) => {
      const usage = await commandUsage(name);
      return {
        name,
        summary,
        flags: usage === undefined ? [] : usageFlags(usage),
        values: usage === undefined ? new Map() : usageFlagValues(usage),
        positionals: name === 'completion' ? COMPLETION_SHELLS : [],
      };
    }),
  );
}

const TOP_LEVEL_FLAGS = ['--help', '--version'];

/** Quoted for bash and zsh alike: every word here is a flag, a command or a summary. */
function quote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function bashScript(commands: readonly CommandCompletion[]): string {
  const arms = commands.map((c) => {
    const valueArms = [...c.values].map(([flag, words]) => `        ${flag}) COMPREPLY=($(compgen -W ${quote(words.join(' '))} -- "$cur")); return 0 ;;`);
    const positional = c.positionals.length === 0 ? [] : [`      if (( COMP_CWORD == 2 )) && [[ $cur != -* ]]; then COMPREPLY=($(compgen -W ${quote(c.positionals.join(' '))} -- "$cur")); return 0; fi`];
    return [
      `    ${c.name})`,
      `      flags=${quote(c.flags.join(' '))}`,
      ...(valueArms.length === 0 ? [] : ['      case $prev in', ...valueArms, '      esac']),
      ...positional,
      '      ;;',
    ].join('\n');
  });
  return `# bash completion for gardener-acl: source <(gardener-acl completion bash)
_gardener_acl() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} flags
  COMPREPLY=()
  # --flag=value: bash splits at the "=" (COMP_WORDBREAKS).
  if [[ $cur == = ]]; then
    cur=''
  elif [[ $prev == = ]] && (( COMP_CWORD > 1 )); then
    prev=\${COMP_WORDS[COMP_CWORD-2]}
  fi
  if (( COMP_CWORD == 1 )); then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W ${quote(TOP_LEVEL_FLAGS.join(' '))} -- "$cur"))
    else
      COMPREPLY=($(compgen -W ${quote(commands.map((c) => c.name).join(' '))} -- "$cur"))
    fi
    return 0
  fi
  case \${COMP_WORDS[1]} in
${arms.join('\n')}
    *) return 0 ;;
  esac
  # Anything else is a path or a value: left to bash's file name completion (complete -o default).
  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$flags" -- "$cur")); fi
  return 0
}
complete -o default -F _gardener_acl gardener-acl
`;
}

export function zshScript(commands: readonly CommandCompletion[]): string {
  const described = commands.map((c) => `    ${quote(`${c.name}:${c.summary}`)}`);
  const arms = commands.map((c) => {
    const valueArms = [...c.values].map(([flag, words]) => `        ${flag}) compadd -- ${words.map(quote).join(' ')}; return ;;`);
    const positional = c.positionals.length === 0 ? [] : [`      if (( CURRENT == 3 )) && [[ $PREFIX != -* ]]; then compadd -- ${c.positionals.map(quote).join(' ')}; return; fi`];
    return [
      `    ${c.name})`,
      `      flags=(${c.flags.join(' ')})`,
      ...(valueArms.length === 0 ? [] : ['      case $words[CURRENT-1] in', ...valueArms, '      esac']),
      ...positional,
      '      ;;',
    ].join('\n');
  });
  return `#compdef gardener-acl
# zsh completion for gardener-acl: source <(gardener-acl completion zsh) after compinit,
# or save as _gardener-acl in a directory of $fpath.
_gardener-acl() {
  local -a commands flags
  commands=(
${described.join('\n')}
  )
  if (( CURRENT == 2 )); then
    if [[ $PREFIX == -* ]]; then
      compadd -- ${TOP_LEVEL_FLAGS.join(' ')}
    else
      _describe -t commands 'gardener-acl command' commands
    fi
    return
  fi
  case $words[2] in
${arms.join('\n')}
    *) return 1 ;;
  esac
  if [[ $PREFIX == -* ]]; then
    compadd -- $flags
  else
    _files
  fi
}
# Autoloaded from $fpath the file is the function's body; sourced, it registers the function.
if [[ $funcstack[1] == _gardener-acl ]]; then
  _gardener-acl "$@"
else
  compdef _gardener-acl gardener-acl
fi
`;
}

const argsSchema = z.object({
  shells: z
    .array(z.string())
    .length(1, { error: (i) => `give one shell, ${COMPLETION_SHELLS.join(' or ')}${Array.isArray(i.input) && i.input.length > 1 ? `, not ${i.input.length} (${i.input.join(' ')})` : ''}: e.g. gardener-acl completion bash` })
    .pipe(z.tuple([z.enum(COMPLETION_SHELLS, { error: (i) => `SHELL ${JSON.stringify(i.input)} has no completion script; give one of ${COMPLETION_SHELLS.join(', ')}` })])),
});

export async function completionCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, COMPLETION_USAGE, {}, { allowPositionals: true });
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse({ shells: parsed.positionals });
  if (!args.success) return argsUsageError(io, COMPLETION_USAGE, args.error.issues, 'message-only');
  const [shell] = args.data.shells;
  const commands = await commandCompletions();
  io.stdout(shell === 'bash' ? bashScript(commands) : zshScript(commands));
  return 0;
}
