// The files rendered from code (scripts/generated-files.ts) are what is committed, and the charts'
// defaults are zod's: a setting or flag changed in code alone fails here, not on a seed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { operatorSettingsSchema } from '../../src/acl/operator-settings.js';
import { ADMISSION_CHART_CONFIG, SEED_CHART_CONFIG, chartValuesSchemaText, inputDefaults, replaceGeneratedSection } from '../../src/config/generated-files.js';
import { GENERATED_FILES, GENERATE_COMMAND } from '../../scripts/generated-files.js';
import { compactJson } from '../../src/json/compact-json.js';
import { valuesSchemaErrors } from '../../src/registration/values-schema.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

describe('files rendered from code', () => {
  it.each(GENERATED_FILES.map((g) => [g.file, g] as const))('%s is what the code renders, byte for byte', async (file, { render }) => {
    const committed = read(file);
    expect(await render(committed), `${file} differs from what the code renders; run ${GENERATE_COMMAND}`).toBe(committed);
  });

  it('a generated section without its markers is refused with the markers named', () => {
    expect(() => replaceGeneratedSection('# Configuration\n', 'operator configuration', 'x', 'docs/operators/configuration.md')).toThrow(
      'docs/operators/configuration.md: no lines <!-- BEGIN GENERATED: operator configuration (npm run generate) --> ... <!-- END GENERATED: operator configuration --> to write the generated operator configuration between; add them where it belongs',
    );
  });
});

describe("the charts' config values", () => {
  const defaults = inputDefaults();

  it("the seed chart's values.yaml holds zod's defaults, every field", () => {
    expect((parse(read(`${SEED_CHART_CONFIG.chart}/values.yaml`)) as { config: unknown }).config).toEqual(defaults);
  });

  it("the admission chart's values.yaml holds zod's default of the fields it takes", () => {
    const config = (parse(read(`${ADMISSION_CHART_CONFIG.chart}/values.yaml`)) as { config: unknown }).config;
    expect(config).toEqual(Object.fromEntries((ADMISSION_CHART_CONFIG.fields ?? []).map((f) => [f, defaults[f]])));
  });

  const chartConfigSchema = (JSON.parse(read(`${SEED_CHART_CONFIG.chart}/values.schema.json`)) as { properties: { config: Record<string, unknown> } }).properties.config;
  const cases: readonly (readonly [string, Record<string, unknown>])[] = [
    ['maxCIDRs above 1000', { maxCIDRs: 5000 }],
    ['maxCIDRs 0', { maxCIDRs: 0 }],
    ['101 additionalAllowedCIDRs', { additionalAllowedCIDRs: Array.from({ length: 101 }, (_, i) => `10.0.${i}.0/24`) }],
    ['no protectedHeaders', { protectedHeaders: [] }],
    ['a protected header with a space', { protectedHeaders: ['X Bad'] }],
    ['port 0', { sniPort: 0 }],
    ['maxObjectBytes above 640 KiB', { maxObjectBytes: 655361 }],
    ['an unknown combinedForm', { combinedForm: 'lua' }],
    ['ecdsBuckets 257', { ecdsBuckets: 257 }],
    ['an unknown tunnelRevocation', { tunnelRevocation: 'drain' }],
    ['a misspelt field', { maxCidrs: 50 }],
  ];
  // The registration's check is the chart schema's reader here (Helm's own is test/charts/charts-render.test.ts).
  it.each(cases)('%s: refused by zod and by the chart', (_name, config) => {
    expect(operatorSettingsSchema.safeParse(config).success).toBe(false);
    expect(valuesSchemaErrors(config, chartConfigSchema)).not.toEqual([]);
  });

  it('the defaults: admitted by both', () => {
    expect(operatorSettingsSchema.safeParse(defaults).success).toBe(true);
    expect(valuesSchemaErrors(defaults, chartConfigSchema)).toEqual([]);
  });
});

describe('a generator that would write a broken file refuses instead', () => {
  it('a chart field the OperatorConfiguration lacks is named', () => {
    const current = JSON.stringify({ properties: { config: { type: 'object' } } });
    expect(() => chartValuesSchemaText(current, { chart: 'charts/x', fields: ['maxCidrs'] })).toThrow(/^charts\/x: maxCidrs is not a field of the OperatorConfiguration \(additionalAllowedCIDRs, maxCIDRs, /);
  });

  it('a value JSON cannot hold is not written as text', () => {
    expect(() => compactJson({ a: undefined })).toThrow('compactJson: undefined undefined is not JSON');
    expect(() => compactJson({ a: [1n] })).toThrow('compactJson: bigint 1 is not JSON');
  });
});

describe('compactJson', () => {
  it('keeps a setting on one line and indents what holds settings', () => {
    expect(compactJson({ a: { type: 'integer', enum: [1, 2] }, b: { c: { d: { e: 1 } } } })).toBe(
      '{\n  "a": {"type": "integer", "enum": [1, 2]},\n  "b": {\n    "c": {"d": {"e": 1}}\n  }\n}\n',
    );
  });
});
