// The admission.k8s.io/v1 AdmissionReview contract: the request parsed with zod (only what the
// webhooks read is typed; objects stay `unknown` for the handlers' own schemas) and the
// response built the way controller-runtime writes it: same apiVersion/kind, the request's uid,
// a base64 JSON patch only when there are operations.
import type { Operation } from 'fast-json-patch';
import { z } from 'zod';
import { fieldErrorsFromZod, formatFieldErrors, REPORT_INPUT } from '../acl/field-errors.js';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';

const groupVersionKind = z.looseObject({ group: z.string(), version: z.string(), kind: z.string() });

export const admissionRequestSchema = z.looseObject({
  uid: z.string().min(1, { error: 'must be a non-empty string' }),
  kind: groupVersionKind,
  namespace: z.string().optional(),
  name: z.string().optional(),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  userInfo: z.looseObject({ username: z.string().optional() }).optional(),
  object: z.unknown().optional(),
  oldObject: z.unknown().optional(),
  dryRun: z.boolean().optional(),
  options: z.looseObject({ fieldManager: z.string().optional() }).nullish(),
});
export type AdmissionRequest = z.infer<typeof admissionRequestSchema>;

const admissionReviewSchema = z.looseObject({
  apiVersion: z.literal(ADMISSION_API_VERSION, { error: `must be "${ADMISSION_API_VERSION}"` }),
  kind: z.literal('AdmissionReview', { error: 'must be "AdmissionReview"' }),
  request: admissionRequestSchema,
});

/** What a webhook decides; the server turns it into the AdmissionReview response. */
export type AdmissionVerdict =
  | { readonly allowed: true; readonly patch?: readonly Operation[]; readonly warnings?: readonly string[] }
  | { readonly allowed: false; readonly code: number; readonly reason: string; readonly message: string };

export type ParsedReview = { readonly ok: true; readonly request: AdmissionRequest } | { readonly ok: false; readonly uid: string; readonly message: string };

/** The request's uid if there is one, so even a refusal of a malformed review can be matched. */
function uidOf(body: unknown): string {
  const uid = (body as { request?: { uid?: unknown } } | null)?.request?.uid;
  return typeof uid === 'string' ? uid : '';
}

export function parseAdmissionReview(body: unknown): ParsedReview {
  const parsed = admissionReviewSchema.safeParse(body, REPORT_INPUT);
  if (parsed.success) return { ok: true, request: parsed.data.request };
  return { ok: false, uid: uidOf(body), message: `malformed AdmissionReview: ${formatFieldErrors(fieldErrorsFromZod(parsed.error, ''))}` };
}

export const deny = (code: number, reason: string, message: string): AdmissionVerdict => ({ allowed: false, code, reason, message });

export function admissionResponse(uid: string, verdict: AdmissionVerdict): Record<string, unknown> {
  const response: Record<string, unknown> = { uid, allowed: verdict.allowed };
  if (!verdict.allowed) {
    response['status'] = { code: verdict.code, reason: verdict.reason, message: verdict.message };
  } else {
    if (verdict.patch && verdict.patch.length > 0) {
      response['patchType'] = 'JSONPatch';
      response['patch'] = Buffer.from(JSON.stringify(verdict.patch)).toString('base64');
    }
    if (verdict.warnings && verdict.warnings.length > 0) response['warnings'] = verdict.warnings;
  }
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response };
}
