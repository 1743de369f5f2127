// Composition used by the real-Envoy suites: echo upstreams for every shoot cluster, a Gardener
// gateway of one era, EnvoyFilters placed the way Istio would (approximately), one Envoy serving it.

import { EchoUpstreams } from './echo-upstreams.js';
import type { EnvoyVersion } from './envoy-binary.js';
import { startEnvoy, type BoundAddress, type EnvoyInstance, type ListenerUpdateResult } from './envoy-process.js';
import {
  buildGardenerGateway,
  gatewayBootstrap,
  gatewayUpstreams,
  listenerConfigs,
  type GardenerGatewaySpec,
  type GatewayModel,
} from './gardener-gateway.js';
import { inlineDiscoveredFilters } from './ecds-files.js';
import { approximateIstioPlacement, type PlacementResult } from './istio-placement-approximation.js';

export interface LiveGatewayOptions extends GardenerGatewaySpec {
  /** EnvoyFilter objects (JSON) applied to the gateway before Envoy starts. */
  envoyFilters?: readonly unknown[];
  /** Serve listeners via file-based LDS so `applyEnvoyFilters` can change them without a restart. */
  listenersViaFile?: boolean;
  logLevel?: 'trace' | 'debug' | 'info' | 'warning' | 'error';
  /** Which installed Envoy serves it (default: the version under test). */
  envoyVersion?: EnvoyVersion;
}

export interface LiveGateway {
  readonly envoy: EnvoyInstance;
  readonly echo: EchoUpstreams;
  /** The gateway without any EnvoyFilter applied. */
  readonly baseGateway: GatewayModel;
  /** The placement currently served by Envoy. */
  readonly placement: PlacementResult;
  /** Where the listener standing for Gardener port `logicalPort` is bound. */
  endpoint(logicalPort: number, family?: 4 | 6): Promise<BoundAddress>;
  /** Re-place `envoyFilters` on the base gateway and hand the listeners to Envoy (needs `listenersViaFile`). */
  applyEnvoyFilters(envoyFilters: readonly unknown[]): Promise<ListenerUpdateResult>;
  stop(): Promise<void>;
}

class RunningGateway implements LiveGateway {
  constructor(
    readonly envoy: EnvoyInstance,
    readonly echo: EchoUpstreams,
    readonly baseGateway: GatewayModel,
    public placement: PlacementResult,
  ) {}

  async endpoint(logicalPort: number, family?: 4 | 6): Promise<BoundAddress> {
    const listeners = this.placement.gateway.listeners.filter((listener) => listener.logicalPort === logicalPort);
    const [listener, ...others] = listeners;
    if (listener === undefined || others.length > 0) {
      throw new Error(`expected exactly one listener for Gardener port ${logicalPort}, found ${listeners.length}`);
    }
    const name = listener.config['name'];
    if (typeof name !== 'string') throw new Error(`listener for port ${logicalPort} has no name`);
    return this.envoy.boundAddress(name, family);
  }

  async applyEnvoyFilters(envoyFilters: readonly unknown[]): Promise<ListenerUpdateResult> {
    const placement = servedPlacement(this.baseGateway, envoyFilters);
    const result = await this.envoy.replaceListeners(listenerConfigs(placement.gateway));
    if (result.accepted) this.placement = placement;
    return result;
  }

  async stop(): Promise<void> {
    await Promise.allSettled([this.envoy.stop(), this.echo.close()]);
  }
}

/**
 * The placement with every filter Envoy would take over ECDS (the default form's buckets) in place
 * of its reference: what a gateway runs once istiod's ECDS push has arrived. ECDS delivery itself
 * is tested with Istio's discovery server (test/istio/ecds-*.test.ts).
 */
function servedPlacement(baseGateway: GatewayModel, envoyFilters: readonly unknown[]): PlacementResult {
  const placement = approximateIstioPlacement(baseGateway, envoyFilters);
  const listeners = placement.gateway.listeners.map((listener) => ({ ...listener, config: inlineDiscoveredFilters(listener.config, placement.extensionConfigs) }));
  return { ...placement, gateway: { ...placement.gateway, listeners } };
}

export async function startLiveGateway(options: LiveGatewayOptions): Promise<LiveGateway> {
  const echo = await EchoUpstreams.start(gatewayUpstreams(options));
  try {
    const baseGateway = buildGardenerGateway(options, echo.ports());
    const placement = servedPlacement(baseGateway, options.envoyFilters ?? []);
    const envoy = await startEnvoy({
      bootstrap: gatewayBootstrap(placement.gateway),
      listenersViaFile: options.listenersViaFile,
      logLevel: options.logLevel,
      envoyVersion: options.envoyVersion,
    });
    return new RunningGateway(envoy, echo, baseGateway, placement);
  } catch (error) {
    await echo.close();
    throw error;
  }
}
