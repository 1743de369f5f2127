// One ingress gateway of a seed as Istio rendered it, served by a real Envoy on loopback: echo
// servers named like Istio's clusters, the static bootstrap of istio-bootstrap.ts, and the
// harness's Envoy process. The Istio-rendered counterpart of test/envoy/live-gateway.ts.

import { EchoUpstreams } from '../envoy/echo-upstreams.js';
import { startEnvoy, type BoundAddress, type EnvoyInstance } from '../envoy/envoy-process.js';
import { ISTIO_PROXY_RUNTIME, type GatewayListener } from '../envoy/gardener-gateway.js';
import { inlineDiscoveredFilters } from '../envoy/ecds-files.js';
import { getString } from '../envoy/json.js';
import { planStaticGateway, staticGatewayBootstrap, type StaticGatewayPlan } from './istio-bootstrap.js';
import type { IstioRenderOutput } from './istio-render.js';
import { staticSecrets } from './throwaway-certs.js';

export interface IstioGateway {
  readonly envoy: EnvoyInstance;
  readonly echo: EchoUpstreams;
  readonly plan: StaticGatewayPlan;
  /** Listener names by the port Istio rendered them on (the logical→bound map is the Envoy's). */
  readonly listenersByPort: ReadonlyMap<number, string>;
  /** Where the listener Istio rendered on `logicalPort` is bound (127.0.0.1 or ::1). */
  endpoint(logicalPort: number, family?: 4 | 6): Promise<BoundAddress>;
  /** The clusters this gateway has (an HTTP CONNECT can only tunnel to one of them). */
  readonly clusters: ReadonlySet<string>;
  /** Hands Envoy the listeners of another render of the same gateway through LDS (needs `listenersViaFile`), as istiod's push would. */
  replaceListeners(render: IstioRenderOutput): Promise<void>;
  stop(): Promise<void>;
}

/** Listener names by the port Istio rendered them on; throws on a nameless listener or two on one port. */
export function listenerNamesByPort(listeners: readonly GatewayListener[]): Map<number, string> {
  const byPort = new Map<number, string>();
  for (const listener of listeners) {
    const name = getString(listener.config, 'name');
    if (name === undefined) throw new Error(`listener on ${listener.logicalPort} has no name`);
    if (byPort.has(listener.logicalPort)) throw new Error(`two listeners on port ${listener.logicalPort}`);
    byPort.set(listener.logicalPort, name);
  }
  return byPort;
}

/** A gateway's `endpoint`: where Envoy bound the listener Istio rendered on `logicalPort`. */
export function endpointByLogicalPort(envoy: EnvoyInstance, listenersByPort: ReadonlyMap<number, string>): (logicalPort: number, family?: 4 | 6) => Promise<BoundAddress> {
  return async (logicalPort, family) => {
    const name = listenersByPort.get(logicalPort);
    if (name === undefined) throw new Error(`Istio rendered no listener on port ${logicalPort} (has ${[...listenersByPort.keys()].join(', ')})`);
    return envoy.boundAddress(name, family);
  };
}

/**
 * The listeners with each HTTP filter whose config Envoy would take over ADS (the default form's
 * ECDS buckets) replaced by the resource Istio generated for it, or by its default config where
 * Istio generated none: what Envoy runs once ECDS has delivered (or given up). A stand-in for the
 * delivery: as watched files (test/envoy/ecds-files.ts) each reference takes one of the user's 128
 * inotify instances, and the suites start several gateways of 96 references each. ECDS delivery
 * itself is tested with Istio's discovery server (ecds-live-ads, ecds-missing-resource) and with
 * files (ecds-rendered). Listeners pointed elsewhere by the caller are left as they are.
 */
export function withDiscoveredInline(render: IstioRenderOutput): IstioRenderOutput {
  return { ...render, listeners: inlineDiscoveredFilters(render.listeners, render.extensionConfigs) };
}

export async function startIstioGateway(rendered: IstioRenderOutput, options: { readonly listenersViaFile?: boolean } = {}): Promise<IstioGateway> {
  const render = withDiscoveredInline(rendered);
  const plan = planStaticGateway(render);
  const listenersByPort = listenerNamesByPort(plan.listeners);
  const echo = await EchoUpstreams.start(plan.upstreams);
  try {
    const bootstrap = staticGatewayBootstrap({
      render,
      plan,
      upstreamPorts: echo.ports(),
      secrets: await staticSecrets(plan.sdsSecretNames),
      runtime: ISTIO_PROXY_RUNTIME,
    });
    const envoy = await startEnvoy({ bootstrap, ...(options.listenersViaFile ? { listenersViaFile: true } : {}) });
    const clusters = new Set(render.clusters.map((cluster) => getString(cluster, 'name') ?? ''));
    return {
      envoy,
      echo,
      plan,
      listenersByPort,
      clusters,
      endpoint: endpointByLogicalPort(envoy, listenersByPort),
      async replaceListeners(next) {
        const result = await envoy.replaceListeners(planStaticGateway(withDiscoveredInline(next)).listeners.map((listener) => listener.config));
        if (!result.accepted) throw new Error(`Envoy rejected the listeners:\n${result.output.slice(-2_000)}`);
      },
      async stop() {
        await Promise.allSettled([envoy.stop(), echo.close()]);
      },
    };
  } catch (error) {
    await echo.close();
    throw error;
  }
}
