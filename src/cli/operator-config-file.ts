import { formatFieldErrors } from '../acl/field-errors.js';
import { parseOperatorConfig, type OperatorConfig } from '../config/operator-config.js';
import type { SourcedObject } from '../gardener/inventory.js';
import { formatProblem, type Problem } from '../gardener/problems.js';
import { loadDocuments } from './load-documents.js';

/** The OperatorConfiguration in `file` (defaults without one), or an error naming file and field. */
export async function loadOperatorConfigFile(file: string | undefined): Promise<{ config: OperatorConfig } | { error: string }> {
  if (!file) {
    const defaults = parseOperatorConfig(undefined);
    return defaults.ok ? { config: defaults.config } : { error: formatFieldErrors(defaults.errors) };
  }
  const { objects, problems } = await loadDocuments([file]);
  if (problems.length > 0) return { error: problems.map(formatProblem).join('\n') };
  const docs = objects.filter((o) => (o.object as { kind?: unknown }).kind === 'OperatorConfiguration');
  if (docs.length !== 1) return { error: `${file}: expected exactly one OperatorConfiguration document, found ${docs.length}` };
  const parsed = parseOperatorConfig(docs[0]?.object);
  return parsed.ok ? { config: parsed.config } : { error: `${file}: ${formatFieldErrors(parsed.errors)}` };
}

const isOperatorConfig = (o: { readonly object: unknown }): boolean => (o.object as { kind?: unknown } | null)?.kind === 'OperatorConfiguration';

/** The one OperatorConfiguration among a seed's objects (undefined: none), or what is wrong with them. */
export function operatorConfigAmong(objects: readonly SourcedObject[]): { readonly config: OperatorConfig | undefined } | { readonly problem: Problem } {
  const configs = objects.filter(isOperatorConfig);
  const object = configs.map((c) => c.source).join(', ');
  if (configs.length > 1) return { problem: { severity: 'error', object, message: 'more than one OperatorConfiguration; give exactly one, or --config' } };
  if (configs.length === 0) return { config: undefined };
  const parsed = parseOperatorConfig(configs[0]?.object);
  return parsed.ok ? { config: parsed.config } : { problem: { severity: 'error', object, message: formatFieldErrors(parsed.errors) } };
}
