// The EnvoyFilters the Go reference extension (stackitcloud/gardener-extension-acl, HEAD) would
// write for the same seed, rebuilt from shared/docs/reference-extension.md section 1.5, so the
// real Envoy can show where that shape lets through what docs/design.md forbids. Test-only.
// Listener matches use portNumber instead of the reference's `0.0.0.0_<port>` names so that the
// placement approximation can apply them to the harness's listeners.
import { formatAddress, type Cidr } from '../../src/acl/cidr.js';
import type { SeedAcl, ShootAcl } from '../../src/acl/model.js';
import { parseTechnicalID } from '../../src/acl/shoot-identity.js';
import type { JsonObject } from './json.js';

const HCM = 'envoy.filters.network.http_connection_manager';

function principals(type: string, cidrs: readonly Cidr[]): JsonObject[] {
  // The reference writes the address as given and never adds IPv4-mapped twins.
  return cidrs.map((c) => ({ [type]: { address_prefix: formatAddress(c.family, c.address), prefix_len: c.prefixLen } }));
}

function rulePrincipals(shoot: ShootAcl): JsonObject[] {
  const own = principals(shoot.rule.type, shoot.rule.cidrs);
  // Always-allowed ranges are appended only for ALLOW rules.
  return shoot.rule.action === 'ALLOW' ? [...own, ...principals('remote_ip', shoot.alwaysAllowed)] : own;
}

function headerPolicyFilter(shoot: ShootAcl, name: string, header: string): JsonObject {
  const short = parseTechnicalID(shoot.technicalID)?.shortID ?? shoot.technicalID;
  const mentions = { header: { name: header, string_match: { contains: `.${shoot.technicalID}.` } } };
  return {
    name,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC',
      rules: {
        // Hard-coded ALLOW whatever the rule's action.
        action: 'ALLOW',
        policies: {
          [`${short}-inverse`]: {
            permissions: [{ not_rule: mentions }],
            principals: [{ remote_ip: { address_prefix: '0.0.0.0', prefix_len: 0 } }, { remote_ip: { address_prefix: '::', prefix_len: 0 } }],
          },
          [short]: { permissions: [mentions], principals: rulePrincipals(shoot) },
        },
      },
    },
  };
}

function envoyFilter(name: string, namespace: string, selector: Readonly<Record<string, string>>, configPatches: JsonObject[]): JsonObject {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name, namespace },
    spec: { workloadSelector: { labels: { ...selector } }, configPatches },
  };
}

/** Per shoot: `acl-api-<id>` (SNI), `acl-vpn-<id>` (8132, Reversed-VPN), `acl-http-proxy-<id>` (8443). */
export function referenceExtensionFilters(seed: SeedAcl): JsonObject[] {
  return seed.shoots.flatMap((shoot) => {
    const chain = shoot.sniChains[0];
    if (!chain) return [];
    const { namespace, selector } = chain.gateway;
    const id = shoot.technicalID;
    const http = (port: number, header: string, filterName: string): JsonObject => ({
      applyTo: 'HTTP_FILTER',
      match: { context: 'GATEWAY', listener: { portNumber: port, filterChain: { filter: { name: HCM } } } },
      patch: { operation: 'INSERT_FIRST', value: headerPolicyFilter(shoot, filterName, header) },
    });
    return [
      envoyFilter(`acl-api-${id}`, namespace, selector, [
        {
          applyTo: 'NETWORK_FILTER',
          // Only hosts[0]: the reference patches one chain per shoot.
          match: { context: 'GATEWAY', listener: { portNumber: 9443, filterChain: { sni: chain.hosts[0] ?? '' } } },
          patch: {
            operation: 'INSERT_FIRST',
            value: {
              name: 'acl-api',
              typed_config: {
                '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC',
                stat_prefix: 'envoyrbac',
                rules: { action: shoot.rule.action, policies: { 'acl-api': { permissions: [{ any: true }], principals: rulePrincipals(shoot) } } },
              },
            },
          },
        },
      ]),
      envoyFilter(`acl-vpn-${id}`, namespace, selector, [http(8132, 'reversed-vpn', 'acl-tls-tunnel')]),
      envoyFilter(`acl-http-proxy-${id}`, namespace, selector, [http(8443, 'X-Gardener-Destination', 'acl-http-proxy')]),
    ];
  });
}
