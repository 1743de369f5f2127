// Facts about Envoy 1.40 that gardener-acl's RBAC design depends on, measured on the real binary.
// Each case places one hand-written DENY filter (through file-based LDS, without restarting Envoy)
// and checks whether a request is denied: "denied" means the policy matched.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpConnect, probeTls, proxyV2From, encodeProxyV2Header, type HeaderList } from './clients.js';
import { HEADER_GARDENER_DESTINATION, HEADER_REVERSED_VPN, istioClusterName } from './gardener-shapes.js';
import { ANY, headerExact, httpRbacEnvoyFilter, remoteIp, singlePolicyRules, sniRbacEnvoyFilter } from './hand-written-filters.js';
import type { JsonObject } from './json.js';
import { startLiveGateway, type LiveGateway } from './live-gateway.js';

const SHOOT_A = 'shoot--p--a';
const SHOOT_B = 'shoot--p--b';
const HOST_A = 'api.a.example.test';
const DESTINATION_A = istioClusterName.kubeApiserver(SHOOT_A);
const DESTINATION_B = istioClusterName.kubeApiserver(SHOOT_B);

/** HTTP RBAC on 8443 denying requests that match `permission` AND `principal`. */
function denyHttp(permission: JsonObject, principal: JsonObject): JsonObject {
  return httpRbacEnvoyFilter('fact-probe', 8443, singlePolicyRules('DENY', 'probe', permission, principal));
}

/** Network RBAC on shoot A's SNI chain denying connections from `principal`. */
function denyTls(principal: JsonObject): JsonObject {
  return sniRbacEnvoyFilter('fact-probe', 9443, HOST_A, singlePolicyRules('DENY', 'probe', ANY, principal));
}

/** TCP6 PROXY header whose source is the IPv4-mapped form of 10.1.2.3. */
const MAPPED_SOURCE_HEADER = encodeProxyV2Header({
  source: { address: '::ffff:10.1.2.3', port: 40_000 },
  destination: { address: '2001:db8::1', port: 443 },
});

describe('Envoy 1.40 facts (real binary)', () => {
  let gateway: LiveGateway;

  beforeAll(async () => {
    gateway = await startLiveGateway({
      era: 'v1.139-v1.149',
      family: 'dual',
      listenersViaFile: true,
      shoots: [
        { technicalID: SHOOT_A, sniChains: [[HOST_A]] },
        { technicalID: SHOOT_B, sniChains: [['api.b.example.test']] },
      ],
    });
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  async function place(filter: JsonObject): Promise<void> {
    const result = await gateway.applyEnvoyFilters([filter]);
    expect(result.accepted, result.output).toBe(true);
    expect(gateway.placement.patches[0]?.applications).toBe(1);
  }

  async function connectStatus(headers: HeaderList, proxyHeader?: Buffer): Promise<number> {
    const target = await gateway.endpoint(8443, 4);
    return (await httpConnect({ ...target, proxyHeader, headers })).status;
  }

  async function tlsReached(proxyHeader: Buffer): Promise<boolean> {
    const target = await gateway.endpoint(9443, 4);
    return (await probeTls({ ...target, sni: HOST_A, proxyHeader })).reached !== undefined;
  }

  describe('a TCP6 PROXY header with IPv4-mapped source ::ffff:10.1.2.3 stays an IPv6 address', () => {
    const destinationA: HeaderList = [[HEADER_GARDENER_DESTINATION, DESTINATION_A]];

    it('HTTP RBAC: the IPv4 CIDR 10.0.0.0/8 does not match it', async () => {
      await place(denyHttp(ANY, remoteIp('10.0.0.0', 8)));
      expect(await connectStatus(destinationA, MAPPED_SOURCE_HEADER)).toBe(200);
      expect(await connectStatus(destinationA, proxyV2From('10.1.2.3'))).toBe(403);
    });

    it('HTTP RBAC: the IPv6 CIDR ::ffff:10.0.0.0/104 matches it', async () => {
      await place(denyHttp(ANY, remoteIp('::ffff:10.0.0.0', 104)));
      expect(await connectStatus(destinationA, MAPPED_SOURCE_HEADER)).toBe(403);
      expect(await connectStatus(destinationA, proxyV2From('10.1.2.3'))).toBe(200);
    });

    it('network RBAC: the same (IPv4 CIDR no, IPv4-mapped IPv6 CIDR yes)', async () => {
      await place(denyTls(remoteIp('10.0.0.0', 8)));
      expect(await tlsReached(MAPPED_SOURCE_HEADER)).toBe(true);
      await place(denyTls(remoteIp('::ffff:10.0.0.0', 104)));
      expect(await tlsReached(MAPPED_SOURCE_HEADER)).toBe(false);
    });
  });

  describe('repeated request headers', () => {
    const lowerCaseB = ['x-gardener-destination', DESTINATION_B] as const;
    const twoDestinations: HeaderList = [[HEADER_GARDENER_DESTINATION, DESTINATION_A], lowerCaseB];
    const MATCH_INDIVIDUALLY_GUARDS = [
      'envoy.reloadable_features.rbac_match_headers_individually',
      'envoy.reloadable_features.match_headers_individually',
    ];
    const setMatchIndividually = async (enabled: boolean): Promise<void> =>
      gateway.envoy.setRuntime(Object.fromEntries(MATCH_INDIVIDUALLY_GUARDS.map((key) => [key, enabled])));

    afterAll(async () => {
      await setMatchIndividually(true);
    });

    it('default: RBAC header matchers match if ANY single value matches; the joined form never does', async () => {
      await place(denyHttp(headerExact('x-gardener-destination', DESTINATION_B), ANY));
      expect(await connectStatus(twoDestinations)).toBe(403);
      await place(denyHttp(headerExact('x-gardener-destination', DESTINATION_A), ANY));
      expect(await connectStatus(twoDestinations)).toBe(403);
      await place(denyHttp(headerExact('x-gardener-destination', `${DESTINATION_A},${DESTINATION_B}`), ANY));
      expect(await connectStatus(twoDestinations)).toBe(200);
    });

    it('default: the route regex matches if any value matches, and cluster_header takes the FIRST value', async () => {
      await place(denyHttp(headerExact('x-no-such-header', 'x'), ANY));
      const target = await gateway.endpoint(8443, 4);
      const aThenB = await httpConnect({ ...target, headers: twoDestinations });
      expect(aThenB.tunnel?.cluster).toBe(DESTINATION_A);
      const bThenA = await httpConnect({ ...target, headers: [...twoDestinations].reverse() });
      expect(bThenA.tunnel?.cluster).toBe(DESTINATION_B);
      const junkThenB = await httpConnect({ ...target, headers: [[HEADER_GARDENER_DESTINATION, 'junk'], lowerCaseB] });
      expect(junkThenB.status).toBe(503); // route taken (B matches the regex), cluster "junk" does not exist
    });

    it('with the *match_headers_individually guards off: values are joined with "," (no space)', async () => {
      await setMatchIndividually(false);
      await place(denyHttp(headerExact('x-gardener-destination', `${DESTINATION_A},${DESTINATION_B}`), ANY));
      expect(await connectStatus(twoDestinations)).toBe(403);
      await place(denyHttp(headerExact('x-gardener-destination', DESTINATION_B), ANY));
      const target = await gateway.endpoint(8443, 4);
      const joined = await httpConnect({ ...target, headers: twoDestinations });
      // The joined value "A,B" passes Gardener's regex (".*" spans the comma); the cluster is still the first value.
      expect(joined.status).toBe(200);
      expect(joined.tunnel?.cluster).toBe(DESTINATION_A);
      await setMatchIndividually(true);
    });

    it('RBAC header names are case-insensitive', async () => {
      await place(denyHttp(headerExact('X-Gardener-DESTINATION', DESTINATION_A), ANY));
      expect(await connectStatus([['x-gardener-destination', DESTINATION_A]])).toBe(403);
    });

    it('8443 routes on X-Gardener-Destination only, whatever Reversed-VPN says', async () => {
      await place(denyHttp(headerExact('x-no-such-header', 'x'), ANY));
      const target = await gateway.endpoint(8443, 4);
      const result = await httpConnect({
        ...target,
        headers: [[HEADER_REVERSED_VPN, DESTINATION_A], [HEADER_GARDENER_DESTINATION, DESTINATION_B]],
      });
      expect(result.tunnel?.cluster).toBe(DESTINATION_B);
    });
  });

  describe('IPv6 loopback and PROXY sources', () => {
    it('a ::1 client without PROXY header is remote_ip ::1 (IPv6 listener address)', async () => {
      await place(denyHttp(ANY, remoteIp('::1', 128)));
      const target = await gateway.endpoint(8443, 6);
      expect(target.host).toBe('::1');
      const fromV6 = await httpConnect({ ...target, localAddress: '::1', headers: [[HEADER_GARDENER_DESTINATION, DESTINATION_A]] });
      expect(fromV6.status).toBe(403);
      const fromV4 = await httpConnect({ ...(await gateway.endpoint(8443, 4)), headers: [[HEADER_GARDENER_DESTINATION, DESTINATION_A]] });
      expect(fromV4.status).toBe(200);
    });

    it('an IPv6 PROXY source is matched by an IPv6 CIDR, never by ::/0-less IPv4 rules', async () => {
      await place(denyHttp(ANY, remoteIp('0.0.0.0', 0)));
      const headers: HeaderList = [[HEADER_GARDENER_DESTINATION, DESTINATION_A]];
      expect(await connectStatus(headers, proxyV2From('2001:db8::7'))).toBe(200);
      expect(await connectStatus(headers, proxyV2From('192.0.2.7'))).toBe(403);
      await place(denyHttp(ANY, remoteIp('2001:db8::', 32)));
      expect(await connectStatus(headers, proxyV2From('2001:db8::7'))).toBe(403);
    });
  });

  it('file-based LDS updates keep the listener ports', async () => {
    const before = await gateway.endpoint(8443, 4);
    await place(denyHttp(headerExact('x-no-such-header', 'y'), ANY));
    expect(await gateway.endpoint(8443, 4)).toEqual(before);
  });

  it('a rejected listener update is reported with Envoy\'s reason and changes nothing', async () => {
    const before = gateway.placement;
    const bad = denyHttp(ANY, { remote_ip: { address_prefix: 'not-an-ip', prefix_len: 8 } });
    const result = await gateway.applyEnvoyFilters([bad]);
    expect(result.accepted).toBe(false);
    expect(result.output).toContain('not-an-ip');
    expect(gateway.placement).toBe(before);
  });
});
