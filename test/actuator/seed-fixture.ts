// Seed objects as Gardener and Istio would have them on a real seed, created in the test API server.
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { defaultOperatorConfig, type OperatorConfig } from '../../src/config/operator-config.js';
import { AclController, type ControllerOptions } from '../../src/actuator/controller.js';
import type { GatewayPod } from '../../src/served/gateway-admin.js';
import { CONTROLLER_DEFAULTS } from '../../src/actuator/controller-defaults.js';
import { durationMs } from '../../src/cli/duration.js';
import { KubeClusterClient } from '../../src/actuator/kube-cluster-client.js';
import { createObject, patchStatus, type ObjectToWrite } from '../../src/kube/objects-client.js';
import { testLogger } from '../kube/kube-test-helpers.js';

export interface GatewayFixture {
  readonly namespace: string;
  readonly istioLabel: string;
}

export const DEFAULT_GW: GatewayFixture = { namespace: 'istio-ingress', istioLabel: 'ingressgateway' };
export const ZONAL_GW: GatewayFixture = { namespace: 'istio-ingress--z1', istioLabel: 'ingressgateway--zone--z1' };

export interface ShootFixture {
  readonly project: string;
  readonly name: string;
  /** providerConfig; omitted: no Extension (a shoot without ACL). */
  readonly providerConfig?: unknown;
  readonly gateway?: GatewayFixture;
  readonly egressCIDRs?: readonly string[];
}

export const technicalID = (s: ShootFixture): string => `shoot--${s.project}--${s.name}`;

const selector = (g: GatewayFixture): Record<string, string> => ({ app: 'istio-ingressgateway', istio: g.istioLabel });

export function gatewayObjects(g: GatewayFixture): ObjectToWrite[] {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: g.namespace } },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'istio-ingressgateway', namespace: g.namespace, labels: selector(g) },
      spec: {
        selector: { matchLabels: selector(g) },
        template: { metadata: { labels: { ...selector(g), 'istio-role': 'seed' } }, spec: { containers: [{ name: 'istio-proxy', image: 'istio/proxyv2' }] } },
      },
    },
  ];
}

export function shootObjects(s: ShootFixture): ObjectToWrite[] {
  const id = technicalID(s);
  const gw = s.gateway ?? DEFAULT_GW;
  const objects: ObjectToWrite[] = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: id } },
    {
      apiVersion: 'extensions.gardener.cloud/v1alpha1',
      kind: 'Cluster',
      metadata: { name: id },
      spec: {
        cloudProfile: {},
        seed: { metadata: { name: 'seed' }, spec: { networks: { nodes: '10.250.0.0/16', pods: '10.96.0.0/11' }, ingress: { domain: 'ingress.seed.example.com' } } },
        shoot: {
          metadata: { name: s.name, namespace: `garden-${s.project}` },
          spec: { networking: { nodes: '10.180.0.0/16' }, provider: { workers: [{ name: 'pool' }] } },
          status: { technicalID: id },
        },
      },
    },
    { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure', metadata: { name: s.name, namespace: id }, spec: { type: 'local', region: 'r' } },
    {
      apiVersion: 'networking.istio.io/v1beta1',
      kind: 'Gateway',
      metadata: { name: 'kube-apiserver', namespace: id },
      spec: { selector: selector(gw), servers: [{ hosts: [`api.${s.name}.${s.project}.internal.example.com`], port: { number: 443, name: 'tls', protocol: 'TLS' }, tls: { mode: 'PASSTHROUGH' } }] },
    },
  ];
  if (s.providerConfig !== undefined) objects.push(aclExtension(id, s.providerConfig));
  return objects;
}

export function aclExtension(namespace: string, providerConfig: unknown): ObjectToWrite {
  return {
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Extension',
    // gardenlet creates Extensions with the reconcile annotation.
    metadata: { name: 'acl', namespace, annotations: { 'gardener.cloud/operation': 'reconcile' } },
    spec: { type: 'acl', providerConfig },
  };
}

/** Creates objects in order, then sets Infrastructure status (a subresource, so not set by create). */
export async function createSeed(kc: KubeConfig, gateways: readonly GatewayFixture[], shoots: readonly ShootFixture[]): Promise<void> {
  for (const obj of gateways.flatMap(gatewayObjects)) await createObject(kc, obj, { ignoreAlreadyExists: true });
  for (const shoot of shoots) {
    for (const obj of shootObjects(shoot)) await createObject(kc, obj, { ignoreAlreadyExists: true });
    await patchStatus(
      kc,
      { apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'Infrastructure', name: shoot.name, namespace: technicalID(shoot) },
      { egressCIDRs: [...(shoot.egressCIDRs ?? ['198.51.100.1/32'])] },
    );
  }
}

export const allowRule = (...cidrs: string[]) => ({ rule: { action: 'ALLOW', type: 'remote_ip', cidrs } });
export const denyRule = (...cidrs: string[]) => ({ rule: { action: 'DENY', type: 'remote_ip', cidrs } });

/**
 * The controller as the chart ships it (the command's defaults: workers, resync period, the least
 * interval between listener changes), in-process with caches started and workers running. A test
 * that needs another value says why where it passes it.
 */
export async function startTestController(
  kubeConfig: KubeConfig,
  options: {
    operator?: OperatorConfig;
    client?: KubeClusterClient;
    watchIdleTimeoutMs?: number;
    combinedMinIntervalMs?: number;
    retryBackoff?: ControllerOptions['retryBackoff'];
    registry?: Registry;
    /** The served check reads gateway pods through the API server's port-forward unless this is given. */
    readDump?: (pod: GatewayPod, signal: AbortSignal, maxBytes: number) => Promise<unknown>;
  } = {},
): Promise<AclController> {
  const controller = new AclController({
    kubeConfig,
    client: options.client ?? new KubeClusterClient(kubeConfig),
    operator: options.operator ?? defaultOperatorConfig(),
    logger: testLogger(),
    registry: options.registry ?? new Registry(),
    workers: CONTROLLER_DEFAULTS.workers,
    resyncPeriodMs: durationMs.parse(CONTROLLER_DEFAULTS.resyncPeriod),
    combinedMinIntervalMs: options.combinedMinIntervalMs ?? durationMs.parse(CONTROLLER_DEFAULTS.combinedMinInterval),
    servedCheck: { intervalMs: durationMs.parse(CONTROLLER_DEFAULTS.servedCheckInterval), ...(options.readDump ? { readDump: options.readDump } : {}) },
    ...(options.watchIdleTimeoutMs ? { watchIdleTimeoutMs: options.watchIdleTimeoutMs } : {}),
    ...(options.retryBackoff ? { retryBackoff: options.retryBackoff } : {}),
  });
  await controller.startCaches();
  controller.startWorkers();
  return controller;
}
