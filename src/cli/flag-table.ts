// A command's flags declared once: name, value placeholder, default, schema and help. The parser's
// options, the schema the values pass and the usage text's flag list are all read from the one
// table, so a default or a flag cannot differ between what --help says and what the command does.
import type { ParseArgsConfig } from 'node:util';
import { z } from 'zod';

interface FlagCommon {
  /** What the flag does, one sentence or more; wrapped to the usage text's width. */
  readonly help: string;
  /** Parses the flag's text (or a switch's boolean, or a repeated flag's list) into what the command uses. */
  readonly schema: z.ZodType;
  /** A one-letter alias (-o). */
  readonly short?: string;
  /** The usage text's heading above this flag and those after it, e.g. "Seed webhook certificates". */
  readonly group?: string;
}

/** A flag without a value: false unless given. */
interface SwitchFlag extends FlagCommon {
  readonly value?: undefined;
  readonly default?: undefined;
  readonly defaultText?: undefined;
  readonly multiple?: undefined;
}

/** A flag with one value. */
type ValueFlag = FlagCommon & {
  /** How the usage text names the value (DURATION, PATH, N). */
  readonly value: string;
  readonly multiple?: false;
} & (
    | {
        /** The default as one would type it. */
        readonly default?: string;
        /** The usage text's words for a default that is not a value (something stands in). */
        readonly defaultText?: string;
      }
    | {
        /** A default read when the command runs (the environment); --help cannot show its value, so it says what it is. */
        readonly default: () => string;
        readonly defaultText: string;
      }
  );

/** A flag that may be given again and again; absent, it is undefined (no default). */
interface RepeatedFlag extends FlagCommon {
  readonly value: string;
  readonly multiple: true;
  readonly default?: undefined;
  readonly defaultText?: undefined;
}

export type Flag = SwitchFlag | ValueFlag | RepeatedFlag;

export type FlagTable = Readonly<Record<string, Flag>>;

type ParseOptions = NonNullable<ParseArgsConfig['options']>;

/** node:util parseArgs options for the table: every flag a string, a switch a boolean, defaults as typed. */
export function parseOptions(table: FlagTable): ParseOptions {
  return Object.fromEntries(
    Object.entries(table).map(([name, flag]) => {
      const fallback = typeof flag.default === 'function' ? flag.default() : flag.default;
      const option = flag.value === undefined ? { type: 'boolean' as const, default: false } : { type: 'string' as const, ...(flag.multiple ? { multiple: true } : {}), ...(fallback !== undefined ? { default: fallback } : {}) };
      return [name, flag.short === undefined ? option : { ...option, short: flag.short }];
    }),
  );
}

/** The object schema of the parsed flags: each flag's own schema, under its name. */
export function flagsSchema<const T extends FlagTable>(table: T): z.ZodObject<{ -readonly [K in keyof T]: T[K]['schema'] }> {
  return z.object(Object.fromEntries(Object.entries(table).map(([name, flag]) => [name, flag.schema]))) as unknown as z.ZodObject<{ -readonly [K in keyof T]: T[K]['schema'] }>;
}

/** Width of a usage text line; flag help wraps before it. */
const WIDTH = 100;

function wrap(words: readonly string[], first: number, rest: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of words) {
    const room = WIDTH - (lines.length === 0 ? first : rest);
    if (line !== '' && line.length + 1 + word.length > room) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines;
}

function defaultWords(flag: Flag): string | undefined {
  if (flag.defaultText !== undefined) return flag.defaultText;
  if (flag.value === undefined || flag.multiple || typeof flag.default !== 'string') return undefined;
  return flag.default;
}

/**
 * The usage text's flag list: `--name VALUE` then its help from `column` on, continued lines
 * indented to it, the default last; a group heading before the first flag of each group.
 */
export function flagLines(table: FlagTable, column: number): string {
  const out: string[] = [];
  let group: string | undefined;
  for (const [name, flag] of Object.entries(table)) {
    if (flag.group !== group) {
      group = flag.group;
      if (group !== undefined) out.push('', `${group}:`);
    }
    const left = `  ${flag.short === undefined ? '' : `-${flag.short}, `}--${name}${flag.value === undefined ? '' : ` ${flag.value}`}`;
    const fallback = defaultWords(flag);
    const text = fallback === undefined ? flag.help : `${flag.help} (default ${fallback})`;
    const start = left.length + 2 > column ? left.length + 2 : column;
    const [first = '', ...rest] = wrap(text.split(/\s+/), start, column);
    out.push(`${left.padEnd(start)}${first}`, ...rest.map((l) => `${' '.repeat(column)}${l}`));
  }
  return out.join('\n');
}
