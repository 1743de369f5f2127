// The ACL shoots of the benches that run a whole Gardener seed through Istio's own code
// (bench/istio-tunnel-hop.ts, bench/istiod-push.ts): all on the default gateway, 50 projects, one
// CIDR each, every other shoot with HA VPN servers (two more clusters), distinct API server
// addresses and egress ranges, so no two shoots' objects are alike.
import type { FixtureShoot } from '../test/istio/seed-fixture.js';

export function gatewaySeedShoots(count: number): FixtureShoot[] {
  return Array.from({ length: count }, (_u, i) => ({
    id: `shoot--b${i % 50}--s${i}`,
    project: `b${i % 50}`,
    name: `s${i}`,
    gateway: 'default',
    rule: { action: 'ALLOW', type: 'remote_ip', cidrs: [`203.0.${i % 256}.0/24`] },
    tlsTermination: false,
    ...(i % 2 === 0 ? { haVpnServers: 2 } : {}),
    apiserverIP: `240.1.${i >> 8}.${i & 255}`,
    egressCIDRs: [`198.18.${i >> 8}.${i & 255}/32`],
  }));
}
