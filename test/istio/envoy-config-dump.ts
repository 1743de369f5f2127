// Reading an Envoy admin /config_dump: the listeners Envoy serves, their HTTP filters, the ECDS
// resources it holds, and the shoots an RBAC `matcher` looks up.
import { lookupOf } from '../../src/rbac/connect-matcher.js';
import { getObject, getObjectList, getString, type JsonObject } from '../envoy/json.js';

/** Every listener in an Envoy config dump, static or dynamic, as rendered JSON. */
export function dumpedListeners(dump: JsonObject): JsonObject[] {
  const listeners: JsonObject[] = [];
  for (const config of getObjectList(dump, 'configs')) {
    for (const l of getObjectList(config, 'static_listeners')) {
      const listener = getObject(l, 'listener');
      if (listener) listeners.push(listener);
    }
    for (const l of getObjectList(config, 'dynamic_listeners')) {
      const listener = getObject(getObject(l, 'active_state') ?? {}, 'listener');
      if (listener) listeners.push(listener);
    }
  }
  return listeners;
}

/** The HTTP filters of a listener's connection managers, chain by chain. */
export function listenerHttpFilters(listener: JsonObject): JsonObject[] {
  return getObjectList(listener, 'filter_chains').flatMap((chain) =>
    getObjectList(chain, 'filters')
      .filter((f) => getString(f, 'name') === 'envoy.filters.network.http_connection_manager')
      .flatMap((hcm) => getObjectList(getObject(hcm, 'typed_config') ?? {}, 'http_filters')),
  );
}

/** The technical IDs an RBAC `matcher` of the matcher form looks up (its exact-match map keys). */
export function matcherMapKeys(matcher: unknown): string[] {
  return Object.keys(lookupOf(matcher)?.map ?? {}).map((key) => key.replace(/^=/, ''));
}

/** The ECDS resources Envoy holds: typed config by resource name. */
export function dumpedEcdsFilters(dump: JsonObject): Map<string, JsonObject> {
  const held = new Map<string, JsonObject>();
  for (const section of getObjectList(dump, 'configs')) {
    if (getString(section, '@type') !== 'type.googleapis.com/envoy.admin.v3.EcdsConfigDump') continue;
    for (const entry of getObjectList(section, 'ecds_filters')) {
      const filter = getObject(entry, 'ecds_filter') ?? {};
      const name = getString(filter, 'name');
      const typed = getObject(filter, 'typed_config');
      if (name !== undefined && typed !== undefined) held.set(name, typed);
    }
  }
  return held;
}

/** For every dynamic (xDS) listener: the version and time of the config Envoy is serving, which change only when Envoy takes a changed listener. */
export function dumpedListenerVersions(dump: JsonObject): Map<string, string> {
  const versions = new Map<string, string>();
  for (const config of getObjectList(dump, 'configs')) {
    for (const l of getObjectList(config, 'dynamic_listeners')) {
      const active = getObject(l, 'active_state') ?? {};
      versions.set(getString(l, 'name') ?? '?', `${getString(active, 'version_info') ?? ''} ${getString(active, 'last_updated') ?? ''}`);
    }
  }
  return versions;
}
