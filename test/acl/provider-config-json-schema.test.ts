import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseCidr } from '../../src/acl/cidr.js';
import { ACTIONS, PRINCIPAL_TYPES, RULE_MODES } from '../../src/acl/acl-rule.js';
import { parseProviderConfig, providerConfigSchema } from '../../src/acl/provider-config.js';
import {
  CIDR_SHAPE,
  PROVIDER_CONFIG_SCHEMA_COMMAND,
  PROVIDER_CONFIG_SCHEMA_FILE,
  providerConfigJsonSchema,
  providerConfigJsonSchemaText,
  TRIMMED_WHITESPACE_CLASS,
} from '../../src/acl/provider-config-input-schema.js';
import { checkJsonSchema } from '../support/json-schema-check.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const P = 'providerConfig';
/** The largest maxCIDRs an operator may set: the parser at its most lenient. */
const MOST_CIDRS = 1000;

const schema = providerConfigJsonSchema();
const schemaAccepts = (value: unknown) => checkJsonSchema(schema, value).length === 0;
const parserAccepts = (value: unknown, maxCidrs = MOST_CIDRS) => parseProviderConfig(value, maxCidrs, P).ok;

/** Every providerConfig of an `acl` extension (Shoot entry or Extension spec) in the YAML under `dir`. */
function providerConfigsIn(dir: string): { readonly where: string; readonly config: unknown }[] {
  const found: { where: string; config: unknown }[] = [];
  const visit = (node: unknown, where: string): void => {
    if (Array.isArray(node)) node.forEach((n) => visit(n, where));
    else if (typeof node === 'object' && node !== null) {
      const object = node as Record<string, unknown>;
      if (object['type'] === 'acl' && 'providerConfig' in object) found.push({ where, config: object['providerConfig'] });
      Object.values(object).forEach((n) => visit(n, where));
    }
  };
  const files = readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' }).filter((f) => /\.ya?ml$/.test(f));
  for (const file of files.sort()) {
    parseAllDocuments(readFileSync(join(ROOT, dir, file), 'utf8')).forEach((doc, i) => {
      if (doc.errors.length === 0) visit(doc.toJS(), `${join(dir, file)}#${i}`);
    });
  }
  return found;
}

describe('the published providerConfig JSON Schema', () => {
  it('is the committed file, byte for byte', () => {
    let committed: string;
    try {
      committed = readFileSync(join(ROOT, PROVIDER_CONFIG_SCHEMA_FILE), 'utf8');
    } catch {
      committed = '(missing)';
    }
    expect(committed, `${PROVIDER_CONFIG_SCHEMA_FILE} is not what the zod input schema generates; regenerate it with: ${PROVIDER_CONFIG_SCHEMA_COMMAND}`).toBe(providerConfigJsonSchemaText());
  });

  it('names the fields the parser knows, required where the parser requires them', () => {
    const parserObject = providerConfigSchema(1).in;
    const requiredOf = (shape: Record<string, { safeParse(v: unknown): { success: boolean } }>) =>
      Object.keys(shape).filter((k) => !shape[k]?.safeParse(undefined).success).sort();
    const top = schema as { required: string[]; properties: Record<string, { required: string[]; properties: Record<string, unknown> }> };
    expect(Object.keys(top.properties).sort()).toEqual(Object.keys(parserObject.shape).sort());
    expect([...top.required].sort()).toEqual(requiredOf(parserObject.shape));
    const rule = top.properties['rule'];
    expect(Object.keys(rule?.properties ?? {}).sort()).toEqual(Object.keys(parserObject.shape.rule.shape).sort());
    expect([...(rule?.required ?? [])].sort()).toEqual(requiredOf(parserObject.shape.rule.shape));
  });

  it('accepts every acl providerConfig of examples/ and of the YAML test fixtures that the parser accepts', () => {
    const examples = providerConfigsIn('examples');
    const fixtures = providerConfigsIn('test');
    // The examples are meant to be valid; a fixture may be a template (`rule: ${rule}`).
    expect(examples.filter(({ config }) => !parserAccepts(config, 50)).map(({ where }) => where)).toEqual([]);
    const accepted = [...examples, ...fixtures].filter(({ config }) => parserAccepts(config));
    expect(examples.length).toBeGreaterThanOrEqual(4);
    expect(accepted.length - examples.length).toBeGreaterThanOrEqual(3);
    expect(accepted.filter(({ config }) => !schemaAccepts(config)).map(({ where, config }) => `${where}: ${JSON.stringify(config)}`)).toEqual([]);
  });

  const rule = { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24', '2001:db8::/48'] };

  it.each<[string, unknown]>([
    ['the README rule', { rule: { ...rule, mode: 'enforce' } }],
    ['any case', { rule: { action: 'allow', type: 'REMOTE_IP', cidrs: ['10.1.2.3/8', '10.0.0.0/8', '2001:db8::/32'] } }],
    ['mode in any case, with spaces', { rule: { ...rule, mode: ' Audit ' } }],
    ['spaces around action, type and a CIDR', { rule: { action: '\tDeny\u00a0', type: ' direct_remote_ip\n', cidrs: [' 10.0.0.0/8 \u3000'] } }],
    ['Gardener-style apiVersion and kind', { apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'AclConfig', rule: { action: 'DENY', type: 'source_ip', cidrs: ['::/0'] } }],
    ['unknown fields (ignored with a warning)', { rules: [], rule: { ...rule, cidr: 'x' } }],
    ['bare addresses, IPv4-mapped and embedded-IPv4 IPv6', { rule: { ...rule, cidrs: ['192.0.2.1', '2001:db8::1', '::ffff:203.0.113.0/120', '64:ff9b::192.0.2.33/128'] } }],
    ['host bits set', { rule: { ...rule, cidrs: ['10.1.2.3/8'] } }],
    ['the same range many times', { rule: { ...rule, cidrs: Array.from({ length: 60 }, (_, i) => `10.${i % 20}.0.0/16`) } }],
  ])('accepts %s, as the parser does', (_, config) => {
    expect(parserAccepts(config)).toBe(true);
    expect(checkJsonSchema(schema, config)).toEqual([]);
  });

  it.each<[string, unknown]>([
    ['no providerConfig', null],
    ['a list', [rule]],
    ['a string', 'rule: {action: ALLOW}'],
    ['no rule', {}],
    ['rule: null', { rule: null }],
    ['a list of rules', { rule: [rule] }],
    ['apiVersion not a string', { apiVersion: 1, rule }],
    ['kind: null', { kind: null, rule }],
    ['a wrong action', { rule: { ...rule, action: 'PERMIT' } }],
    ['two actions', { rule: { ...rule, action: 'ALLOW DENY' } }],
    ['an action with a zero-width space (not trimmed)', { rule: { ...rule, action: 'ALLOW\u200b' } }],
    ['an action that is a number', { rule: { ...rule, action: 1 } }],
    ['a wrong type', { rule: { ...rule, type: 'client_ip' } }],
    ['a type with a hyphen', { rule: { ...rule, type: 'remote-ip' } }],
    ['a type with a dotless i', { rule: { ...rule, type: 'remote_\u0131p' } }],
    ['a wrong mode', { rule: { ...rule, mode: 'shadow' } }],
    ['mode: true', { rule: { ...rule, mode: true } }],
    ['mode: null', { rule: { ...rule, mode: null } }],
    ['cidrs not a list', { rule: { ...rule, cidrs: '10.0.0.0/8' } }],
    ['an empty cidrs list', { rule: { ...rule, cidrs: [] } }],
    ['a CIDR that is a number', { rule: { ...rule, cidrs: [10] } }],
    ['a CIDR that is null', { rule: { ...rule, cidrs: [null] } }],
    ['a CIDR that is a word', { rule: { ...rule, cidrs: ['office'] } }],
    ['a CIDR with a port', { rule: { ...rule, cidrs: ['10.0.0.0/8:443'] } }],
    ['a CIDR with a zone', { rule: { ...rule, cidrs: ['fe80::1%eth0/64'] } }],
    ['the cidr typo', { rule: { action: 'ALLOW', type: 'remote_ip', cidr: ['10.0.0.0/8'] } }],
    ['the Action typo', { rule: { Action: 'ALLOW', type: 'remote_ip', cidrs: ['10.0.0.0/8'] } }],
    ['no type', { rule: { action: 'ALLOW', cidrs: ['10.0.0.0/8'] } }],
  ])('refuses %s, as the parser does', (_, config) => {
    expect(parserAccepts(config)).toBe(false);
    expect(checkJsonSchema(schema, config)).not.toEqual([]);
  });

  it.each<[string, unknown, number]>([
    ['an octet over 255', { rule: { ...rule, cidrs: ['10.0.0.300/8'] } }, MOST_CIDRS],
    ['a prefix over 32', { rule: { ...rule, cidrs: ['10.0.0.0/33'] } }, MOST_CIDRS],
    ['a leading zero', { rule: { ...rule, cidrs: ['010.0.0.0/8'] } }, MOST_CIDRS],
    ['nine IPv6 groups', { rule: { ...rule, cidrs: ['1:2:3:4:5:6:7:8:9/64'] } }, MOST_CIDRS],
    ['more ranges than the seed allows', { rule: { ...rule, cidrs: ['10.0.0.0/8', '192.0.2.0/24'] } }, 1],
  ])('leaves %s to the parser (the schema accepts it)', (_, config, maxCidrs) => {
    expect(parserAccepts(config, maxCidrs)).toBe(false);
    expect(checkJsonSchema(schema, config)).toEqual([]);
  });
});

describe('agreement with the parser on generated configs', () => {
  const trimmed = fc.constantFrom('', ' ', '\t', '\n', '\u00a0', '\u2028', '\ufeff', '\u3000');
  const anyCase = (values: readonly string[]) =>
    fc
      .constantFrom(...values)
      .chain((v) => fc.tuple(fc.constant(v), fc.array(fc.boolean(), { minLength: v.length, maxLength: v.length })))
      .map(([v, upper]) => [...v].map((c, i) => (upper[i] ? c.toUpperCase() : c.toLowerCase())).join(''));
  const notAString = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.constant([]), fc.constant({}));
  const word = (values: readonly string[]) =>
    fc.oneof(
      { weight: 16, arbitrary: fc.tuple(trimmed, anyCase(values), trimmed).map((parts) => parts.join('')) },
      { weight: 1, arbitrary: anyCase(values).map((v) => v.replace('_', '-')) },
      { weight: 1, arbitrary: anyCase(values).map((v) => `${v}\u200b`) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
      { weight: 1, arbitrary: notAString },
    );
  const validCidr = fc.oneof(
    fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, n]) => `${a}/${n}`),
    fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, n]) => `${a}/${n}`),
    fc.oneof(fc.ipV4(), fc.ipV6()),
    fc.tuple(trimmed, fc.ipV4(), trimmed).map((parts) => parts.join('')),
  );
  // Right shape, wrong values: what the schema leaves to the parser.
  const badValue = fc.oneof(
    fc.tuple(fc.ipV4(), fc.integer({ min: 33, max: 999 })).map(([a, n]) => `${a}/${n}`),
    fc.tuple(fc.ipV6(), fc.integer({ min: 129, max: 999 })).map(([a, n]) => `${a}/${n}`),
    fc.tuple(fc.ipV4(), fc.integer({ min: 256, max: 999 })).map(([a, n]) => a.replace(/^\d+/, String(n))),
    fc.ipV4().map((a) => `0${a}`),
    fc.ipV6().map((a) => `${a}:1:2:3:4:5:6:7:8`),
  );
  const cidr = fc.oneof(
    { weight: 4, arbitrary: validCidr },
    { weight: 1, arbitrary: badValue },
    { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF:./ '), maxLength: 24 }) },
    { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 1, arbitrary: notAString },
  );
  const cidrs = fc.oneof(
    { weight: 6, arbitrary: fc.array(validCidr, { minLength: 1, maxLength: 5 }) },
    { weight: 6, arbitrary: fc.array(cidr, { maxLength: 5 }) },
    { weight: 2, arbitrary: fc.tuple(fc.array(validCidr, { maxLength: 2 }), badValue).map(([ok, bad]) => [...ok, bad]) },
    { weight: 1, arbitrary: cidr },
  );
  const extra = fc.dictionary(fc.constantFrom('cidr', 'Action', 'rules', 'x-note'), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 });
  const fields = { action: word(ACTIONS), type: word(PRINCIPAL_TYPES), cidrs, mode: word(RULE_MODES) };
  const rule = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(fc.record(fields, { requiredKeys: ['action', 'type', 'cidrs'] }), extra).map(([r, more]) => ({ ...more, ...r })) },
    // Any field may be missing.
    { weight: 1, arbitrary: fc.tuple(fc.record(fields, { requiredKeys: [] }), extra).map(([r, more]) => ({ ...more, ...r })) },
    { weight: 1, arbitrary: notAString },
  );
  const config = fc.oneof(
    { weight: 10, arbitrary: fc.tuple(fc.record({ apiVersion: fc.oneof(fc.string(), notAString), kind: fc.string(), rule }, { requiredKeys: ['rule'] }), extra).map(([c, more]) => ({ ...more, ...c })) },
    { weight: 1, arbitrary: fc.record({ apiVersion: fc.string() }) },
    { weight: 1, arbitrary: fc.oneof(notAString, fc.string()) },
  );

  it('the schema accepts what the parser accepts; what only the parser refuses is a CIDR value', () => {
    let parserAccepted = 0;
    let onlyParserRefused = 0;
    fc.assert(
      fc.property(config, (c) => {
        const parsed = parseProviderConfig(c, MOST_CIDRS, P);
        const violations = checkJsonSchema(schema, c);
        if (parsed.ok) {
          parserAccepted++;
          expect(violations, JSON.stringify(c)).toEqual([]);
        } else if (violations.length === 0) {
          onlyParserRefused++;
          expect(parsed.errors.map((e) => e.path).filter((path) => !/^providerConfig\.rule\.cidrs\[\d+\]$/.test(path)), JSON.stringify(c)).toEqual([]);
        }
      }),
      { numRuns: 2000 },
    );
    // Neither side of the property may go untested.
    expect(parserAccepted).toBeGreaterThan(100);
    expect(onlyParserRefused).toBeGreaterThan(20);
  });

  it('the CIDR pattern matches every string parseCidr accepts', () => {
    const written = fc.oneof(validCidr, cidr.filter((c): c is string => typeof c === 'string'), fc.tuple(fc.ipV6(), fc.ipV4()).map(([v6, v4]) => `${v6.replace(/:[^:]*$/, ':')}${v4}`));
    fc.assert(
      fc.property(fc.tuple(trimmed, written, trimmed), ([before, text, after]) => {
        const s = `${before}${text}${after}`;
        if (parseCidr(s).ok) expect(CIDR_SHAPE.test(s), s).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('exactness of the patterns', () => {
  it('the whitespace class is exactly what String.prototype.trim removes', () => {
    const inClass = new RegExp(`^[${TRIMMED_WHITESPACE_CLASS}]$`, 'u');
    const differ: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      if (inClass.test(c) !== (c.trim() === '')) differ.push(cp.toString(16));
    }
    expect(differ).toEqual([]);
  });

  it('no non-ASCII character case-folds into an action, type or mode (ASCII case pairs are then exact)', () => {
    // The parser's folds: action upper-cased, type and mode lower-cased (provider-config.ts).
    const fields: [readonly string[], (s: string) => string][] = [
      [ACTIONS, (s) => s.toUpperCase()],
      [PRINCIPAL_TYPES, (s) => s.toLowerCase()],
      [RULE_MODES, (s) => s.toLowerCase()],
    ];
    const folding: string[] = [];
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      for (const [values, fold] of fields) if (values.some((v) => v.includes(fold(c)))) folding.push(`${cp.toString(16)} -> ${fold(c)}`);
    }
    expect(folding).toEqual([]);
  });

  it('every pattern compiles with and without the u flag (editors differ)', () => {
    const patterns = JSON.stringify(schema).match(/"pattern":"((?:[^"\\]|\\.)*)"/g) ?? [];
    expect(patterns.length).toBe(4);
    for (const p of patterns) {
      const source = JSON.parse(`{${p}}`).pattern as string;
      expect(() => new RegExp(source)).not.toThrow();
      expect(() => new RegExp(source, 'u')).not.toThrow();
    }
  });
});

describe('json-schema-check', () => {
  it('throws on a keyword it does not know, wherever it is', () => {
    expect(() => checkJsonSchema({ type: 'object', properties: { a: { anyOf: [{ type: 'string' }, { type: 'string', maxLength: 3 }] } } }, {})).toThrow(/maxLength/);
    expect(() => checkJsonSchema({ $ref: '#/definitions/x' }, {})).toThrow(/\$ref/);
  });

  it('reports where and why', () => {
    expect(checkJsonSchema(schema, { rule: { action: 'PERMIT', type: 'remote_ip', cidrs: [1] } }).map((v) => v.path)).toEqual(['/rule/action', '/rule/cidrs/0']);
  });
});
