// Durations on the command line, as Kubernetes components write them (500ms, 30s, 10m, 1h, 30d).
import { z } from 'zod';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A flag value such as 500ms, 30s, 10m, 1h or 30d, in milliseconds. */
export const durationMs = z.string().transform((text, ctx) => {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) {
    ctx.addIssue({ code: 'custom', message: `"${text}" is not a duration; write e.g. 500ms, 30s, 10m, 1h or 30d` });
    return z.NEVER;
  }
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
});
