import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { packChart } from '../registration/chart-archive.js';
import { controllerDeployment, controllerRegistration, mergeValues, operatorExtension, type HelmValues } from '../registration/registration-objects.js';
import { readValuesSchema, valuesSchemaErrors } from '../registration/values-schema.js';
import { toYamlDocuments } from '../kube/yaml-documents.js';
import { argsUsageError, parseCommandArgs } from './command-args.js';
import type { CommandIO } from './command-io.js';
import { flagsSchema, parseOptions } from './flag-table.js';
import { REGISTRATION_FLAGS, defaultChartDir } from './registration-flags.js';
import { REGISTRATION_USAGE } from './usage-texts.js';


/**
 * What the chart's values.schema.json refuses in `values` over the chart's own values.yaml (as
 * Helm merges them before it checks), one line each, or undefined.
 */
async function chartValuesProblems(chartDir: string, values: HelmValues, what: string): Promise<string | undefined> {
  const schema = await readValuesSchema(chartDir);
  if (typeof schema === 'string') return `cannot check ${what}: ${schema}\n`;
  let defaults: unknown;
  try {
    defaults = parseYaml(await readFile(path.join(chartDir, 'values.yaml'), 'utf8'));
  } catch (error) {
    return `cannot check ${what}: ${(error as Error).message}\n`;
  }
  const errors = valuesSchemaErrors(mergeValues(valuesFileSchema.safeParse(defaults ?? {}).data ?? {}, values), schema);
  if (errors.length === 0) return undefined;
  return `${what}: ${errors.length} value(s) the chart ${path.basename(chartDir)} refuses (values.schema.json):\n${errors.map((e) => `  ${e}\n`).join('')}`;
}

// The text lives in usage-texts.ts, which --help and completion read without loading this module.
export { REGISTRATION_USAGE };

const argsSchema = flagsSchema(REGISTRATION_FLAGS)
  .superRefine((a, ctx) => {
    if (!a.operator) {
      for (const flag of ['chart-ref', 'admission-chart-ref', 'admission-ca-bundle', 'virtual-garden-kubeconfig-secret'] as const) {
        if (a[flag] !== undefined) ctx.addIssue({ code: 'custom', path: [flag], message: 'only with --operator' });
      }
      return;
    }
    for (const flag of ['chart-ref', 'admission-chart-ref'] as const) {
      if (a[flag] === undefined) ctx.addIssue({ code: 'custom', path: [flag], message: 'is required with --operator' });
    }
  });

const valuesFileSchema = z.record(z.string(), z.unknown(), { error: 'must be a YAML map of chart values' });

async function readValuesFile(file: string | undefined, flag = '--values'): Promise<HelmValues | string> {
  if (file === undefined) return {};
  let raw: unknown;
  try {
    raw = parseYaml(await readFile(file, 'utf8'));
  } catch (error) {
    return `${flag}: ${file}: ${(error as Error).message}`;
  }
  const parsed = valuesFileSchema.safeParse(raw ?? {});
  return parsed.success ? parsed.data : `${flag}: ${file}: ${parsed.error.issues[0]?.message ?? 'invalid'}`;
}

async function readPem(file: string): Promise<string | { error: string }> {
  try {
    const pem = await readFile(file, 'utf8');
    return pem.includes('-----BEGIN CERTIFICATE-----') ? pem : { error: `--admission-ca-bundle: ${file} holds no PEM certificate` };
  } catch (error) {
    return { error: `--admission-ca-bundle: ${(error as Error).message}` };
  }
}

export async function registrationCommand(argv: readonly string[], io: CommandIO): Promise<number> {
  const parsed = parseCommandArgs(argv, io, REGISTRATION_USAGE, parseOptions(REGISTRATION_FLAGS));
  if ('exitCode' in parsed) return parsed.exitCode;
  const args = argsSchema.safeParse(parsed.values);
  if (!args.success) return argsUsageError(io, REGISTRATION_USAGE, args.error.issues);
  const a = args.data;
  const fileValues = await readValuesFile(a.values);
  if (typeof fileValues === 'string') {
    io.stderr(`${fileValues}\n`);
    return 2;
  }
  const image: HelmValues = {};
  if (a['image-repository']) image.repository = a['image-repository'];
  if (a['image-tag']) image.tag = a['image-tag'];
  const values = Object.keys(image).length > 0 ? mergeValues(fileValues, { image }) : fileValues;
  // The seed chart's own schema, now: a bad value would otherwise fail gardenlet's render on every seed.
  const checkSeedValues = async (chartDir: string): Promise<boolean> => {
    const refused = await chartValuesProblems(chartDir, values, a.values ? `--values ${a.values}` : 'the values');
    if (refused !== undefined) io.stderr(refused);
    return refused === undefined;
  };

  let objects: Record<string, unknown>[];
  if (a.operator) {
    if (!(await checkSeedValues(defaultChartDir()))) return 2;
    // gardener-operator renders the runtime cluster's deployment (the garden ACL) with these, not with `values`.
    const secret = a['virtual-garden-kubeconfig-secret'];
    const runtimeClusterValues = secret === undefined ? values : mergeValues(values, { garden: { virtualGardenKubeconfigSecret: secret } });
    const ca = a['admission-ca-bundle'] === undefined ? undefined : await readPem(a['admission-ca-bundle']);
    if (ca !== undefined && typeof ca !== 'string') {
      io.stderr(`${ca.error}\n`);
      return 2;
    }
    const admissionFile = await readValuesFile(a['admission-values'], '--admission-values');
    if (typeof admissionFile === 'string') {
      io.stderr(`${admissionFile}\n`);
      return 2;
    }
    // The admission server runs the same image: a private registry must reach both charts.
    const admissionValues = Object.keys(image).length > 0 ? mergeValues(admissionFile, { image }) : admissionFile;
    const admissionRefused = await chartValuesProblems(path.join(path.dirname(defaultChartDir()), 'gardener-acl-admission'), admissionValues, a['admission-values'] ? `--admission-values ${a['admission-values']}` : 'the admission values');
    if (admissionRefused !== undefined) {
      io.stderr(admissionRefused);
      return 2;
    }
    objects = [
      operatorExtension({
        name: a.name,
        policy: a.policy,
        values,
        runtimeClusterValues,
        admissionValues,
        chartRef: a['chart-ref'] ?? '',
        admissionChartRef: a['admission-chart-ref'] ?? '',
        admissionNamespace: a['admission-namespace'],
        ...(ca === undefined ? {} : { admissionTls: { caBundle: ca, secretName: a['admission-tls-secret'] } }),
      }),
    ];
  } else {
    let chartArchive: Buffer;
    try {
      chartArchive = (await packChart(a.chart)).archive;
    } catch (error) {
      io.stderr(`--chart: cannot pack ${a.chart}: ${(error as Error).message}\n`);
      return 2;
    }
    if (!(await checkSeedValues(a.chart))) return 2;
    const options = { name: a.name, chartArchive, values, policy: a.policy };
    objects = [controllerRegistration(options), controllerDeployment(options)];
  }
  if (a.output === 'json') io.stdout(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)}\n`);
  else io.stdout(toYamlDocuments(objects));
  return 0;
}
