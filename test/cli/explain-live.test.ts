// `gardener-acl explain --kubeconfig`: the example seed's objects stored in a real kube-apiserver
// give exactly the verdicts and reasons the file mode gives (the file mode is compared with the
// real Envoy in test/envoy/explain-vs-envoy.test.ts), for every shoot and several clients.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainCommand } from '../../src/cli/explain-command.js';
import { loadDocuments } from '../../src/cli/load-documents.js';
import { EMBEDDED_EXAMPLE } from '../../src/cli/render-command.js';
import { createObject, deleteObject, patchStatus, type ObjectToWrite } from '../../src/kube/objects-client.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { startWithObjects } from '../kube/kube-test-helpers.js';

const OPERATOR_CONFIG = path.join(EMBEDDED_EXAMPLE, '00-operator.yaml');
const SHOOTS = ['shoot--ci--runner', 'shoot--team--prod', 'shoot--team--prod-eu', 'shoot--web--shop', 'shoot-legacy--old'];
const CLIENTS = ['203.0.113.9', '100.64.1.1', '::ffff:198.51.100.8', '2001:db8:ffff::1', '10.250.1.1'];

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await explainCommand(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

describe('gardener-acl explain on a live seed (real kube-apiserver)', () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    const { objects } = await loadDocuments([EMBEDDED_EXAMPLE]);
    // The example leaves out what the API server requires and the extension never reads.
    const complete = (o: ObjectToWrite): ObjectToWrite => {
      const spec = (o['spec'] ?? {}) as Record<string, unknown>;
      if (o.kind === 'Deployment') {
        const template = spec['template'] as { metadata: unknown };
        return { ...o, spec: { ...spec, template: { ...template, spec: { containers: [{ name: 'istio-proxy', image: 'istio/proxyv2' }] } } } };
      }
      if (o.kind === 'Service') return { ...o, spec: { type: 'LoadBalancer', ...spec, ports: [{ name: 'tls', port: 443, targetPort: 9443 }] } };
      if (o.kind === 'Cluster') return { ...o, spec: { cloudProfile: {}, ...spec } };
      if (o.kind === 'Infrastructure') return { ...o, spec: { type: 'local', region: 'r', ...spec } };
      return o;
    };
    // Status (egress CIDRs, load balancer ipMode) is written through its subresource, as its owners do.
    cp = await startWithObjects(objects.map((o) => complete(o.object as ObjectToWrite)).filter((o) => o.kind !== 'OperatorConfiguration'));
  }, 120_000);

  afterAll(async () => {
    await cp?.stop();
  });

  it('gives the file mode’s verdicts and reasons for every shoot and client', async () => {
    let refusals = 0;
    for (const shoot of SHOOTS) {
      for (const client of CLIENTS) {
        const files = await run(['--shoot', shoot, '--client', client, '--output', 'json']);
        const live = await run(['--shoot', shoot, '--client', client, '--output', 'json', '--kubeconfig', cp.kubeconfigPath, '--config', OPERATOR_CONFIG]);
        expect(live.err).toBe('');
        expect({ code: live.code, out: JSON.parse(live.out) as unknown }).toEqual({ code: files.code, out: JSON.parse(files.out) as unknown });
        if (live.code === 1) refusals++;
      }
    }
    expect(refusals).toBeGreaterThan(5);
  });

  it('explains the ACL the controller applied (status.state), which Envoy enforces, and says when the written providerConfig differs', async () => {
    const ext = { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', name: 'acl', namespace: 'shoot--team--prod' };
    await patchStatus(cp.kubeConfig, ext, {
      state: { gatewayNamespaces: ['istio-ingress'], applied: { rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['192.0.2.128/25', '2001:db8:100::/48'], mode: 'enforce' }, alwaysAllowed: [], legacyProxyAllowed: [] } },
    });
    try {
      const live = (client: string) => run(['--shoot', 'shoot--team--prod', '--client', client, '--path', 'api', '--kubeconfig', cp.kubeconfigPath, '--config', OPERATOR_CONFIG]);
      const applied = await live('192.0.2.200');
      expect(applied.code).toBe(0);
      expect(applied.err).toBe(
        "note: shoot--team--prod: the Extension's providerConfig is not what the controller applied (a change pending or refused); explaining the applied ACL, ALLOW remote_ip [192.0.2.128/25, 2001:db8:100::/48], which is what the gateways enforce\n",
      );
      // The written range is not in force yet: refused.
      expect((await live('203.0.113.9')).code).toBe(1);
    } finally {
      await patchStatus(cp.kubeConfig, ext, { state: null });
    }
  });

  it('reads the operator settings from the controller’s ConfigMap on the seed, and takes Shoot manifests as PATHs', async () => {
    // 192.0.2.0/28 is admitted only by the example's additionalAllowedCIDRs.
    const live = (...extra: string[]) => run(['--shoot', 'shoot--team--prod', '--client', '192.0.2.3', '--path', 'api', '--kubeconfig', cp.kubeconfigPath, ...extra]);
    const without = await live();
    expect(without.code).toBe(1);
    expect(without.err).toBe(
      'note: no ConfigMap gardener-acl-config on the seed (is the extension installed?); using the default operator settings; give the controller\'s configuration with --config\n',
    );
    // Gardener installs the chart into a namespace of its choosing; any namespace is found.
    const configMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gardener-acl-config', namespace: 'istio-ingress' }, data: { 'config.yaml': await readFile(OPERATOR_CONFIG, 'utf8') } };
    await createObject(cp.kubeConfig, configMap);
    try {
      const found = await live();
      expect(found.err).toBe('');
      expect({ code: found.code, out: found.out }).toEqual({ code: 0, out: (await live('--config', OPERATOR_CONFIG)).out });
      // PATHs with --kubeconfig: only Shoot manifests, whose ACL replaces the seed's for that shoot.
      const dir = await mkdtemp(path.join(tmpdir(), 'acl-live-manifest-'));
      const manifest = path.join(dir, 'shoot.yaml');
      await writeFile(manifest, 'apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\nmetadata: {name: prod, namespace: garden-team}\nspec:\n  extensions:\n  - {type: acl, providerConfig: {rule: {action: DENY, type: remote_ip, cidrs: [192.0.2.0/24]}}}\n');
      const narrowed = await run(['--client', '203.0.113.9', '--path', 'api', '--kubeconfig', cp.kubeconfigPath, manifest]);
      expect(narrowed.code).toBe(0);
      expect(narrowed.out).toMatch(/^shoot--team--prod: DENY remote_ip \[192\.0\.2\.0\/24\]\n/);
      const seedFile = await run(['--client', '203.0.113.9', '--kubeconfig', cp.kubeconfigPath, manifest, path.join(EMBEDDED_EXAMPLE, '01-gateways.yaml')]);
      expect(seedFile.code).toBe(2);
      expect(seedFile.err).toContain('with --kubeconfig the seed\'s objects come from the seed; PATH may only hold Shoot manifests, not ');
    } finally {
      await deleteObject(cp.kubeConfig, { apiVersion: 'v1', kind: 'ConfigMap', name: 'gardener-acl-config', namespace: 'istio-ingress' });
    }
  });

  it('an unreachable seed is a clear error, not a crash', async () => {
    const result = await run(['--shoot', 'shoot--team--prod', '--client', '10.0.0.1', '--kubeconfig', path.join(EMBEDDED_EXAMPLE, 'no-such-kubeconfig')]);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/^gardener-acl explain: cannot read the seed: /);
  });
});
