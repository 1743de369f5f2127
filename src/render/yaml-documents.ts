import { stringify } from 'yaml';

/**
 * Multi-document YAML without anchors or aliases: the generator shares sub-objects between
 * patches, and a reader (or kubectl diff) should see every object spelled out.
 */
export function toYamlDocuments(items: readonly unknown[]): string {
  return items.map((item) => stringify(item, { lineWidth: 0, aliasDuplicateObjects: false })).join('---\n');
}
