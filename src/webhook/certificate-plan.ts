// What the stored webhook certificates need, decided from what is stored and the time alone (no
// I/O), so every replica that reads the same Secrets decides the same. The rules follow
// Gardener's extensions library (extensions/pkg/webhook/certificates): the CA is renewed once 80 %
// of its lifetime has passed and the previous one stays in the caBundle for a grace period; the
// serving certificate is always signed by the current CA, and only after the caBundle that
// contains that CA has been stored.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { z } from 'zod';
import type { KeyPair } from './serving-certs.js';

export const CA_CERT_KEY = 'ca.crt';
export const CA_KEY_KEY = 'ca.key';
export const PREVIOUS_CA_CERT_KEY = 'previous-ca.crt';
export const PREVIOUS_CA_UNTIL_KEY = 'previous-ca-until';

/** Share of a certificate's lifetime after which it is renewed. */
export const RENEW_AT = 0.8;

export interface StoredAuthority {
  readonly current: KeyPair;
  /** The CA before the last rotation, trusted until `untilMs`. */
  readonly previous?: { readonly cert: string; readonly untilMs: number };
}

const secretData = z.record(z.string(), z.string()).optional();
const decode = (data: Record<string, string>, key: string) => (data[key] === undefined ? undefined : Buffer.from(data[key], 'base64').toString('utf8'));

function parsesAsCertificate(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

/** The CA Secret's data (base64, as the API returns it); undefined when absent or not a usable CA. */
export function parseAuthority(rawData: unknown): StoredAuthority | undefined {
  const data = secretData.safeParse(rawData).data;
  if (!data) return undefined;
  const cert = decode(data, CA_CERT_KEY);
  const key = decode(data, CA_KEY_KEY);
  if (!cert || !key || !pairMatches({ cert, key }) || !parsesAsCertificate(cert)?.ca) return undefined;
  const previousCert = decode(data, PREVIOUS_CA_CERT_KEY);
  const until = Date.parse(decode(data, PREVIOUS_CA_UNTIL_KEY) ?? '');
  const previous = previousCert && parsesAsCertificate(previousCert) && Number.isFinite(until) ? { cert: previousCert, untilMs: until } : undefined;
  return previous ? { current: { cert, key }, previous } : { current: { cert, key } };
}

/** The serving Secret's data (kubernetes.io/tls); undefined when absent or broken. */
export function parseServing(rawData: unknown): KeyPair | undefined {
  const data = secretData.safeParse(rawData).data;
  if (!data) return undefined;
  const cert = decode(data, 'tls.crt');
  const key = decode(data, 'tls.key');
  return cert && key && pairMatches({ cert, key }) ? { cert, key } : undefined;
}

function pairMatches(pair: KeyPair): boolean {
  try {
    return new X509Certificate(pair.cert).checkPrivateKey(createPrivateKey(pair.key));
  } catch {
    return false;
  }
}

/** The CA Secret's data. The caBundle is derived from it when needed, never stored. */
export function authorityData(authority: StoredAuthority): Record<string, string> {
  const plain: Record<string, string> = {
    [CA_CERT_KEY]: authority.current.cert,
    [CA_KEY_KEY]: authority.current.key,
  };
  if (authority.previous) {
    plain[PREVIOUS_CA_CERT_KEY] = authority.previous.cert;
    plain[PREVIOUS_CA_UNTIL_KEY] = new Date(authority.previous.untilMs).toISOString();
  }
  return Object.fromEntries(Object.entries(plain).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
}

/** The caBundle: the current CA, then the previous one while it is still trusted. */
export function caBundle(authority: StoredAuthority, nowMs: number): string {
  const previous = authority.previous && previousTrusted(authority.previous, nowMs) ? [authority.previous.cert] : [];
  return [authority.current.cert, ...previous].map((pem) => pem.trim() + '\n').join('');
}

function previousTrusted(previous: NonNullable<StoredAuthority['previous']>, nowMs: number): boolean {
  return nowMs < previousTrustEndsAt(previous);
}

/** The end of the grace period, or the previous CA's own expiry if that comes first. */
export function previousTrustEndsAt(previous: NonNullable<StoredAuthority['previous']>): number {
  const cert = parsesAsCertificate(previous.cert);
  return cert === undefined ? 0 : Math.min(previous.untilMs, Date.parse(cert.validTo));
}

/** When a certificate is due for renewal: 80 % into its lifetime. */
export function renewalDueAt(pem: string): number {
  const cert = new X509Certificate(pem);
  const from = Date.parse(cert.validFrom);
  const to = Date.parse(cert.validTo);
  return from + RENEW_AT * (to - from);
}

/** The validity of a new certificate: backdated a little for clock skew, renewed at 80 % from issuance. */
export function validityFrom(nowMs: number, lifetimeMs: number): { notBefore: Date; notAfter: Date } {
  const skew = Math.min(3_600_000, lifetimeMs / 10);
  return { notBefore: new Date(nowMs - skew), notAfter: new Date(nowMs + lifetimeMs) };
}

export type AuthorityDecision =
  | { readonly action: 'keep' }
  | { readonly action: 'create'; readonly reason: string }
  | { readonly action: 'rotate'; readonly reason: string }
  /** The previous CA's trust has run out: store the Secret without it (the bundle shrinks). */
  | { readonly action: 'drop-previous' };

export function decideAuthority(stored: StoredAuthority | undefined, nowMs: number): AuthorityDecision {
  if (!stored) return { action: 'create', reason: 'no usable CA is stored' };
  if (nowMs >= renewalDueAt(stored.current.cert)) return { action: 'rotate', reason: 'the CA is past 80 % of its lifetime' };
  if (stored.previous && !previousTrusted(stored.previous, nowMs)) return { action: 'drop-previous' };
  return { action: 'keep' };
}

/** Why the serving certificate must be issued anew, or undefined when the stored one is good. */
export function servingReissueReason(stored: KeyPair | undefined, ca: KeyPair, dnsNames: readonly string[], ips: readonly string[], nowMs: number): string | undefined {
  if (!stored) return 'no usable serving certificate is stored';
  const cert = new X509Certificate(stored.cert);
  const authority = new X509Certificate(ca.cert);
  if (!cert.checkIssued(authority) || !cert.verify(authority.publicKey)) return 'it is not signed by the current CA';
  if (nowMs >= renewalDueAt(stored.cert)) return 'it is past 80 % of its lifetime';
  const want = [...dnsNames.map((n) => `DNS:${n}`), ...ips.map((ip) => `IP Address:${ip}`)].sort().join(', ');
  const have = (cert.subjectAltName ?? '').split(', ').filter(Boolean).sort().join(', ');
  if (want !== have) return `its names (${have}) differ from the wanted ones (${want})`;
  return undefined;
}

/** Every field of `desired` is in `stored` with the same value (the API server adds defaults). */
export function containsDesired(stored: unknown, desired: unknown): boolean {
  if (desired === null || typeof desired !== 'object') return stored === desired;
  if (stored === null || typeof stored !== 'object') return false;
  if (Array.isArray(desired)) return Array.isArray(stored) && stored.length === desired.length && desired.every((d, i) => containsDesired(stored[i], d));
  return Object.entries(desired).every(([k, v]) => containsDesired((stored as Record<string, unknown>)[k], v));
}

/** The certificate is unexpired and signed by a CA of the bundle. */
export function trustedBy(pem: string, bundle: string, nowMs: number): boolean {
  return issuerInBundle(pem, bundle, nowMs) !== undefined;
}

/** The unexpired CA of the bundle (PEM) that signed the unexpired certificate `pem`, if any. */
export function issuerInBundle(pem: string, bundle: string, nowMs: number): string | undefined {
  const cert = parsesAsCertificate(pem);
  if (cert === undefined || nowMs >= Date.parse(cert.validTo)) return undefined;
  const cas = bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return cas.find((ca) => {
    const authority = parsesAsCertificate(ca);
    return authority !== undefined && nowMs < Date.parse(authority.validTo) && cert.checkIssued(authority) && cert.verify(authority.publicKey);
  });
}
