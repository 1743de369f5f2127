import { describe, expect, it } from 'vitest';
import { formatCidr } from '../../src/acl/cidr.js';
import { parseProviderConfig } from '../../src/acl/provider-config.js';
import { parseOperatorConfig } from '../../src/config/operator-config.js';
import { parseTechnicalID } from '../../src/acl/shoot-identity.js';

const P = 'spec.extensions[0].providerConfig';

function errorsOf(raw: unknown, max = 50): string[] {
  const result = parseProviderConfig(raw, max, P);
  return result.ok ? [] : result.errors.map((e) => `${e.path}: ${e.message}`);
}

describe('providerConfig', () => {
  it('normalises action and type case and the CIDR set', () => {
    const result = parseProviderConfig({ rule: { action: 'allow', type: 'REMOTE_IP', cidrs: ['10.1.2.3/8', '10.0.0.0/8', '2001:db8::/32'] } }, 50, P);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.rule.action).toBe('ALLOW');
    expect(result.rule.type).toBe('remote_ip');
    expect(result.rule.cidrs.map(formatCidr)).toEqual(['10.0.0.0/8', '2001:db8::/32']);
  });

  it('mode: enforce by default, audit on request (any case), anything else refused with the fix', () => {
    const parse = (mode?: unknown) => parseProviderConfig({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['10.0.0.0/8', '2001:db8::/32'], ...(mode === undefined ? {} : { mode }) } }, 50, P);
    const modeOf = (mode?: unknown) => {
      const result = parse(mode);
      return result.ok ? result.rule.mode : result.errors.map((e) => `${e.path}: ${e.message}`);
    };
    expect(modeOf()).toBe('enforce');
    expect(modeOf('ENFORCE')).toBe('enforce');
    expect(modeOf(' Audit ')).toBe('audit');
    expect(modeOf('shadow')).toEqual([`${P}.rule.mode: "shadow" is not a valid mode; use enforce or audit`]);
    expect(modeOf(true)).toEqual([`${P}.rule.mode: must be a string, one of enforce, audit`]);
    // Only audit warns; enforce is silent.
    const enforced = parse('enforce');
    expect(enforced.ok && enforced.warnings).toEqual([]);
  });

  it('accepts Gardener-style apiVersion/kind', () => {
    expect(errorsOf({ apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'AclConfig', rule: { action: 'DENY', type: 'source_ip', cidrs: ['::/0'] } })).toEqual([]);
  });

  it('names the field, the value and the fix', () => {
    expect(errorsOf({ rule: { action: 'banana', type: 'potato', cidrs: ['10.0.0.0/8', '1.2.3.4/24', '10.0.0.300/8'] } })).toEqual([
      `${P}.rule.action: "banana" is not a valid action; use ALLOW or DENY`,
      `${P}.rule.type: "potato" is not a valid type; use remote_ip, direct_remote_ip or source_ip`,
      `${P}.rule.cidrs[2]: "10.0.0.300/8" is not a valid CIDR ("10.0.0.300" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48`,
    ]);
  });

  it('rejects a missing rule, an empty list, too many CIDRs and unknown fields', () => {
    expect(errorsOf(undefined)).toEqual([`${P}: is required: add rule with action, type and cidrs`]);
    expect(errorsOf({})).toEqual([`${P}.rule: is required: add rule with action, type and cidrs`]);
    expect(errorsOf({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [] } })).toEqual([
      `${P}.rule.cidrs: must list at least one CIDR; an empty list would admit nobody (ALLOW) or nothing (DENY)`,
    ]);
    expect(errorsOf({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['1.0.0.0/8', '2.0.0.0/8', '3.0.0.0/8'] } }, 2)).toEqual([
      `${P}.rule.cidrs: has 3 distinct ranges (repeated entries and ranges inside others not counted), more than the maximum of 2 set by the operator; merge ranges or ask the operator to raise maxCIDRs`,
    ]);
    // maxCIDRs counts what is enforced: 60 entries naming 20 distinct ranges pass a maximum of 50.
    const repeated = Array.from({ length: 60 }, (_, i) => `10.${i % 20}.0.0/16`);
    const accepted = parseProviderConfig({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [...repeated, '2001:db8::/32'] } }, 50, P);
    expect(accepted.ok && accepted.rule.cidrs).toHaveLength(21);
    // ... and a range inside another is not counted either.
    expect(errorsOf({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['10.0.0.0/8', '10.1.0.0/16', '10.2.0.0/16'] } }, 1)).toEqual([]);
    // The written list stays bounded: ten times maxCIDRs.
    expect(errorsOf({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs: Array.from({ length: 21 }, () => '10.0.0.0/8') } }, 2)).toEqual([
      `${P}.rule.cidrs: has 21 entries, more than 10 times the maximum of 2 distinct ranges set by the operator; remove the repeated entries`,
    ]);
    // Unknown fields are ignored with a warning, as the reference extension ignored them; a
    // misspelt required field is still missing.
    const lenient = parseProviderConfig({ rules: [], rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['1.0.0.0/8', '2001:db8::/32'], cidr: 'x' } }, 50, P);
    expect(lenient.ok && lenient.warnings.map((w) => `${w.path}: ${w.message}`)).toEqual([
      `${P}: unknown field(s) "rules" ignored; remove them or check the spelling`,
      `${P}.rule: unknown field(s) "cidr" ignored; remove them or check the spelling`,
    ]);
    expect(errorsOf({ rule: { action: 'ALLOW', type: 'remote_ip', cidr: ['1.0.0.0/8'] } })).toEqual([`${P}.rule.cidrs: is required; the rule has "cidr" instead: rename it to cidrs`]);
    expect(errorsOf({ rule: { Action: 'ALLOW', type: 'remote_ip', cidrs: ['1.0.0.0/8'] } })).toEqual([`${P}.rule.action: is required; the rule has "Action" instead: rename it to action`]);
    expect(errorsOf({ rule: { action: 'ALLOW', type: 'remote_ip' } })).toEqual([`${P}.rule.cidrs: is required; must be a list of CIDR strings`]);
    expect(errorsOf({ rule: { action: 1, type: 'remote_ip', cidrs: '1.0.0.0/8' } })).toEqual([
      `${P}.rule.action: must be a string, one of ALLOW, DENY`,
      `${P}.rule.cidrs: must be a list of CIDR strings`,
    ]);
  });
});

describe('operator configuration', () => {
  it('has the documented defaults', () => {
    const parsed = parseOperatorConfig(undefined);
    expect(parsed.ok && parsed.config).toMatchObject({
      maxCIDRs: 50,
      protectedHeaders: ['reversed-vpn', 'x-gardener-destination'],
      protectedPorts: [8132, 8443],
      sniPort: 9443,
      legacyProxyPort: 8443,
      additionalAllowedCIDRs: [],
    });
  });

  it('reports invalid additional CIDRs instead of dropping them', () => {
    const parsed = parseOperatorConfig({ additionalAllowedCIDRs: ['10.0.0.0/8', 'nope'] }, 'config');
    expect(parsed.ok ? [] : parsed.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      'config.additionalAllowedCIDRs[1]: "nope" is not a valid CIDR ("nope" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48',
    ]);
  });
});

describe('technical IDs', () => {
  it.each([
    ['shoot--p--a', 'p--a', false],
    ['shoot--my-proj--my-shoot', 'my-proj--my-shoot', false],
    ['shoot-legacy--old', 'legacy--old', true],
  ])('%s', (id, shortID, legacy) => {
    expect(parseTechnicalID(id)).toEqual({ technicalID: id, shortID, legacy });
  });
  it.each(['garden', 'shoot--', 'shoot---x', 'Shoot--p--a', 'shoot--p--a.b', `shoot--p--${'a'.repeat(60)}`])('rejects %s', (id) => {
    expect(parseTechnicalID(id)).toBeUndefined();
  });
});
