import { z } from 'zod';

/** NAME.NAMESPACE[:PORT] of a Service (port 443 unless given). */
export const serviceRef = z.string().transform((text, ctx) => {
  const match = /^([a-z0-9-]+)\.([a-z0-9-]+)(?::(\d+))?$/.exec(text);
  if (match) return { name: match[1] ?? '', namespace: match[2] ?? '', port: Number(match[3] ?? 443) };
  ctx.addIssue({ code: 'custom', message: `"${text}" is not NAME.NAMESPACE[:PORT]` });
  return z.NEVER;
});
