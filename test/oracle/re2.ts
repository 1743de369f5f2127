// The part of RE2 that Envoy's `safe_regex` matchers and header_to_metadata's
// `regex_value_rewrite` use in what we generate, evaluated on bytes the way Envoy's RE2 does.
// Written from RE2's syntax and GlobalReplace semantics (re2/re2.h, re2/re2.cc) and calibrated on
// the real Envoys (test/envoy/oracle-vs-envoy.test.ts):
//
// - Text is a byte string: a JS string whose code units are bytes (0-255), as the test clients
//   write header values (latin1), so bytes that are not UTF-8 can be modelled.
// - Encoding differs between the Envoys we support (measured with header_to_metadata rewrites of
//   `a\xffb` and `a\xc3\xa9b`): Envoy 1.37 compiles in RE2's UTF-8 mode (`.` and negated classes
//   match one UTF-8 sequence, never a byte that is not UTF-8; `(.)` of `a\xc3\xa9b` is two bytes),
//   Envoy 1.40 in Latin-1 mode (every byte is one character). `\C` is any byte in both.
// - FullMatch (StringMatcher.safe_regex) anchors both ends; GlobalReplace replaces every
//   non-overlapping match left to right, keeps the text between and after them, and skips an
//   empty match right after the previous match by one character. `^` and `$` refer to the whole
//   text, also when the search resumes after a match. A rewrite that names a group the pattern
//   does not have replaces nothing (RE2 refuses it; Envoy then keeps the value unchanged).
//
// Anything outside this subset throws, so a pattern the model does not understand never decides.

export type Re2Encoding = 'utf8' | 'latin1';

type Node =
  | { readonly kind: 'literal'; readonly code: number }
  | { readonly kind: 'any-char' }
  | { readonly kind: 'any-byte' }
  | { readonly kind: 'class'; readonly negated: boolean; readonly ranges: readonly (readonly [number, number])[] }
  | { readonly kind: 'begin' }
  | { readonly kind: 'end' }
  | { readonly kind: 'group'; readonly capturing: boolean; readonly body: Node }
  | { readonly kind: 'concat'; readonly items: readonly Node[] }
  | { readonly kind: 'alternate'; readonly items: readonly Node[] }
  | { readonly kind: 'repeat'; readonly body: Node; readonly min: number; readonly max: number | undefined; readonly greedy: boolean };

const DIGIT: readonly (readonly [number, number])[] = [[0x30, 0x39]];
const WORD: readonly (readonly [number, number])[] = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: readonly (readonly [number, number])[] = [[0x09, 0x0a], [0x0c, 0x0d], [0x20, 0x20]];
const PERL_CLASSES: Readonly<Record<string, { readonly negated: boolean; readonly ranges: readonly (readonly [number, number])[] }>> = {
  d: { negated: false, ranges: DIGIT },
  D: { negated: true, ranges: DIGIT },
  w: { negated: false, ranges: WORD },
  W: { negated: true, ranges: WORD },
  s: { negated: false, ranges: SPACE },
  S: { negated: true, ranges: SPACE },
};
const CONTROL_ESCAPES: Readonly<Record<string, number>> = { n: 0x0a, t: 0x09, r: 0x0d, f: 0x0c, v: 0x0b };

class Parser {
  private pos = 0;
  groups = 0;
  constructor(private readonly source: string) {}

  private fail(why: string): never {
    throw new Error(`regex ${JSON.stringify(this.source)} at ${this.pos}: ${why} (outside the RE2 subset the oracle models)`);
  }

  private peek(): string | undefined {
    return this.source[this.pos];
  }

  parse(): Node {
    const node = this.alternation();
    if (this.pos < this.source.length) this.fail(`unexpected ${JSON.stringify(this.peek())}`);
    return node;
  }

  private alternation(): Node {
    const items = [this.concatenation()];
    while (this.peek() === '|') {
      this.pos++;
      items.push(this.concatenation());
    }
    return items.length === 1 ? (items[0] as Node) : { kind: 'alternate', items };
  }

  private concatenation(): Node {
    const items: Node[] = [];
    for (let c = this.peek(); c !== undefined && c !== '|' && c !== ')'; c = this.peek()) items.push(this.repetition());
    return { kind: 'concat', items };
  }

  private repetition(): Node {
    let node = this.atom();
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number | undefined;
      if (c === '*') [min, max] = [0, undefined];
      else if (c === '+') [min, max] = [1, undefined];
      else if (c === '?') [min, max] = [0, 1];
      else if (c === '{' && /^\{\d+(,\d*)?\}/.test(this.source.slice(this.pos))) {
        const match = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.pos)) as RegExpExecArray;
        min = Number(match[1]);
        max = match[2] === undefined ? min : match[3] === '' ? undefined : Number(match[3]);
        this.pos += match[0].length - 1;
      } else return node;
      this.pos++;
      const greedy = this.peek() !== '?';
      if (!greedy) this.pos++;
      if (node.kind === 'begin' || node.kind === 'end') this.fail('a repeated anchor');
      node = { kind: 'repeat', body: node, min, max, greedy };
    }
  }

  private atom(): Node {
    const c = this.peek();
    if (c === undefined) this.fail('unexpected end');
    this.pos++;
    switch (c) {
      case '(': {
        let capturing = true;
        if (this.source.startsWith('?:', this.pos)) {
          capturing = false;
          this.pos += 2;
        } else if (this.peek() === '?') this.fail('a group flag other than a leading (?i)');
        if (capturing) this.groups++;
        const body = this.alternation();
        if (this.peek() !== ')') this.fail('missing )');
        this.pos++;
        return { kind: 'group', capturing, body };
      }
      case '.':
        return { kind: 'any-char' };
      case '^':
        return { kind: 'begin' };
      case '$':
        return { kind: 'end' };
      case '[':
        return this.characterClass();
      case '\\':
        return this.escape(false);
      case ')':
      case '*':
      case '+':
      case '?':
        return this.fail(`unexpected ${c}`);
      default:
        return { kind: 'literal', code: this.plain(c) };
    }
  }

  private plain(c: string): number {
    const code = c.charCodeAt(0);
    if (code > 0x7e || code < 0x20) this.fail('a character outside printable ASCII in the pattern');
    return code;
  }

  /** After a backslash: a literal, a Perl class, or \C (in a class, \C is not allowed). */
  private escape(inClass: boolean): Node {
    const c = this.peek();
    if (c === undefined) this.fail('a trailing backslash');
    this.pos++;
    if (c === 'C' && !inClass) return { kind: 'any-byte' };
    const perl = PERL_CLASSES[c];
    if (perl !== undefined) return { kind: 'class', ...perl };
    const control = CONTROL_ESCAPES[c];
    if (control !== undefined) return { kind: 'literal', code: control };
    if (/[A-Za-z0-9]/.test(c)) this.fail(`the escape \\${c}`);
    return { kind: 'literal', code: this.plain(c) };
  }

  private characterClass(): Node {
    let negated = false;
    if (this.peek() === '^') {
      negated = true;
      this.pos++;
    }
    const ranges: [number, number][] = [];
    let first = true;
    for (;;) {
      const c = this.peek();
      if (c === undefined) this.fail('missing ]');
      if (c === ']' && !first) {
        this.pos++;
        break;
      }
      first = false;
      this.pos++;
      let low: number;
      if (c === '\\') {
        const escaped = this.escape(true);
        if (escaped.kind === 'class') {
          if (escaped.negated) this.fail('a negated Perl class inside a class');
          ranges.push(...escaped.ranges.map(([a, b]): [number, number] => [a, b]));
          continue;
        }
        if (escaped.kind !== 'literal') this.fail('an escape inside a class');
        low = escaped.code;
      } else low = this.plain(c);
      if (this.peek() === '-' && this.source[this.pos + 1] !== ']' && this.source[this.pos + 1] !== undefined) {
        this.pos++;
        const d = this.peek() as string;
        this.pos++;
        const high = d === '\\' ? this.escapedLiteral() : this.plain(d);
        if (high < low) this.fail('a reversed range');
        ranges.push([low, high]);
      } else ranges.push([low, low]);
    }
    return { kind: 'class', negated, ranges };
  }

  private escapedLiteral(): number {
    const node = this.escape(true);
    if (node.kind !== 'literal') this.fail('a class as a range end');
    return node.code;
  }
}

// One UTF-8 sequence of two or more bytes, as RE2 compiles the runes 0x80-0x10FFFF (encoded
// surrogates included, overlong forms excluded: measured on Envoy 1.37 with \xed\xa0\x80 and \xc0\x80).
const UTF8_MULTIBYTE = String.raw`[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xef][\x80-\xbf]{2}|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}`;

const hex = (code: number): string => `\\x${code.toString(16).padStart(2, '0')}`;

/** Case folding of the pattern's ASCII letters; in UTF-8 mode Unicode folds k to the Kelvin sign and s to the long s. */
function folded(ranges: readonly (readonly [number, number])[]): [number, number][] {
  const out: [number, number][] = ranges.map(([a, b]) => [a, b]);
  for (const [a, b] of ranges) {
    const lowA = Math.max(a, 0x61);
    const lowB = Math.min(b, 0x7a);
    if (lowA <= lowB) out.push([lowA - 0x20, lowB - 0x20]);
    const upA = Math.max(a, 0x41);
    const upB = Math.min(b, 0x5a);
    if (upA <= upB) out.push([upA + 0x20, upB + 0x20]);
  }
  return out;
}

function contains(ranges: readonly (readonly [number, number])[], code: number): boolean {
  return ranges.some(([a, b]) => a <= code && code <= b);
}

class Compiler {
  constructor(
    private readonly encoding: Re2Encoding,
    private readonly caseInsensitive: boolean,
  ) {}

  compile(node: Node): string {
    switch (node.kind) {
      case 'literal':
        return this.compileClass(false, [[node.code, node.code]]);
      case 'any-char':
        return this.compileClass(true, [[0x0a, 0x0a]]);
      case 'any-byte':
        return String.raw`[\x00-\xff]`;
      case 'class':
        return this.compileClass(node.negated, node.ranges);
      case 'begin':
        return '^';
      case 'end':
        return '$';
      case 'group':
        return `(${node.capturing ? '' : '?:'}${this.compile(node.body)})`;
      case 'concat':
        return node.items.map((item) => this.compile(item)).join('');
      case 'alternate':
        return `(?:${node.items.map((item) => this.compile(item)).join('|')})`;
      case 'repeat': {
        const quantifier = node.max === undefined ? (node.min === 0 ? '*' : node.min === 1 ? '+' : `{${node.min},}`) : node.min === 0 && node.max === 1 ? '?' : `{${node.min},${node.max}}`;
        return `(?:${this.compile(node.body)})${quantifier}${node.greedy ? '' : '?'}`;
      }
    }
  }

  private compileClass(negated: boolean, given: readonly (readonly [number, number])[]): string {
    const ranges = this.caseInsensitive ? folded(given) : given.map(([a, b]): [number, number] => [a, b]);
    const members = ranges.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join('');
    // Unicode case folding reaches outside ASCII for two letters (RE2 folds by Unicode in UTF-8 mode).
    const extraFolds = this.caseInsensitive && this.encoding === 'utf8' ? [...(contains(ranges, 0x6b) ? [String.raw`\xe2\x84\xaa`] : []), ...(contains(ranges, 0x73) ? [String.raw`\xc5\xbf`] : [])] : [];
    if (!negated) {
      const single = `[${members}]`;
      return extraFolds.length === 0 ? single : `(?:${[single, ...extraFolds].join('|')})`;
    }
    if (this.encoding === 'latin1') return `[^${members}]`;
    // UTF-8: one ASCII byte outside the class, or one multi-byte sequence (the folds aside): never a stray byte.
    const multibyte = extraFolds.length === 0 ? UTF8_MULTIBYTE : `(?!${extraFolds.join('|')})(?:${UTF8_MULTIBYTE})`;
    return `(?:[^${members}\\x80-\\xff]|${multibyte})`;
  }
}

export interface Re2 {
  readonly source: string;
  readonly groups: number;
  /** RE2::FullMatch. */
  fullMatch(text: string): boolean;
  /** RE2::GlobalReplace of `text` with `rewrite` (\0-\9, \\). */
  globalReplace(text: string, rewrite: string): string;
}

function checkBytes(text: string): void {
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) > 0xff) throw new Error(`text ${JSON.stringify(text)} is not a byte string (code unit ${text.charCodeAt(i)} at ${i})`);
  }
}

/** Length of the valid UTF-8 sequence at `i` as RE2's chartorune decodes it, or undefined for a decoding error. */
function utf8Length(text: string, i: number): number | undefined {
  const sequence = new RegExp(`^(?:[\\x00-\\x7f]|${UTF8_MULTIBYTE})`).exec(text.slice(i, i + 4));
  return sequence === null ? undefined : sequence[0].length;
}

const compiledCache = new Map<string, Re2>();

export function re2(pattern: string, encoding: Re2Encoding): Re2 {
  const key = `${encoding}\n${pattern}`;
  const cached = compiledCache.get(key);
  if (cached !== undefined) return cached;
  const caseInsensitive = pattern.startsWith('(?i)');
  const parser = new Parser(caseInsensitive ? pattern.slice(4) : pattern);
  const tree = parser.parse();
  const groups = parser.groups;
  const body = new Compiler(encoding, caseInsensitive).compile(tree);
  const full = new RegExp(`^(?:${body})$`);
  const search = new RegExp(body, 'g');
  // Every bucket of a chain tests the same value against the same guard: remember the last answer.
  let last: { text: string; matched: boolean } | undefined;
  const compiled: Re2 = {
    source: pattern,
    groups,
    fullMatch(text) {
      if (last?.text === text) return last.matched;
      checkBytes(text);
      last = { text, matched: full.test(text) };
      return last.matched;
    },
    globalReplace(text, rewrite) {
      const key = `${rewrite}\u0000${text}`;
      const known = replaced.get(key);
      if (known !== undefined) return known;
      const result = globalReplace(text, rewrite);
      // Bounded: a long property run must not hold every value it ever saw.
      if (replaced.size >= 1024) replaced.clear();
      replaced.set(key, result);
      return result;
    },
  };
  const replaced = new Map<string, string>();
  function globalReplace(text: string, rewrite: string): string {
      checkBytes(text);
      const referenced = [...rewrite.matchAll(/\\(.)/g)].map((m) => m[1] as string);
      for (const r of referenced) if (!/[0-9\\]/.test(r)) throw new Error(`rewrite ${JSON.stringify(rewrite)}: \\${r} is not a valid rewrite escape`);
      if (referenced.some((r) => r !== '\\' && Number(r) > groups)) return text;
      let out = '';
      let p = 0;
      let lastEnd = -1;
      let count = 0;
      while (p <= text.length) {
        search.lastIndex = p;
        const m = search.exec(text);
        if (m === null) break;
        if (p < m.index) out += text.slice(p, m.index);
        if (m.index === lastEnd && m[0] === '') {
          // An empty match where the last one ended: copy one character and search on.
          const n = encoding === 'utf8' ? (utf8Length(text, p) ?? 1) : 1;
          out += text.slice(p, p + n);
          p += n;
          continue;
        }
        out += rewrite.replace(/\\(.)/g, (_, r: string) => (r === '\\' ? '\\' : (m[Number(r)] ?? '')));
        p = m.index + m[0].length;
        lastEnd = p;
        count++;
      }
      if (count === 0) return text;
      return out + text.slice(p);
  }
  compiledCache.set(key, compiled);
  return compiled;
}
