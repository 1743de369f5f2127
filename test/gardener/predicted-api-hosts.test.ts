// The API server hosts a shoot's Gateway will have, known before it exists: each source, and what
// must not be taken for one (another shoot's record, the service-account issuer, a wildcard).
import { describe, expect, it } from 'vitest';

import { clusterSchema, dnsRecordSchema, type DnsRecord } from '../../src/gardener/objects.js';
import { predictedApiHosts } from '../../src/gardener/predicted-api-hosts.js';

const NS = 'shoot--p--foo';

function cluster(shoot: { dns?: string; advertised?: { name: string; url: string }[] }, ingressDomain?: string) {
  return clusterSchema.parse({
    apiVersion: 'extensions.gardener.cloud/v1alpha1',
    kind: 'Cluster',
    metadata: { name: NS },
    spec: {
      shoot: {
        metadata: { name: 'foo', namespace: 'garden-p' },
        spec: shoot.dns === undefined ? {} : { dns: { domain: shoot.dns } },
        ...(shoot.advertised ? { status: { technicalID: NS, advertisedAddresses: shoot.advertised } } : {}),
      },
      seed: { spec: ingressDomain === undefined ? {} : { ingress: { domain: ingressDomain } } },
    },
  });
}

const record = (name: string, dnsName: string, namespace = NS): DnsRecord =>
  dnsRecordSchema.parse({ apiVersion: 'extensions.gardener.cloud/v1alpha1', kind: 'DNSRecord', metadata: { name, namespace }, spec: { name: dnsName } });

describe('predictedApiHosts', () => {
  it('a new shoot: its external domain, its API server DNSRecords and the seed wildcard endpoint', () => {
    const records = [record('foo-internal', 'api.foo.p.internal.example.com'), record('foo-external', 'api.foo.example.org'), record('foo-owner', 'owner.foo.example.org')];
    expect(predictedApiHosts(cluster({ dns: 'foo.example.org' }, 'ingress.seed.example.com'), 'p--foo', records)).toEqual([
      'api-p--foo.ingress.seed.example.com',
      'api.foo.example.org',
      'api.foo.p.internal.example.com',
    ]);
  });

  it('a restored shoot: the hosts of its advertised API server addresses, not the service-account issuer', () => {
    const advertised = [
      { name: 'external', url: 'https://api.foo.example.org' },
      { name: 'internal', url: 'https://api.foo.p.internal.example.com' },
      { name: 'wildcard-tls-seed-bound', url: 'https://api-p--foo.ingress.old-seed.example.com' },
      { name: 'service-account-issuer', url: 'https://discovery.example.com/projects/p/shoots/uid/issuer' },
    ];
    expect(predictedApiHosts(cluster({ advertised }), 'p--foo', [])).toEqual(['api-p--foo.ingress.old-seed.example.com', 'api.foo.example.org', 'api.foo.p.internal.example.com']);
  });

  it('ignores records of other shoots (a shoot whose name starts with this one\'s, another namespace) and names no client can send as SNI', () => {
    const records = [
      record('foo-bar-internal', 'api.foo-bar.p.internal.example.com'),
      record('foo-internal', 'api.foo.q.internal.example.com', 'shoot--q--foo'),
      record('foo-external', '*.foo.example.org'),
      record('foo-internal', 'API.Foo.P.Internal.Example.COM.'),
    ];
    expect(predictedApiHosts(cluster({}), 'p--foo', records)).toEqual(['api.foo.p.internal.example.com']);
  });

  it('nothing known ahead: no host', () => {
    expect(predictedApiHosts(cluster({}), 'p--foo', [])).toEqual([]);
  });
});
