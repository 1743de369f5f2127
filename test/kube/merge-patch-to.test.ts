// A status merge patch keeps every key it does not mention; mergePatchTo removes what the new
// value no longer has (found when an ACL went from audit back to enforce and `mode: audit` stayed).
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { mergePatchTo } from '../../src/kube/object-json.js';

/** RFC 7386 applied to plain JSON, as the API server applies a merge patch. */
function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

describe('mergePatchTo', () => {
  it('turns the stored value into exactly the desired one, nested keys included', () => {
    const stored = { gatewayNamespaces: ['a', 'b'], applied: { rule: { action: 'ALLOW', cidrs: ['10.0.0.0/8'], mode: 'audit' }, legacyProxyAllowed: [] }, extra: 1 };
    const desired = { gatewayNamespaces: ['a'], applied: { rule: { action: 'ALLOW', cidrs: ['10.0.0.0/8', '::/0'] }, legacyProxyAllowed: [] } };
    const patch = mergePatchTo(stored, desired);
    expect(patch).toEqual({ extra: null, gatewayNamespaces: ['a'], applied: { rule: { mode: null, action: 'ALLOW', cidrs: ['10.0.0.0/8', '::/0'] }, legacyProxyAllowed: [] } });
    expect(applyMergePatch(stored, patch)).toEqual(desired);
    expect(jsonpatch.compare(applyMergePatch(stored, patch) as object, desired)).toEqual([]);
  });

  it('with nothing stored, the patch is the desired value', () => {
    expect(mergePatchTo(undefined, { a: 1 })).toEqual({ a: 1 });
  });
});
