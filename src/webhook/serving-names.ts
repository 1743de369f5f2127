// The names a serving certificate must carry for the API server to accept it: the Service's DNS
// names, or the host of the URL (an IP address goes into the IP SANs).
import { isIP } from 'node:net';
import { serviceDnsNames } from './serving-certs.js';
import type { ClientTarget } from './webhook-configuration.js';

export function servingNames(target: ClientTarget): { dnsNames: string[]; ips: string[] } {
  if ('service' in target) return { dnsNames: serviceDnsNames(target.service.name, target.service.namespace), ips: [] };
  const host = new URL(target.url).hostname.replace(/^\[(.*)\]$/, '$1');
  return isIP(host) ? { dnsNames: [], ips: [host] } : { dnsNames: [host], ips: [] };
}

/** The names of every target one certificate serves, each once, in a stable order. */
export function servingNamesOf(targets: readonly ClientTarget[]): { dnsNames: string[]; ips: string[] } {
  const names = targets.map(servingNames);
  return { dnsNames: [...new Set(names.flatMap((n) => n.dnsNames))], ips: [...new Set(names.flatMap((n) => n.ips))] };
}
