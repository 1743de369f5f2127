// User input quoted in an error message, bounded: a status, an Event or an admission response
// carries the message, and one of them quoting 50 entries of 20 KB each would exceed what etcd
// stores (1.5 MB) and fail forever. The start of a value is enough to find it.
const MAX_QUOTED_CHARS = 64;

/** `"value"`, or `"start…" (N characters)` for a long one; control characters escaped. */
export function quoteInput(text: string): string {
  if (text.length <= MAX_QUOTED_CHARS) return JSON.stringify(text);
  return `${JSON.stringify(`${text.slice(0, MAX_QUOTED_CHARS)}…`)} (${text.length} characters)`;
}

/** At most `max` lines; the rest summarised in one line that says how many were left out. */
export function boundedLines(lines: readonly string[], max: number): string[] {
  if (lines.length <= max) return [...lines];
  return [...lines.slice(0, max), `… and ${lines.length - max} more problem(s) like these`];
}
