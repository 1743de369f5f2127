/**
 * A shoot's technical ID is its control-plane namespace: `shoot--<project>--<name>`, or for
 * very old shoots `shoot-<project>--<name>`. It is the key Gardener uses in every cluster name
 * that can route to the control plane, so it is the key of every policy here.
 */
export interface ShootIdentity {
  readonly technicalID: string;
  /** Technical ID without the `shoot--`/`shoot-` prefix; used in `<prefix>-<shortID>.<domain>` hosts. */
  readonly shortID: string;
  readonly legacy: boolean;
}

const TECHNICAL_ID = /^shoot-[a-z0-9-]*[a-z0-9]$/;

export function parseTechnicalID(technicalID: string): ShootIdentity | undefined {
  if (technicalID.length > 63 || !TECHNICAL_ID.test(technicalID)) return undefined;
  const legacy = !technicalID.startsWith('shoot--');
  const shortID = technicalID.slice(legacy ? 'shoot-'.length : 'shoot--'.length);
  if (shortID === '' || shortID.startsWith('-')) return undefined;
  return { technicalID, shortID, legacy };
}

/**
 * The two shapes in which an HTTP-CONNECT destination header names a shoot:
 * `outbound|<port>||<service>.<id>.svc.cluster.local` (the ID between dots, so `foo` never
 * matches `foo-bar`) and, with Istio TLS termination, `<id>--kube-apiserver-socket`.
 */
export function destinationForms(technicalID: string): { readonly fqdnInfix: string; readonly socketValue: string } {
  return { fqdnInfix: `.${technicalID}.`, socketValue: `${technicalID}--kube-apiserver-socket` };
}
