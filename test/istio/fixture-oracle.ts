// docs/design.md sections 3 and 5 applied to the fixture seed, read straight from Gardener's objects and
// independent of the generator: a shoot's rule is its Extension's providerConfig, A(S) is the
// seed's node and pod ranges, the shoot's node range and its Infrastructure's egress CIDRs; on the
// legacy apiserver-proxy port the shoot's pod range is admitted too.

import { normalizeCidrSet } from '../../src/acl/cidr.js';
import type { OracleShoot } from '../oracle/acl-semantics.js';
import { getObject, getString, isJsonObject, type JsonObject, type JsonValue } from '../envoy/json.js';
import { cidr, rule } from '../support/test-seed.js';

export interface FixtureOracle {
  /** Every shoot of the seed (with or without ACL), for the SNI, CONNECT and observability paths. */
  readonly shoots: readonly OracleShoot[];
  /** The same shoots as judged on the legacy PROXY-protocol port (pod range admitted too). */
  readonly legacyProxyShoots: readonly OracleShoot[];
}

function path(object: JsonValue | undefined, ...keys: string[]): JsonValue | undefined {
  let node = object;
  for (const key of keys) node = isJsonObject(node) ? node[key] : undefined;
  return node;
}

function strings(value: JsonValue | undefined): string[] {
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function find(objects: readonly JsonObject[], kind: string, namespace: string | undefined, name: string): JsonObject | undefined {
  return objects.find((o) => o['kind'] === kind && path(o, 'metadata', 'name') === name && (namespace === undefined || path(o, 'metadata', 'namespace') === namespace));
}

export function fixtureOracle(gardenerObjects: readonly JsonObject[]): FixtureOracle {
  const shoots: OracleShoot[] = [];
  const legacyProxyShoots: OracleShoot[] = [];
  for (const cluster of gardenerObjects.filter((o) => o['kind'] === 'Cluster')) {
    const id = getString(getObject(cluster, 'metadata') ?? {}, 'name') ?? '';
    const shoot = path(cluster, 'spec', 'shoot');
    const infrastructure = find(gardenerObjects, 'Infrastructure', id, String(path(shoot, 'metadata', 'name')));
    const always = [
      ...strings(path(cluster, 'spec', 'seed', 'spec', 'networks', 'nodes')),
      ...strings(path(cluster, 'spec', 'seed', 'spec', 'networks', 'pods')),
      ...strings(path(shoot, 'spec', 'networking', 'nodes')),
      ...strings(path(infrastructure, 'status', 'egressCIDRs')),
    ].map(cidr);
    const providerRule = path(find(gardenerObjects, 'Extension', id, 'acl'), 'spec', 'providerConfig', 'rule');
    const parsedRule = isJsonObject(providerRule)
      ? rule(String(providerRule['action']), String(providerRule['type']), strings(providerRule['cidrs']))
      : undefined;
    const alwaysAllowed = normalizeCidrSet(always);
    shoots.push({ technicalID: id, rule: parsedRule, alwaysAllowed });
    const pods = strings(path(shoot, 'spec', 'networking', 'pods')).map(cidr);
    legacyProxyShoots.push({ technicalID: id, rule: parsedRule, alwaysAllowed: normalizeCidrSet([...always, ...pods]) });
  }
  return { shoots, legacyProxyShoots };
}

export function oracleShoot(shoots: readonly OracleShoot[], id: string): OracleShoot {
  const shoot = shoots.find((s) => s.technicalID === id);
  if (shoot === undefined) throw new Error(`no oracle shoot ${id}`);
  return shoot;
}
