// Flag schemas more than one command takes, so that the same kind of value is refused in the same words.
import { z } from 'zod';
import type { Flag } from './flag-table.js';

/** A whole number from `min` to `max` typed on the command line; `unit` reads after "whole number", e.g. "of MiB". */
export function boundedInt(min: number, max: number, unit?: string) {
  const error = `must be a whole number ${unit ? `${unit} ` : ''}from ${min} to ${max}`;
  return z.coerce.number({ error: 'must be a number' }).int({ error }).min(min, { error }).max(max, { error });
}

/** A port number from `min`; a port to listen on takes 0, which lets the system choose (the tests do). */
export function portFrom(min: 0 | 1) {
  const error = `must be a port number from ${min} to 65535`;
  return z.coerce.number({ error: 'must be a port number' }).int({ error }).min(min, { error }).max(65535, { error });
}

export const portNumber = portFrom(0);

/** The controller's authenticated user, whose writes of combined filters the webhook lets pass. */
export const controllerUsername = z.string().min(1, { error: 'must not be empty' }).optional();

export const httpsUrl = z.url({ protocol: /^https$/, error: 'must be an https:// URL' });

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;

export const LOG_LEVEL_FLAG = {
  value: 'LEVEL',
  default: 'info',
  help: LOG_LEVELS.join('|'),
  schema: z.enum(LOG_LEVELS, { error: 'must be trace, debug, info, warn or error' }),
} as const satisfies Flag;
