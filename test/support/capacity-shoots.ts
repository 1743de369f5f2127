// Shoots as a seed has them, for the ECDS capacity figures (bench/ecds-capacity.ts and the test that
// holds docs/operators/ecds-delivery.md to them): each ALLOW with `cidrs` ranges (four in five IPv4 /28s, one in five an
// IPv6 /64) and six always-allowed ranges, two of them shared by every shoot (the seed's node and
// pod ranges) and four its own (its node range and three egress addresses).
import { parseCidr, type Cidr } from '../../src/acl/cidr.js';
import type { ShootPolicy } from '../../src/acl/model.js';

const cidr = (text: string): Cidr => {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(`capacity fixture ${text}: ${parsed.reason}`);
  return parsed.cidr;
};

export function capacityShoots(count: number, cidrs: number): ShootPolicy[] {
  return Array.from({ length: count }, (_, i) => {
    const hi = (i >> 8) & 255;
    const lo = i & 255;
    return {
      technicalID: `shoot--project${i % 97}--cluster-name-${i}`,
      rule: {
        action: 'ALLOW',
        type: 'remote_ip',
        mode: 'enforce',
        cidrs: Array.from({ length: cidrs }, (_, j) => cidr(j % 5 === 4 ? `2001:db8:${(i % 65535).toString(16)}:${j}::/64` : `${100 + (j % 50)}.${hi}.${lo}.${(j * 16) % 256}/28`)),
      },
      alwaysAllowed: [cidr('10.250.0.0/16'), cidr('100.96.0.0/11'), cidr(`10.${hi}.${lo}.0/24`), cidr(`198.51.${hi}.${lo}/32`), cidr(`198.18.${hi}.${lo}/32`), cidr(`198.19.${hi}.${lo}/32`)],
    };
  });
}
