// The legacy apiserver-proxy port (Gardener <= 1.122) as Istio renders it: Gardener's per-shoot
// chains (added by FILTER_CHAIN ADD, selected by the PROXY header's destination) and the RBAC
// filter our mutating webhook puts first in them.

import { FILTER_NAMES } from '../../src/rbac/filter-values.js';
import { getField, getObject, getObjectList, getString, type JsonObject } from '../envoy/json.js';
import { filterChains, filterName, listenerOnPort, networkFilters, policyNames } from './rendered-config.js';
import type { GardenerEraFixture } from './eras.js';
import { FIXTURE_SHOOTS, usesTlsTermination, type GatewayKey } from './seed-fixture.js';

/** The chain on 8443 whose match is the shoot's API server address (Gardener's per-shoot chain). */
export function legacyChainOf(listener: JsonObject | undefined, apiserverIP: string): JsonObject | undefined {
  return filterChains(listener).find((chain) => {
    const match = getObject(chain, 'filter_chain_match') ?? {};
    return getField(match, 'destination_port') === 443 && getObjectList(match, 'prefix_ranges').some((r) => getString(r, 'address_prefix') === apiserverIP);
  });
}

export function legacyChainProblems(era: GardenerEraFixture, key: GatewayKey, listeners: readonly JsonObject[]): string[] {
  const listener = listenerOnPort(listeners, 8443);
  return FIXTURE_SHOOTS.filter((shoot) => shoot.gateway === key).flatMap((shoot) => {
    const chain = legacyChainOf(listener, shoot.apiserverIP);
    const where = `${key} 8443 chain of ${shoot.id}${usesTlsTermination(era, shoot) ? ' (TLS termination)' : ''}`;
    if (chain === undefined) return [`${where}: missing`];
    const first = networkFilters(chain)[0];
    if (shoot.rule === undefined) return networkFilters(chain).some((f) => filterName(f).startsWith('gardener-acl-')) ? [`${where}: ACL filter on a shoot without ACL`] : [];
    if (first === undefined || filterName(first) !== FILTER_NAMES.legacyProxy || policyNames(first).join() !== shoot.id) {
      return [`${where}: first filter ${first === undefined ? 'none' : filterName(first)}, want ${FILTER_NAMES.legacyProxy} for ${shoot.id}`];
    }
    return [];
  });
}

