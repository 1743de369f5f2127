// A seed of N ACL shoots x C CIDRs as Gardener writes its objects (Cluster, Extension of type acl,
// Infrastructure, the shoot's kube-apiserver Gateway) on up to three ingress gateways, for the
// render bench, the memory figures of `render` as a command (bench/generate-seed.ts writes it as a
// directory) and the render tests.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'yaml';
import type { SourcedObject } from '../../src/gardener/inventory.js';

export const GENERATED_GATEWAYS = ['istio-ingress', 'istio-ingress--z1', 'istio-ingress--z2'];

export interface GeneratedSeedOptions {
  /** How many of GENERATED_GATEWAYS the shoots spread over (round robin); 3 unless given. */
  readonly gateways?: number;
  /** Written as the seed's OperatorConfiguration; none (the defaults) unless given. */
  readonly operator?: Readonly<Record<string, unknown>>;
}

const selector = (gatewayIndex: number) => ({ app: 'istio-ingressgateway', istio: gatewayIndex === 0 ? 'ingressgateway' : `ingressgateway--zone--z${gatewayIndex}` });

function seedWideObjects(options: GeneratedSeedOptions): unknown[] {
  const gateways = GENERATED_GATEWAYS.slice(0, options.gateways ?? GENERATED_GATEWAYS.length).map((ns, i) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'istio-ingressgateway', namespace: ns },
    spec: { selector: { matchLabels: selector(i) } },
  }));
  return options.operator ? [{ apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'OperatorConfiguration', ...options.operator }, ...gateways] : gateways;
}

/** Shoot i's objects: four in five of its ranges IPv4 /24s, one in five an IPv6 /64; one in seven shoots DENY. */
export function generatedShootObjects(i: number, cidrCount: number, options: GeneratedSeedOptions = {}): unknown[] {
  const id = `shoot--project${i % 300}--shoot${i}`;
  const cidrs = Array.from({ length: cidrCount }, (_, j) => (j % 5 === 4 ? `2001:db8:${i % 65536}:${j}::/64` : `${11 + (j % 200)}.${i % 256}.${(i >> 8) % 256}.0/24`));
  const gatewayIndex = i % (options.gateways ?? GENERATED_GATEWAYS.length);
  return [
    {
      apiVersion: 'extensions.gardener.cloud/v1alpha1',
      kind: 'Cluster',
      metadata: { name: id },
      spec: {
        seed: { spec: { networks: { nodes: '10.250.0.0/16', pods: '10.96.0.0/11' } } },
        shoot: { metadata: { name: `shoot${i}` }, spec: { networking: { nodes: '10.180.0.0/16' }, provider: { workers: [{ name: 'w' }] } }, status: { technicalID: id } },
      },
    },
    { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Extension', metadata: { name: 'acl', namespace: id }, spec: { type: 'acl', providerConfig: { rule: { action: i % 7 ? 'ALLOW' : 'DENY', type: 'remote_ip', cidrs } } } },
    { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure', metadata: { name: `shoot${i}`, namespace: id }, status: { egressCIDRs: [`198.51.${i % 256}.1/32`] } },
    {
      apiVersion: 'networking.istio.io/v1beta1',
      kind: 'Gateway',
      metadata: { name: 'kube-apiserver', namespace: id },
      spec: {
        selector: selector(gatewayIndex),
        servers: [{ hosts: [`api.${id}.internal.example.com`, `api.${id}.example.com`], port: { number: 443, name: 'tls', protocol: 'TLS' }, tls: { mode: 'PASSTHROUGH' } }],
      },
    },
  ];
}

/** The whole seed in memory, as `render` has it after reading the files. */
export function generatedSeedObjects(shoots: number, cidrs: number, options: GeneratedSeedOptions = {}): SourcedObject[] {
  const objects = seedWideObjects(options);
  for (let i = 0; i < shoots; i++) objects.push(...generatedShootObjects(i, cidrs, options));
  return objects.map((object, i) => ({ object, source: `generated #${i}` }));
}

/** The seed as a directory of YAML files: one per shoot (as examples/seed), one for the gateways (and operator configuration). */
export async function writeGeneratedSeed(dir: string, shoots: number, cidrs: number, options: GeneratedSeedOptions = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  const yaml = (objects: unknown[]) => objects.map((o) => stringify(o)).join('---\n');
  await writeFile(path.join(dir, '00-seed.yaml'), yaml(seedWideObjects(options)));
  for (let i = 0; i < shoots; i++) await writeFile(path.join(dir, `shoot-${String(i).padStart(6, '0')}.yaml`), yaml(generatedShootObjects(i, cidrs, options)));
}
