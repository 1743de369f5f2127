// Whether a gateway serves each ACL shoot's protection, judged on what its Envoy holds (see
// served-config.ts), not on what is stored. An EnvoyFilter whose match no longer finds its
// listener, chain or filter (a Gardener upgrade moves a port, Istio names the connection manager
// differently) is accepted by Istio and silently does nothing; this check looks at every path the
// gateway serves into a shoot's control plane and asks whether the shoot's filter is on it:
// - api: every filter chain whose server names include one of the shoot's hosts, and every chain
//   whose TCP proxy forwards to the shoot's namespace, carries the shoot's network RBAC filter;
// - observability: every shared wildcard chain carries the shoot's observability filter;
// - connect: every connection manager that routes by a protected header holds a policy for the
//   shoot before its router (inline, or in the ECDS resource its discovered filter names);
// - legacy: a chain of the legacy PROXY-protocol port forwarding to the shoot carries its filter.
// "exposed": the path serves the shoot without its filter. "cut-off": the path refuses every
// request to the shoot (an ECDS resource Envoy never received). "absent": a patch matches nothing
// because the gateway does not serve that path at all (no exposure; a moved path shows up as
// exposed where it went).
import type { SeedAcl, ShootAcl } from '../acl/model.js';
import { ecdsBucketOf, ecdsResourceName } from '../rbac/connect-matcher-ecds.js';
import { FILTER_NAMES, shootStatPrefix } from '../rbac/filter-values.js';
import type { ServedChain, ServedConnectionManager, ServedGateway } from './served-config.js';

export const SERVED_PATHS = ['api', 'observability', 'connect', 'legacy'] as const;
export type ServedPath = (typeof SERVED_PATHS)[number];
export type ServedSeverity = 'exposed' | 'cut-off' | 'absent';

export interface ServedFinding {
  /** The shoot; undefined for a finding about the gateway (every ACL shoot alike). */
  readonly technicalID: string | undefined;
  readonly path: ServedPath;
  readonly severity: ServedSeverity;
  /** Listener (and server name or port) the finding is about. */
  readonly where: string;
  readonly cause: string;
}

export interface ServedReport {
  readonly gateway: string;
  readonly shoots: number;
  readonly findings: readonly ServedFinding[];
}

/** Whether a finding means the shoot is not protected as stored (exposed or cut off). */
export function isProtectionFault(finding: ServedFinding): boolean {
  return finding.severity !== 'absent';
}

const MOVED = 'a Gardener or Istio change (a renamed or moved listener, a connection manager under another filter name) leaves the EnvoyFilter patch matching nothing there';

function hasFilter(chain: ServedChain, name: string, statPrefix: string): boolean {
  return chain.filters.some((f) => f.name === name && f.statPrefix === statPrefix);
}

function chainLabel(chain: ServedChain, host?: string): string {
  return host === undefined ? chain.listener : `${chain.listener} [${host}]`;
}

/** Whether a TCP proxy cluster leads into the shoot's namespace (Istio's outbound|port||svc.<ns>.svc... or Gardener's <ns>--kube-apiserver-socket). */
function forwardsTo(cluster: string, technicalID: string): boolean {
  const outbound = /^outbound\|[^|]*\|[^|]*\|[^.]+\.([^.]+)\.svc\./.exec(cluster)?.[1];
  return outbound === technicalID || cluster === `${technicalID}--kube-apiserver-socket`;
}

function apiFindings(shoot: ShootAcl, seed: SeedAcl, namespace: string, served: ServedGateway): ServedFinding[] {
  const findings: ServedFinding[] = [];
  const id = shoot.technicalID;
  const sni = shootStatPrefix('sni', id);
  const legacy = shootStatPrefix('legacy_proxy', id);
  const hosts = new Set(shoot.sniChains.filter((c) => c.gateway.namespace === namespace).flatMap((c) => c.hosts));
  const judged = new Set<ServedChain>();
  let hostServed = false;
  for (const chain of served.chains) {
    const host = chain.serverNames.find((name) => hosts.has(name));
    if (host === undefined) continue;
    hostServed = true;
    judged.add(chain);
    if (!hasFilter(chain, FILTER_NAMES.sni, sni)) {
      findings.push({ technicalID: id, path: 'api', severity: 'exposed', where: chainLabel(chain, host), cause: `the filter chain serving ${host} has no ${FILTER_NAMES.sni} filter for the shoot: ${MOVED}` });
    }
  }
  if (!hostServed && hosts.size > 0) {
    const first = [...hosts].sort()[0] ?? '';
    findings.push({ technicalID: id, path: 'api', severity: 'absent', where: `port ${seed.operator.sniPort} [${first}]`, cause: `no filter chain serves ${first}: the shoot's API server is not reachable through this gateway (yet), and its SNI patch matches nothing` });
  }
  for (const chain of served.chains) {
    if (judged.has(chain) || chain.port === undefined || !chain.tcpClusters.some((c) => forwardsTo(c, id))) continue;
    if (hasFilter(chain, FILTER_NAMES.sni, sni) || hasFilter(chain, FILTER_NAMES.legacyProxy, legacy)) continue;
    const isLegacy = chain.serverNames.length === 0 && chain.port === seed.operator.legacyProxyPort;
    findings.push({
      technicalID: id,
      path: isLegacy ? 'legacy' : 'api',
      severity: 'exposed',
      where: chainLabel(chain, chain.serverNames[0] ?? `port ${chain.port}`),
      cause: isLegacy
        ? `the legacy PROXY-protocol chain forwarding to the shoot has no ${FILTER_NAMES.legacyProxy} filter: the admission webhook did not patch Gardener's EnvoyFilter for it, or ${MOVED}`
        : `a filter chain forwards to the shoot's control plane without the shoot's ACL filter: ${MOVED}`,
    });
  }
  return findings;
}

function observabilityFindings(shoot: ShootAcl, seed: SeedAcl, namespace: string, served: ServedGateway): ServedFinding[] {
  const prefix = shootStatPrefix('observability', shoot.technicalID);
  return seed.observabilityWildcards
    .filter((w) => w.gateway.namespace === namespace)
    .flatMap((wildcard) =>
      served.chains
        .filter((chain) => chain.serverNames.includes(`*.${wildcard.domain}`) && !hasFilter(chain, FILTER_NAMES.observability, prefix))
        .map((chain): ServedFinding => ({
          technicalID: shoot.technicalID,
          path: 'observability',
          severity: 'exposed',
          where: chainLabel(chain, `*.${wildcard.domain}`),
          cause: `the shared observability chain has no ${FILTER_NAMES.observability} filter for the shoot: ${MOVED}`,
        })),
    );
}

function routesProtected(manager: ServedConnectionManager, headers: ReadonlySet<string>): string | undefined {
  return manager.clusterHeaders.find((h) => headers.has(h));
}

function connectFindings(shoot: ShootAcl, seed: SeedAcl, served: ServedGateway): ServedFinding[] {
  const headers = new Set(seed.operator.protectedHeaders.map((h) => h.toLowerCase()));
  const id = shoot.technicalID;
  const bucket = seed.operator.combinedForm === 'ecds' ? ecdsResourceName(ecdsBucketOf(id, seed.operator.ecdsBuckets)) : undefined;
  const findings: ServedFinding[] = [];
  for (const chain of served.chains) {
    for (const manager of chain.connectionManagers) {
      const header = routesProtected(manager, headers);
      if (header === undefined) continue;
      const covered = manager.httpFilters.some((f) => {
        if (!f.discovered) return f.shoots.has(id);
        if (!served.ecds.has(f.name)) return false;
        // A resource read without its config (the controller's light read) covers the shoots of its bucket.
        const shoots = served.ecds.get(f.name);
        return shoots === undefined ? f.name === bucket : shoots.has(id);
      });
      if (covered) continue;
      const missingResource = bucket !== undefined && manager.httpFilters.some((f) => f.discovered && f.name === bucket) && !served.ecds.has(bucket);
      findings.push(
        missingResource
          ? { technicalID: id, path: 'connect', severity: 'cut-off', where: chain.listener, cause: `Envoy holds no ECDS resource ${bucket}: the filter's default refuses every CONNECT to the shoots of that bucket until istiod serves it` }
          : { technicalID: id, path: 'connect', severity: 'exposed', where: chain.listener, cause: `the connection manager routes CONNECT by ${header} and no filter before its router holds a policy for the shoot: ${MOVED}` },
      );
    }
  }
  return findings;
}

/** Gateway-wide: protected ports where no connection manager routes by a protected header (the combined patches for that port match nothing). */
function connectPortFindings(seed: SeedAcl, served: ServedGateway): ServedFinding[] {
  const headers = new Set(seed.operator.protectedHeaders.map((h) => h.toLowerCase()));
  return seed.operator.protectedPorts.flatMap((port): ServedFinding[] => {
    const listeners = served.listeners.filter((l) => l.port === port);
    const routing = served.chains.some((c) => c.port === port && c.connectionManagers.some((m) => routesProtected(m, headers) !== undefined));
    if (routing) return [];
    const cause =
      listeners.length === 0
        ? `no listener on port ${port}: the combined CONNECT patches for port ${port} match nothing (the gateway does not serve that path)`
        : `no connection manager on ${listeners.map((l) => l.name).join(', ')} routes by ${[...headers].join(' or ')}: the combined CONNECT patches for port ${port} match nothing there`;
    return [{ technicalID: undefined, path: 'connect', severity: 'absent', where: `port ${port}`, cause }];
  });
}

const order = (a: ServedFinding, b: ServedFinding): number =>
  (a.technicalID ?? '').localeCompare(b.technicalID ?? '') || a.path.localeCompare(b.path) || a.where.localeCompare(b.where) || a.cause.localeCompare(b.cause);

/** Every ACL shoot's protection on one gateway (namespace `gateway`), judged on what its Envoy serves. */
export function checkServedProtection(seed: SeedAcl, gateway: string, served: ServedGateway, only?: ReadonlySet<string>): ServedReport {
  const shoots = seed.shoots.filter((s) => only === undefined || only.has(s.technicalID));
  const findings = [
    ...connectPortFindings(seed, served),
    ...shoots.flatMap((shoot) => [...apiFindings(shoot, seed, gateway, served), ...observabilityFindings(shoot, seed, gateway, served), ...connectFindings(shoot, seed, served)]),
  ].sort(order);
  return { gateway, shoots: shoots.length, findings };
}
