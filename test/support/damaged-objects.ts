// Generated objects as Envoy could see them after something went wrong: an RBAC config whose
// `matcher` a lenient decoder dropped, an ECDS bucket that is not stored. The matcher forms must
// then refuse every request naming a shoot routably (their fallback `rules`, the missing bucket's
// default config), never admit it unchecked.
import { isRecord, type JsonRecord } from '../oracle/placement.js';

function patchesOf(object: unknown): unknown[] {
  return isRecord(object) && isRecord(object['spec']) && Array.isArray(object['spec']['configPatches']) ? (object['spec']['configPatches'] as unknown[]) : [];
}

function typedConfigOf(patch: unknown): JsonRecord | undefined {
  const value = isRecord(patch) && isRecord(patch['patch']) ? patch['patch']['value'] : undefined;
  return isRecord(value) && isRecord(value['typed_config']) ? value['typed_config'] : undefined;
}

/** Whether an object holds an RBAC config with a `matcher` (a matcher shard, an ECDS bucket). */
export function hasMatcher(object: unknown): boolean {
  return patchesOf(object).some((p) => typedConfigOf(p)?.['matcher'] !== undefined);
}

/** `object` with `matcher` and `shadow_matcher` removed from every RBAC config it holds. */
export function withoutMatcher<T>(object: T): T {
  if (!isRecord(object) || !isRecord(object['spec'])) return object;
  const configPatches = patchesOf(object).map((patch) => {
    const config = typedConfigOf(patch);
    if (config === undefined || config['matcher'] === undefined || !isRecord(patch) || !isRecord(patch['patch'])) return patch;
    const { matcher: _dropped, shadow_matcher: _alsoDropped, ...rest } = config;
    return { ...patch, patch: { ...patch['patch'], value: { ...(patch['patch']['value'] as JsonRecord), typed_config: rest } } };
  });
  return { ...object, spec: { ...object['spec'], configPatches } } as T;
}

/** The ECDS resources an object defines (EXTENSION_CONFIG patches). */
export function definesEcdsResources(object: unknown): boolean {
  return patchesOf(object).some((p) => isRecord(p) && p['applyTo'] === 'EXTENSION_CONFIG');
}

export function namespaceOf(object: unknown): string {
  return isRecord(object) && isRecord(object['metadata']) ? String(object['metadata']['namespace']) : '';
}

export function nameOf(object: unknown): string {
  return isRecord(object) && isRecord(object['metadata']) ? String(object['metadata']['name']) : '';
}

/** The CONNECT ports a damaged object affects on its gateway: the ports of its HTTP filter patches, or every port for ECDS resources. */
export function affectedPorts(object: unknown, protectedPorts: readonly number[]): number[] {
  const ports = patchesOf(object).flatMap((p) => {
    const listener = isRecord(p) && isRecord(p['match']) && isRecord(p['match']['listener']) ? p['match']['listener'] : undefined;
    return isRecord(p) && p['applyTo'] === 'HTTP_FILTER' && typeof listener?.['portNumber'] === 'number' ? [listener['portNumber']] : [];
  });
  return ports.length > 0 ? [...new Set(ports)] : [...protectedPorts];
}
