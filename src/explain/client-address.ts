// What explain's request names, in a module the command line's flag table can load for --help
// without the filter builders: the paths one may ask about and a client address as typed.
import { parseIpv4, parseIpv6, type IpFamily } from '../acl/cidr.js';

export const EXPLAIN_PATHS = ['api', 'connect', 'observability', 'legacy'] as const;
export type ExplainPath = (typeof EXPLAIN_PATHS)[number];

export interface ClientAddress {
  readonly family: IpFamily;
  readonly value: bigint;
  /** As the user wrote it. */
  readonly text: string;
}

export function parseClientAddress(text: string): ClientAddress | undefined {
  const trimmed = text.trim();
  const value = trimmed.includes(':') ? parseIpv6(trimmed) : parseIpv4(trimmed);
  if (value === undefined) return undefined;
  return { family: trimmed.includes(':') ? 6 : 4, value, text: trimmed };
}
