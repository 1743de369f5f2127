// A Shoot manifest (core.gardener.cloud) as its owner writes it in the garden: the technical ID
// Gardener gives it on the seed, its node range and its acl extension. Offline commands read it
// so an owner can check a change before applying it.
import { z } from 'zod';
import { parseTechnicalID } from '../acl/shoot-identity.js';
import { EXTENSION_TYPE } from './seed-acl.js';

const shootManifestSchema = z.looseObject({
  kind: z.literal('Shoot'),
  metadata: z.looseObject({ name: z.string().min(1), namespace: z.string().optional() }),
  spec: z
    .looseObject({
      networking: z.looseObject({ nodes: z.string().nullish() }).nullish(),
      extensions: z.array(z.looseObject({ type: z.string(), providerConfig: z.unknown().optional(), disabled: z.boolean().nullish() })).nullish(),
    })
    .optional(),
  status: z.looseObject({ technicalID: z.string().optional() }).nullish(),
});

export interface ShootManifest {
  /** `Shoot namespace/name`. */
  readonly ref: string;
  readonly technicalID: string;
  readonly nodes: string | undefined;
  /** The enabled acl entry's providerConfig (the first one: the Shoot webhook refuses a second only by its own rules). */
  readonly providerConfig: unknown;
  readonly hasAcl: boolean;
}

/** The entry of spec.extensions that is the shoot's ACL: type acl, not disabled. */
export function isEnabledAclEntry(entry: { readonly type: string; readonly disabled?: boolean | null | undefined }): boolean {
  return entry.type === EXTENSION_TYPE && entry.disabled !== true;
}

export function isShootManifest(object: unknown): boolean {
  return typeof object === 'object' && object !== null && (object as { kind?: unknown }).kind === 'Shoot';
}

/**
 * The seed-side identity of a Shoot manifest. Gardener names the control-plane namespace
 * `shoot--<project>--<name>`, the project being the one whose namespace is `garden-<project>`
 * (`garden` for the project garden); a Shoot in any other namespace needs its status or --shoot.
 */
export function readShootManifest(object: unknown): { readonly manifest: ShootManifest } | { readonly error: string } {
  const parsed = shootManifestSchema.safeParse(object);
  if (!parsed.success) return { error: `not a Shoot manifest: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(object)'}: ${i.message}`).join('; ')}` };
  const { metadata, spec, status } = parsed.data;
  const ref = `Shoot ${metadata.namespace ? `${metadata.namespace}/` : ''}${metadata.name}`;
  const namespace = metadata.namespace ?? '';
  const project = namespace === 'garden' ? 'garden' : namespace.startsWith('garden-') ? namespace.slice('garden-'.length) : undefined;
  const technicalID = status?.technicalID ?? (project === undefined ? undefined : `shoot--${project}--${metadata.name}`);
  if (technicalID === undefined) {
    return { error: `${ref}: cannot tell its technical ID: the namespace ${JSON.stringify(namespace)} is not garden-<project> and status.technicalID is not set; give --shoot shoot--<project>--${metadata.name}` };
  }
  if (!parseTechnicalID(technicalID)) return { error: `${ref}: ${JSON.stringify(technicalID)} is not a technical ID (shoot--<project>--<name>)` };
  const acl = (spec?.extensions ?? []).find(isEnabledAclEntry);
  return { manifest: { ref, technicalID, nodes: spec?.networking?.nodes ?? undefined, providerConfig: acl?.providerConfig, hasAcl: acl !== undefined } };
}
