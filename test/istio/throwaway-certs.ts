// Throwaway certificates standing in for the TLS secrets Istio's gateways get through SDS from
// istiod (`credentialName` of an HTTPS Gateway server: `kubernetes://<name>` and its
// `kubernetes://<name>-cacert`). Each is self-signed with CN = the credential name, so a client
// can tell which Gateway server terminated its TLS. Generated once per process, never written
// outside the Envoy's temporary directory.

import { generate } from 'selfsigned';
import type { JsonObject } from '../envoy/json.js';

const SDS_PREFIX = 'kubernetes://';
const CA_SUFFIX = '-cacert';

interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

const generated = new Map<string, Promise<KeyPair>>();

function credentialCertificate(credentialName: string): Promise<KeyPair> {
  let pair = generated.get(credentialName);
  if (pair === undefined) {
    pair = generate([{ name: 'commonName', value: credentialName }], { keyType: 'ec', algorithm: 'sha256' }).then((result) => ({
      cert: result.cert,
      key: result.private,
    }));
    generated.set(credentialName, pair);
  }
  return pair;
}

/** The credential name an SDS secret name refers to, and whether it is the CA part. */
export function parseSdsSecretName(name: string): { credentialName: string; ca: boolean } {
  if (!name.startsWith(SDS_PREFIX)) throw new Error(`SDS secret ${name} is not a Kubernetes credential; only credentialName secrets are stood in for`);
  const credential = name.slice(SDS_PREFIX.length);
  return credential.endsWith(CA_SUFFIX)
    ? { credentialName: credential.slice(0, -CA_SUFFIX.length), ca: true }
    : { credentialName: credential, ca: false };
}

/** Envoy static `Secret`s for the given SDS names (tls_certificate, or validation_context for `-cacert`). */
export async function staticSecrets(sdsNames: Iterable<string>): Promise<JsonObject[]> {
  const secrets: JsonObject[] = [];
  for (const name of [...new Set(sdsNames)].sort()) {
    const { credentialName, ca } = parseSdsSecretName(name);
    const pair = await credentialCertificate(credentialName);
    secrets.push(
      ca
        ? { name, validation_context: { trusted_ca: { inline_string: pair.cert } } }
        : { name, tls_certificate: { certificate_chain: { inline_string: pair.cert }, private_key: { inline_string: pair.key } } },
    );
  }
  return secrets;
}
