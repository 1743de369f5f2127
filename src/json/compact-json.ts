// JSON text for files people read and review (the charts' values.schema.json): a container of
// plain values stays on one line, so one setting is one line and a diff shows the setting that
// changed; everything deeper is indented. Deterministic: the same value gives the same bytes.

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

function isContainer(value: Json): value is readonly Json[] | { readonly [key: string]: Json } {
  return typeof value === 'object' && value !== null;
}

function entries(value: readonly Json[] | { readonly [key: string]: Json }): (readonly [string | undefined, Json])[] {
  return Array.isArray(value) ? value.map((v: Json) => [undefined, v] as const) : Object.entries(value);
}

/** Levels of containers: 0 for a plain value or a list of them (an enum reads as one value), 1 for an object of those. */
function depth(value: Json): number {
  if (!isContainer(value)) return 0;
  const inner = Math.max(0, ...entries(value).map(([, v]) => depth(v)));
  return Array.isArray(value) && inner === 0 ? 0 : 1 + inner;
}

/** A plain value as JSON; anything JSON cannot hold (undefined, a function, a bigint, NaN) is a bug of the caller, not a file to write. */
function plain(value: Json): string {
  const ok = value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
  if (!ok) throw new Error(`compactJson: ${typeof value} ${String(value)} is not JSON`);
  return JSON.stringify(value);
}

function oneLine(value: Json): string {
  if (!isContainer(value)) return plain(value);
  const parts = entries(value).map(([key, v]) => (key === undefined ? oneLine(v) : `${JSON.stringify(key)}: ${oneLine(v)}`));
  return Array.isArray(value) ? `[${parts.join(', ')}]` : `{${parts.join(', ')}}`;
}

/** A container whose members are plain values, or a short one with one more level, fits one line. */
const SHORT_LINE = 120;

function format(value: Json, indent: string): string {
  if (!isContainer(value)) return plain(value);
  const line = oneLine(value);
  const members = entries(value);
  if (members.length === 0 || depth(value) <= 1 || (depth(value) === 2 && indent.length + line.length <= SHORT_LINE)) return line;
  const inner = `${indent}  `;
  const parts = members.map(([key, v]) => `${inner}${key === undefined ? '' : `${JSON.stringify(key)}: `}${format(v, inner)}`);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  return `${open}\n${parts.join(',\n')}\n${indent}${close}`;
}

/** `value` as reviewable JSON text, with a final newline. */
export function compactJson(value: unknown): string {
  return `${format(value as Json, '')}\n`;
}
