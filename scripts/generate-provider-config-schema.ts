// Writes schemas/acl-provider-config.schema.json from the zod input schema of providerConfig.
// test/acl/provider-config-json-schema.test.ts fails while the committed file differs from this output.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROVIDER_CONFIG_SCHEMA_FILE, providerConfigJsonSchemaText } from '../src/acl/provider-config-input-schema.js';

const target = fileURLToPath(new URL(`../${PROVIDER_CONFIG_SCHEMA_FILE}`, import.meta.url));
mkdirSync(dirname(target), { recursive: true });
writeFileSync(target, providerConfigJsonSchemaText());
console.log(`wrote ${PROVIDER_CONFIG_SCHEMA_FILE}`);
