// Probing the virtual garden's ingress gateway as Istio rendered it, served by a real Envoy: the
// clients of the garden suites with their hand-written verdicts, and whether a client got through
// to the virtual garden's kube-apiserver on a host (TLS passthrough or Istio TLS termination).
import { encodeProxyV2Header, probeTls } from '../envoy/clients.js';
import type { JsonObject } from '../envoy/json.js';
import { GARDEN_GATEWAY_LABELS, GARDEN_GATEWAY_NAMESPACE, KUBE_APISERVER_CLUSTER, WILDCARD_HOST, virtualGardenRuntimeObjects, type GardenExposure } from './garden-fixture.js';
import { probeHttps } from './https-probe.js';
import { startIstioGateway, type IstioGateway } from './istio-rendered-gateway.js';
import { renderGatewayWithIstio } from './istio-render.js';

export interface GardenClient {
  readonly label: string;
  readonly proxySource?: string;
  readonly proxyFamily?: 'TCP6';
  readonly localAddress?: string;
  readonly listenerFamily: 4 | 6;
  readonly admitted: boolean;
}

export const CLIENTS: readonly GardenClient[] = [
  { label: 'rule range, IPv4', proxySource: '203.0.113.9', listenerFamily: 4, admitted: true },
  { label: 'rule range, IPv4-mapped', proxySource: '203.0.113.9', proxyFamily: 'TCP6', listenerFamily: 4, admitted: true },
  { label: 'rule range, IPv6', proxySource: '2001:db8:a::5', listenerFamily: 4, admitted: true },
  { label: 'runtime node, IPv4', proxySource: '10.1.2.3', listenerFamily: 4, admitted: true },
  { label: 'runtime node, IPv6', proxySource: 'fd00:10:1::7', listenerFamily: 4, admitted: true },
  { label: 'runtime pod (gardener-controller-manager through the internal gateway)', proxySource: '100.100.0.5', listenerFamily: 4, admitted: true },
  { label: 'ManagedSeed seed-eu egress', proxySource: '198.51.100.20', listenerFamily: 4, admitted: true },
  { label: 'ManagedSeed seed-us egress, IPv4-mapped', proxySource: '192.0.2.200', proxyFamily: 'TCP6', listenerFamily: 4, admitted: true },
  { label: 'ManagedSeed seed-us egress, IPv6', proxySource: '2001:db8:5eed::1', listenerFamily: 4, admitted: true },
  { label: 'outsider IPv4', proxySource: '100.64.1.1', listenerFamily: 4, admitted: false },
  { label: 'outsider IPv4-mapped', proxySource: '100.64.1.1', proxyFamily: 'TCP6', listenerFamily: 4, admitted: false },
  { label: 'outsider IPv6', proxySource: '2001:db8:ffff::1', listenerFamily: 4, admitted: false },
  { label: 'next to seed-eu’s egress', proxySource: '198.51.100.21', listenerFamily: 4, admitted: false },
  { label: 'loopback peer 127.0.0.9, no PROXY header', localAddress: '127.0.0.9', listenerFamily: 4, admitted: false },
  { label: 'IPv6 loopback peer ::1, no PROXY header', listenerFamily: 6, admitted: false },
];

export function proxyHeaderOf(c: GardenClient): Buffer | undefined {
  if (c.proxySource === undefined) return undefined;
  const destination = { address: c.proxySource.includes(':') ? '2001:db8::1' : '192.0.2.1', port: 443 };
  return encodeProxyV2Header({ source: { address: c.proxySource, port: 40_000 }, destination, family: c.proxyFamily });
}

/** The garden's ingress gateway rendered by Istio from gardener-operator's objects and `ours`, served by a real Envoy. */
export async function gateway(exposure: GardenExposure, ours: readonly JsonObject[]): Promise<IstioGateway> {
  const render = await renderGatewayWithIstio([...virtualGardenRuntimeObjects(exposure), ...ours], { namespace: GARDEN_GATEWAY_NAMESPACE, labels: { ...GARDEN_GATEWAY_LABELS } });
  return startIstioGateway(render);
}

let marker = 0;

/** Whether `client` got through to the virtual garden's kube-apiserver on `host`. */
export async function reaches(gw: IstioGateway, exposure: GardenExposure, host: string, client: GardenClient): Promise<boolean> {
  const target = { ...(await gw.endpoint(9443, client.listenerFamily)), proxyHeader: proxyHeaderOf(client), ...(client.localAddress ? { localAddress: client.localAddress } : {}) };
  if (exposure === 'passthrough') {
    const { reached } = await probeTls({ ...target, sni: host });
    if (reached !== undefined && reached.cluster !== KUBE_APISERVER_CLUSTER) throw new Error(`${host} reached ${reached.cluster}`);
    return reached !== undefined;
  }
  const probe = `garden-probe-${process.pid}-${++marker}`;
  const result = await probeHttps({ ...target, sni: host, marker: probe });
  const expectedCertificate = host === WILDCARD_HOST ? 'garden-kube-apiserver-wildcard-tls' : 'garden-kube-apiserver-tls';
  if (result.servedCertificate !== expectedCertificate) throw new Error(`${host}: served ${result.servedCertificate}, want ${expectedCertificate}`);
  const upstream = gw.echo.upstream(KUBE_APISERVER_CLUSTER).connections.some((c) => c.received.includes(probe));
  if (upstream !== (result.status !== undefined)) throw new Error(`${host}: answered ${result.status} but the upstream ${upstream ? 'got' : 'did not get'} the request`);
  return upstream;
}

