// The controller computes each shoot's ACL from a part of the seed (its namespace, the observability
// gateway's, the Cluster named like it and the seed-wide kinds) instead of the whole seed, so a
// reconcile costs the same on a seed of 10 shoots as of 5,000. This checks that the part yields
// exactly what the whole seed does, for every shoot of the embedded example (a legacy
// `shoot-<project>--<name>` ID and the observability gateway in `garden` among them).
import { describe, expect, it } from 'vitest';
import { defaultOperatorConfig } from '../../src/config/operator-config.js';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { classifyObjects } from '../../src/gardener/inventory.js';
import { EXTENSION_TYPE, seedContext, shootAclFromInventory, shootInventoryNamespaces, type SeedInventory } from '../../src/gardener/seed-acl.js';

/** What AclController.inventory(namespace) takes from its caches, taken from a whole inventory. */
function shootPart(seed: SeedInventory, namespace: string): SeedInventory {
  const namespaces = shootInventoryNamespaces(namespace);
  const inNamespaces = <T extends { metadata: { namespace?: string | undefined } }>(items: readonly T[]) => items.filter((i) => namespaces.includes(i.metadata.namespace ?? ''));
  return {
    extensions: [],
    clusters: seed.clusters.filter((c) => c.metadata.name === namespace),
    infrastructures: inNamespaces(seed.infrastructures),
    dnsRecords: seed.dnsRecords.filter((r) => r.metadata.namespace === namespace),
    gateways: inNamespaces(seed.gateways),
    deployments: seed.deployments,
    services: seed.services,
    configMaps: seed.configMaps,
  };
}

describe('one shoot’s part of the seed inventory', () => {
  it('computes every shoot’s ACL, problems and seed context exactly as the whole seed does', async () => {
    const { objects } = await loadDocuments([EMBEDDED_EXAMPLE]);
    const { inventory } = classifyObjects(objects);
    const operator = defaultOperatorConfig();
    const extensions = inventory.extensions.filter((e) => e.spec.type === EXTENSION_TYPE);
    const namespaces = extensions.map((e) => e.metadata.namespace);
    expect(namespaces.some((ns) => /^shoot-[^-]/.test(ns))).toBe(true);
    expect(seedContext(inventory, operator).observabilityWildcards.length).toBeGreaterThan(0);
    for (const extension of extensions) {
      const whole = seedContext(inventory, operator);
      const part = seedContext(shootPart(inventory, extension.metadata.namespace), operator);
      const view = (ctx: typeof whole) => ({ problems: ctx.problems, gateways: ctx.gateways, wildcards: ctx.observabilityWildcards, seedWide: ctx.seedWideAllowed, ok: ctx.seedInputsOk });
      expect(view(part), extension.metadata.namespace).toEqual(view(whole));
      expect(shootAclFromInventory(extension, part), extension.metadata.namespace).toEqual(shootAclFromInventory(extension, whole));
    }
    expect(extensions.length).toBeGreaterThan(2);
  });
});
