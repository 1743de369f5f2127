// The one test for "a JSON object" (not null, not an array), for every layer: the builders in
// src/rbac read stored objects with it and must not depend on src/kube for that.
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
