// Every file rendered from code: the providerConfig JSON Schema, the charts' config schemas and
// the operators' configuration reference (from zod), and the command line's usage texts in the
// operators' docs (from the flag tables). scripts/generate.ts writes them; the same script with
// --check (CI's lint step) and test/scripts/generated-files.test.ts fail while one differs.
import { PROVIDER_CONFIG_SCHEMA_FILE, providerConfigJsonSchemaText } from '../src/acl/provider-config-input-schema.js';
import { COMMANDS, commandUsage } from '../src/cli/usage-texts.js';
import {
  ADMISSION_CHART_CONFIG,
  CONFIG_REFERENCE_FILE,
  CONFIG_REFERENCE_SECTION,
  SEED_CHART_CONFIG,
  chartValuesSchemaText,
  configReferenceMarkdown,
  replaceGeneratedSection,
} from '../src/config/generated-files.js';

export { GENERATE_COMMAND } from '../src/config/generated-files.js';

export const COMMAND_LINE_FILE = 'docs/operators/command-line.md';

export interface GeneratedFile {
  /** From the repository's root. */
  readonly file: string;
  /** The file's content given what is committed (a generated section keeps the text around it). */
  readonly render: (current: string) => Promise<string>;
}

/** Each command's `--help` in the operators' command-line doc, between its markers. */
async function commandLineDoc(current: string): Promise<string> {
  let text = current;
  for (const { name } of COMMANDS) {
    const usage = await commandUsage(name);
    if (usage === undefined) continue;
    text = replaceGeneratedSection(text, `usage of ${name}`, `\`\`\`text\n${usage}\n\`\`\`\n`, COMMAND_LINE_FILE);
  }
  return text;
}

export const GENERATED_FILES: readonly GeneratedFile[] = [
  { file: PROVIDER_CONFIG_SCHEMA_FILE, render: async () => providerConfigJsonSchemaText() },
  { file: `${SEED_CHART_CONFIG.chart}/values.schema.json`, render: async (current) => chartValuesSchemaText(current, SEED_CHART_CONFIG) },
  { file: `${ADMISSION_CHART_CONFIG.chart}/values.schema.json`, render: async (current) => chartValuesSchemaText(current, ADMISSION_CHART_CONFIG) },
  { file: CONFIG_REFERENCE_FILE, render: async (current) => replaceGeneratedSection(current, CONFIG_REFERENCE_SECTION, configReferenceMarkdown(), CONFIG_REFERENCE_FILE) },
  { file: COMMAND_LINE_FILE, render: commandLineDoc },
];
