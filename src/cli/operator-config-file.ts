import { formatFieldErrors } from '../acl/field-errors.js';
import { parseOperatorConfig, type OperatorConfig } from '../acl/operator-config.js';
import { formatProblem } from '../gardener/problems.js';
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
