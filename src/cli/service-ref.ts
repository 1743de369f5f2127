import { z } from 'zod';

/** NAME.NAMESPACE[:PORT] of a Service (port 443 unless given). */
export const serviceRef = z.string().transform((text, ctx) => {
  const match = /^([a-z0-9-]+)\.([a-z0-9-]+)(?::(\d+))?$/.exec(text);
  const port = Number(match?.[3] ?? 443);
  if (match && port >= 1 && port <= 65535) return { name: match[1] ?? '', namespace: match[2] ?? '', port };
  if (match) {
    ctx.addIssue({ code: 'custom', message: `"${text}": port ${match[3] ?? ''} is not 1 to 65535` });
    return z.NEVER;
  }
  ctx.addIssue({ code: 'custom', message: `"${text}" is not NAME.NAMESPACE[:PORT]` });
  return z.NEVER;
});
