// Issue 32 point 2: the Garden webhook on a real kube-apiserver that stores Gardens with
// gardener-operator's own CRD and calls the webhook over TLS, registered as `webhook-config
// --webhooks garden` prints it. What the client sees (the refusal text, the warnings) is asserted:
// an invalid rule, and a rule that admits fewer clients than the one in force without having been
// in audit mode (a lock-out of the virtual garden), are refused; the audit-first path and an
// explicit confirmation are admitted; a widening needs nothing.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { webhookConfigCommand } from '../../src/cli/webhook-command.js';
import { createObject } from '../../src/kube/objects-client.js';
import { CONFIRM_LOCK_OUT_ANNOTATION } from '../../src/webhook/garden-validator.js';
import type { ControlPlane } from '../kube/control-plane.js';
import { eventually, startWithCRDs } from '../kube/kube-test-helpers.js';
import { gardenerCrdFile } from '../support/gardener-resource-manager.js';
import { garden, rule, write } from './garden-writes.js';
import { startTestWebhook, type TestWebhook } from './webhook-fixtures.js';

describe('the Garden webhook behind a real kube-apiserver with gardener-operator’s Garden CRD', () => {
  let cp: ControlPlane;
  let hook: TestWebhook;

  beforeAll(async () => {
    cp = await startWithCRDs([]);
    await cp.installCRDs([gardenerCrdFile('operator.gardener.cloud_gardens.yaml')]);
    hook = await startTestWebhook(undefined);
    const caFile = path.join(hook.certDir, 'ca.crt');
    await writeFile(caFile, hook.ca.cert);
    let yaml = '';
    const code = await webhookConfigCommand(['--webhooks', 'garden', '--url', hook.url, '--ca-bundle-file', caFile, '--timeout-seconds', '5'], { stdout: (t) => (yaml += t), stderr: (t) => (yaml += t) });
    expect(code, yaml).toBe(0);
    for (const doc of parseAllDocuments(yaml)) await createObject(cp.kubeConfig, doc.toJSON() as never);
    await eventually('webhook in force', async () => (await write(cp, 'POST', garden('probe', rule(['10.0.0.300/8'])))).status === 422, 30_000);
  }, 120_000);

  afterAll(async () => {
    await hook?.stop();
    await cp?.stop();
  });

  it('refuses an invalid rule with the shoot ACL’s words, naming the Garden’s field', async () => {
    const answer = await write(cp, 'POST', garden('invalid', rule(['10.0.0.300/8'], 'audit')));
    expect(answer).toEqual({
      status: 422,
      message:
        'admission webhook "gardens.acl.gardener.cloud" denied the request: spec.extensions[0].providerConfig.rule.cidrs[0]: "10.0.0.300/8" is not a valid CIDR ("10.0.0.300" is not an IPv4 address); write a range like 203.0.113.0/24 or 2001:db8::/48',
    });
  });

  it('refuses a first enforced ALLOW rule (it could lock the editor out) and says how to go ahead', async () => {
    const answer = await write(cp, 'POST', garden('straight-to-enforce', rule(['203.0.113.0/24', '2001:db8:a::/48'])));
    expect(answer.status).toBe(422);
    expect(answer.message).toBe(
      'admission webhook "gardens.acl.gardener.cloud" denied the request: spec.extensions[0].providerConfig.rule: admits fewer clients than the rule in force (none: everyone) and is not the rule that was in audit mode, so it could lock you and every client it does not list out of the virtual garden\'s API server; set mode: audit first and switch it to enforce once gardener_acl_garden.virtual-garden.rbac.shadow_denied counts only clients you mean to refuse (docs/operators/garden.md), or confirm with the annotation acl.gardener.cloud/confirm-lock-out-risk: "true" on the Garden',
    );
  });

  it('admits the audit-first path: the rule in audit mode, then the same rule enforced; a widening needs nothing; a narrowing is refused again', async () => {
    expect((await write(cp, 'POST', garden('audit-first', rule(['203.0.113.0/24', '2001:db8:a::/48'], 'audit')))).status).toBe(200);
    expect((await write(cp, 'PUT', garden('audit-first', rule(['203.0.113.0/24', '2001:db8:a::/48'])))).status).toBe(200);
    expect((await write(cp, 'PUT', garden('audit-first', rule(['203.0.113.0/24', '198.51.100.0/24', '2001:db8:a::/48'])))).status).toBe(200);
    const narrowed = await write(cp, 'PUT', garden('audit-first', rule(['198.51.100.0/24', '2001:db8:a::/48'])));
    expect(narrowed.status).toBe(422);
    expect(narrowed.message).toContain('spec.extensions[0].providerConfig.rule: admits fewer clients than the rule in force and is not the rule that was in audit mode');
  });

  it('refuses a DENY of the runtime cluster’s own ranges, which are always admitted (the rule would refuse nobody there)', async () => {
    const answer = await write(cp, 'POST', garden('deny-runtime', { rule: { action: 'DENY', type: 'remote_ip', cidrs: ['100.100.0.0/16', '203.0.113.0/24'], mode: 'audit' } }));
    expect(answer).toEqual({
      status: 422,
      message:
        "admission webhook \"gardens.acl.gardener.cloud\" denied the request: spec.extensions[0].providerConfig.rule.cidrs: a DENY of 100.96.0.0/11 (spec.runtimeCluster.networking.pods[0]) refuses nobody there: the runtime cluster's nodes and pods are always admitted, since the garden's own components reach the virtual garden's API server from them; remove those ranges from the rule",
    });
  });

  it('admits a tightening the Garden confirms, and a Garden without the acl extension is not looked at', async () => {
    expect((await write(cp, 'POST', garden('confirmed', rule(['203.0.113.0/24', '2001:db8:a::/48']), { [CONFIRM_LOCK_OUT_ANNOTATION]: 'true' }))).status).toBe(200);
    expect((await write(cp, 'POST', garden('no-acl', undefined))).status).toBe(200);
  });
});
