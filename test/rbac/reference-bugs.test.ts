// Regression tests for the known bugs of the Go reference extension
// (shared/docs/reference-extension.md sections 1.10 and 3): each must stay fixed here, in every
// form of the combined CONNECT filters where the property holds (decided by the oracle's model of
// Envoy 1.37 and 1.40, which must agree). Where the forms read "targets S" differently (docs/design.md
// section 3), the rules form's test pins `combinedForm: 'rules'` and the matcher forms get their own.
import { describe, expect, it } from 'vitest';
import { COMBINED_FORMS, defaultOperatorConfig, type CombinedFormName } from '../../src/config/operator-config.js';
import { Decider, kapi, socket, vpn } from '../support/decide.js';
import { testSeed } from '../support/test-seed.js';

const OUTSIDE = '198.51.100.77';
const INSIDE = '203.0.113.9';
const NODE = '10.250.3.4';
const DEFAULT_FORM = defaultOperatorConfig().combinedForm;
const MATCHER_FORMS = COMBINED_FORMS.filter((form) => form !== 'rules');

it('the default form is among the forms these tests run', () => {
  expect(COMBINED_FORMS).toContain(DEFAULT_FORM);
  expect(new Decider(testSeed([]).seed).form).toBe(DEFAULT_FORM);
});

describe.each(COMBINED_FORMS)('reference extension bugs stay fixed (combinedForm %s)', (form) => {
  function seedOf(...shoots: Parameters<typeof testSeed>[0]) {
    return new Decider(testSeed(shoots, { operator: { combinedForm: form } }).seed);
  }

  it('the seed is built in this form', () => {
    expect(seedOf().form).toBe(form);
  });

  it('foo vs foo-bar: an ACL on foo neither restricts nor is bypassed through foo-bar', () => {
    const d = seedOf({ id: 'shoot--p--foo', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }, { id: 'shoot--p--foo-bar' });
    expect(d.connect([['X-Gardener-Destination', vpn('shoot--p--foo-bar')]], OUTSIDE)).toBe(true);
    expect(d.connect([['X-Gardener-Destination', vpn('shoot--p--foo')]], OUTSIDE)).toBe(false);
    expect(d.connect([['X-Gardener-Destination', socket('shoot--p--foo-bar')]], OUTSIDE)).toBe(true);
    expect(d.connect([['X-Gardener-Destination', socket('shoot--p--foo')]], OUTSIDE)).toBe(false);
  });

  it('legacy technical IDs are protected, and do not restrict a shoot whose ID contains them', () => {
    const d = seedOf({ id: 'shoot-q--foo', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }, { id: 'shoot--xshoot-q--foo' });
    expect(d.connect([['Reversed-VPN', vpn('shoot-q--foo')]], OUTSIDE)).toBe(false);
    expect(d.connect([['Reversed-VPN', socket('shoot-q--foo')]], OUTSIDE)).toBe(false);
    expect(d.connect([['Reversed-VPN', vpn('shoot-q--foo')]], INSIDE)).toBe(true);
    expect(d.connect([['Reversed-VPN', socket('shoot--xshoot-q--foo')]], OUTSIDE)).toBe(true);
  });

  it('or_ids inverse bypass: with several ACL shoots each one still restricts its own traffic', () => {
    const d = seedOf(
      { id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } },
      { id: 'shoot--p--b', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['198.51.100.0/24'] } },
    );
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--a')]], OUTSIDE)).toBe(false);
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--b')]], INSIDE)).toBe(false);
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--a')]], INSIDE)).toBe(true);
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--b')]], OUTSIDE)).toBe(true);
  });

  it('IPv6 clients of other shoots are never restricted; IPv6 clients of an ACL shoot are', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }, { id: 'shoot--p--b' });
    expect(d.connect([['X-Gardener-Destination', kapi('shoot--p--b')]], '2001:db8::1')).toBe(true);
    expect(d.connect([['X-Gardener-Destination', kapi('shoot--p--a')]], '2001:db8::1')).toBe(false);
    expect(d.sni(['api.shoot--p--a.example.com'], 'api.shoot--p--a.example.com', '2001:db8::1')).toBe(false);
  });

  it('lower-case "allow" keeps the always-allowed ranges (the shoot’s nodes are not cut off)', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'allow', type: 'remote_ip', cidrs: ['203.0.113.0/24'] }, always: ['10.250.0.0/16'] });
    expect(d.connect([['X-Gardener-Destination', vpn('shoot--p--a')]], NODE)).toBe(true);
    expect(d.sni(['api.shoot--p--a.example.com'], 'api.shoot--p--a.example.com', NODE)).toBe(true);
  });

  it('DENY on the header paths denies the listed ranges, admits the rest, and never the always-allowed', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'DENY', type: 'remote_ip', cidrs: ['10.0.0.0/8', '203.0.113.0/24'] }, always: ['10.250.0.0/16'] });
    expect(d.connect([['X-Gardener-Destination', vpn('shoot--p--a')]], INSIDE)).toBe(false);
    expect(d.connect([['X-Gardener-Destination', vpn('shoot--p--a')]], OUTSIDE)).toBe(true);
    expect(d.connect([['X-Gardener-Destination', vpn('shoot--p--a')]], NODE)).toBe(true);
    expect(d.sni(['api.shoot--p--a.example.com'], 'api.shoot--p--a.example.com', INSIDE)).toBe(false);
    expect(d.sni(['api.shoot--p--a.example.com'], 'api.shoot--p--a.example.com', OUTSIDE)).toBe(true);
  });

  it('ingress suffix collision: project bar’s ACL does not restrict project x-bar’s observability hosts', () => {
    const domain = 'ingress.seed.example.com';
    const built = testSeed([{ id: 'shoot--bar--foo', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } }, { id: 'shoot--x-bar--foo' }], {
      observabilityDomain: domain,
      operator: { combinedForm: form },
    });
    const d = new Decider(built.seed);
    const chain = [`*.${domain}`];
    expect(d.sni(chain, `p-x-bar--foo.${domain}`, OUTSIDE)).toBe(true);
    expect(d.sni(chain, `gu-bar--foo.${domain}`, OUTSIDE)).toBe(false);
    expect(d.sni(chain, `GU-BAR--FOO.${domain.toUpperCase()}`, OUTSIDE)).toBe(false);
    expect(d.sni(chain, `gu-bar--foo.${domain}`, INSIDE)).toBe(true);
  });

  it('a request naming two shoots in the two headers must satisfy both ACLs, in either order', () => {
    const d = seedOf(
      { id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } },
      { id: 'shoot--p--b', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['198.51.100.0/24'] } },
      { id: 'shoot--p--open' },
    );
    const both = (first: string, second: string) => [['Reversed-VPN', vpn(first)], ['X-Gardener-Destination', kapi(second)]] as const;
    expect(d.connect(both('shoot--p--a', 'shoot--p--b'), INSIDE)).toBe(false);
    expect(d.connect(both('shoot--p--b', 'shoot--p--a'), INSIDE)).toBe(false);
    expect(d.connect(both('shoot--p--a', 'shoot--p--b'), OUTSIDE)).toBe(false);
    // An open shoot in one header does not lift the ACL named in the other.
    expect(d.connect(both('shoot--p--open', 'shoot--p--a'), OUTSIDE)).toBe(false);
    expect(d.connect(both('shoot--p--a', 'shoot--p--open'), INSIDE)).toBe(true);
  });

  it('HA VPN servers vpn-seed-server-0..4 are all covered', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } });
    for (const i of [0, 1, 2, 3, 4]) expect(d.connect([['Reversed-VPN', vpn('shoot--p--a', i)]], OUTSIDE)).toBe(false);
  });

  it('IPv4-mapped IPv6 clients get the verdict of the IPv4 client they stand for', () => {
    const allow = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } });
    expect(allow.connect([['Reversed-VPN', vpn('shoot--p--a')]], `::ffff:${INSIDE}`)).toBe(true);
    expect(allow.connect([['Reversed-VPN', vpn('shoot--p--a')]], `::ffff:${OUTSIDE}`)).toBe(false);
    const deny = seedOf({ id: 'shoot--p--a', rule: { action: 'DENY', type: 'remote_ip', cidrs: ['203.0.113.0/24', '::/0'] } });
    expect(deny.connect([['Reversed-VPN', vpn('shoot--p--a')]], `::ffff:${INSIDE}`)).toBe(false);
    // "::/0" means every IPv6 client, not the IPv4 clients hiding in ::ffff:0:0/96.
    expect(deny.connect([['Reversed-VPN', vpn('shoot--p--a')]], `::ffff:${OUTSIDE}`)).toBe(true);
    expect(deny.connect([['Reversed-VPN', vpn('shoot--p--a')]], '2001:db8::5')).toBe(false);
  });

  it('direct_remote_ip rules look at the physical peer, always-allowed ranges at the remote address', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'direct_remote_ip', cidrs: ['127.0.0.0/8'] }, always: ['10.250.0.0/16'] });
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--a')]], OUTSIDE, { direct: '127.0.0.5' })).toBe(true);
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--a')]], '127.0.0.5', { direct: OUTSIDE })).toBe(false);
    expect(d.connect([['Reversed-VPN', vpn('shoot--p--a')]], NODE, { direct: OUTSIDE })).toBe(true);
  });
});

function deciderIn(form: CombinedFormName, ...shoots: Parameters<typeof testSeed>[0]): Decider {
  return new Decider(testSeed(shoots, { operator: { combinedForm: form } }).seed);
}

// Only the rules form reads "targets S" as "mentions S anywhere" (case-insensitive, any value of a
// repeated header): these two properties are that reading's, so they pin combinedForm rules.
describe('rules form only (combinedForm rules: any mention is checked)', () => {
  const seedOf = (...shoots: Parameters<typeof testSeed>[0]): Decider => deciderIn('rules', ...shoots);

  it('the socket header form (Istio TLS termination) is restricted on both headers, in any case', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } });
    for (const header of ['Reversed-VPN', 'X-Gardener-Destination', 'x-gardener-destination', 'REVERSED-vpn']) {
      expect(d.connect([[header, socket('shoot--p--a')]], OUTSIDE), header).toBe(false);
      expect(d.connect([[header, socket('shoot--p--a').toUpperCase()]], OUTSIDE), header).toBe(false);
    }
  });

  it('repeated headers: a later value naming an ACL shoot is still checked', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } });
    const headers = [['X-Gardener-Destination', 'outbound|443||kube-apiserver.other.svc.cluster.local'], ['X-Gardener-Destination', socket('shoot--p--a')]] as const;
    expect(d.connect(headers, OUTSIDE)).toBe(false);
    expect(d.connect(headers, INSIDE)).toBe(true);
  });
});

// The matcher forms check what can route (docs/design.md section 3): a protected header's joined value that
// begins with a cluster name or socket of S, spelled exactly. What cannot route to S is not checked.
describe.each(MATCHER_FORMS)('the matcher forms check what routes (combinedForm %s)', (form) => {
  const seedOf = (...shoots: Parameters<typeof testSeed>[0]): Decider => deciderIn(form, ...shoots);

  it('the socket header form (Istio TLS termination) is restricted on both headers, under any header-name case; a case variant of the value routes nowhere and is not checked', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } });
    for (const header of ['Reversed-VPN', 'X-Gardener-Destination', 'x-gardener-destination', 'REVERSED-vpn']) {
      expect(d.connect([[header, socket('shoot--p--a')]], OUTSIDE), header).toBe(false);
      expect(d.connect([[header, socket('shoot--p--a')]], INSIDE), header).toBe(true);
      expect(d.connect([[header, socket('shoot--p--a').toUpperCase()]], OUTSIDE), header).toBe(true);
    }
  });

  it('repeated headers: the first value routes, so it is checked; a later value routes nowhere and is not checked', () => {
    const d = seedOf({ id: 'shoot--p--a', rule: { action: 'ALLOW', type: 'remote_ip', cidrs: ['203.0.113.0/24'] } });
    const other = 'outbound|443||kube-apiserver.other.svc.cluster.local';
    const aFirst = [['X-Gardener-Destination', socket('shoot--p--a')], ['X-Gardener-Destination', other]] as const;
    const aLater = [['X-Gardener-Destination', other], ['X-Gardener-Destination', socket('shoot--p--a')]] as const;
    expect(d.connect(aFirst, OUTSIDE)).toBe(false);
    expect(d.connect(aFirst, INSIDE)).toBe(true);
    expect(d.connect(aLater, OUTSIDE)).toBe(true);
    // A value that is not UTF-8 after the routable one does not hide it (Envoy 1.37's regex `.` stops there).
    expect(d.connect([['X-Gardener-Destination', socket('shoot--p--a')], ['X-Gardener-Destination', '\xff']], OUTSIDE)).toBe(false);
  });
});
