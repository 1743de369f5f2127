// The charts under Helm itself (built from its Go module): lint, render, schema rejections with
// the message an operator sees, and agreement with the code the charts configure.
import { CONTROLLER_DEFAULTS } from '../../src/actuator/controller-defaults.js';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseOperatorConfig } from '../../src/config/operator-config.js';
import { operatorExtension } from '../../src/registration/registration-objects.js';
import { gardenWebhookConfiguration, mutatingWebhookConfiguration, validatingWebhookConfiguration } from '../../src/webhook/webhook-configuration.js';
import { CLUSTER_RULES, SERVED_CHECK_CLUSTER_RULES, WEBHOOK_DISABLED_CLUSTER_RULES, KUBE_SYSTEM_RULES, MANAGED_CERTIFICATE_CLUSTER_RULES, MANAGED_CERTIFICATE_RULES, WEBHOOK_RULES, leaderElectionRules } from './expected-rbac.js';
import { ADMISSION_CHART, SEED_CHART, find, helm, renderChart, type KubeObject } from './helm.js';

const NON_DEFAULT_SEED = {
  image: { repository: 'registry.example.com/acl', tag: '', digest: `sha256:${'a'.repeat(64)}`, pullPolicy: 'Always' },
  replicas: 3,
  priorityClassName: '',
  logLevel: 'debug',
  controller: { workers: 2, resyncPeriod: '5m', combinedMinInterval: '30s', servedCheckInterval: '45s', servedCheckMaxReadMiB: 96, probePort: 9090, leaderElection: { enabled: true, id: 'acl-leader', leaseDuration: '30s', renewDeadline: '20s', retryPeriod: '5s' } },
  config: { additionalAllowedCIDRs: ['192.0.2.0/24', '2001:db8::/32'], maxCIDRs: 200, protectedHeaders: ['X-Gardener-Destination'], protectedPorts: [8443], sniPort: 9443, legacyProxyPort: 8443, maxObjectBytes: 262144 },
  webhook: { enabled: false },
  gardener: { version: '1.130.0', seed: { name: 'aws-eu1', provider: 'aws', networks: { nodes: '10.250.0.0/16' } }, garden: { clusterIdentity: 'landscape' } },
};

type Container = { name: string; args: string[]; image: string; securityContext: Record<string, unknown>; livenessProbe: unknown; readinessProbe: unknown; resources: unknown };
const podSpec = (objects: readonly KubeObject[], name?: string) => (find(objects, 'Deployment', name) as unknown as { spec: { replicas: number; template: { spec: { securityContext: Record<string, unknown>; containers: Container[] } } } }).spec;
const sortRules = (rules: readonly object[]) => [...rules].map((r) => JSON.stringify(r)).sort();
const TEST_CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('helm lint', () => {
  it.each([
    ['seed, defaults', SEED_CHART, []],
    ['seed, non-default values', SEED_CHART, ['--set-json', `replicas=3`, '--set-json', `config=${JSON.stringify(NON_DEFAULT_SEED.config)}`, '--set', 'webhook.enabled=false']],
    ['admission, defaults', ADMISSION_CHART, []],
    ['admission, registration only by URL', ADMISSION_CHART, ['--set', 'server.enabled=false', '--set', 'webhook.registration.mode=url', '--set', 'webhook.registration.url=https://gardener-acl-admission.garden.svc']],
  ])('%s', async (_name, chart, extra) => {
    const result = await helm(['lint', '--strict', chart, ...extra]);
    expect(result.stderr + result.stdout).toContain('0 chart(s) failed');
    expect(result.code).toBe(0);
  });
});

describe('seed chart rendering', () => {
  it('defaults: controller and webhook as two Deployments with their own ServiceAccounts, PDBs, probes, non-root read-only containers', async () => {
    const objects = await renderChart(SEED_CHART);
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ClusterRole/gardener-acl', 'ClusterRole/gardener-acl-webhook', 'ClusterRoleBinding/gardener-acl', 'ClusterRoleBinding/gardener-acl-webhook',
      'ConfigMap/gardener-acl-config', 'Deployment/gardener-acl', 'Deployment/gardener-acl-webhook',
      'PodDisruptionBudget/gardener-acl', 'PodDisruptionBudget/gardener-acl-webhook', 'Role/gardener-acl', 'Role/gardener-acl-leader-election', 'Role/gardener-acl-webhook-certificates',
      'RoleBinding/gardener-acl', 'RoleBinding/gardener-acl-leader-election', 'RoleBinding/gardener-acl-webhook-certificates', 'Service/gardener-acl', 'Service/gardener-acl-controller',
      'ServiceAccount/gardener-acl', 'ServiceAccount/gardener-acl-webhook', 'VerticalPodAutoscaler/gardener-acl', 'VerticalPodAutoscaler/gardener-acl-webhook',
    ]);
    for (const [name, command, serviceAccount] of [['gardener-acl', 'controller', 'gardener-acl'], ['gardener-acl-webhook', 'webhook', 'gardener-acl-webhook']] as const) {
      const spec = podSpec(objects, name) as ReturnType<typeof podSpec> & { template: { spec: { serviceAccountName: string } } };
      expect(spec.replicas).toBe(2);
      expect(spec.template.spec.serviceAccountName).toBe(serviceAccount);
      expect(spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532 });
      expect(spec.template.spec.containers.map((c) => c.args[0])).toEqual([command]);
      for (const c of spec.template.spec.containers) {
        expect(c.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
        expect(c.livenessProbe).toBeDefined();
        expect(c.readinessProbe).toBeDefined();
        expect(c.resources).toBeDefined();
      }
      expect(find(objects, 'PodDisruptionBudget', name).spec).toMatchObject({ maxUnavailable: 1 });
      // Each bounded by its V8 heap limits (NODE_OPTIONS), so each has a memory limit above them
      // (bench/controller.ts measures both processes against them).
      const container = spec.template.spec.containers[0] as Container & { env: { name: string; value?: string }[]; resources: { limits?: { memory?: string } } };
      const nodeOptions = container.env.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '';
      expect(nodeOptions).toMatch(/^--max-old-space-size=\d+ --max-semi-space-size=\d+$/);
      expect({ limit: container.resources.limits?.memory, oldSpace: Number(/--max-old-space-size=(\d+)/.exec(nodeOptions)?.[1]) }).toEqual(
        command === 'controller' ? { limit: '768Mi', oldSpace: 512 } : { limit: '320Mi', oldSpace: 160 },
      );
      expect(find(objects, 'VerticalPodAutoscaler', name).spec).toMatchObject({
        targetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
        resourcePolicy: { containerPolicies: [{ containerName: command, controlledValues: 'RequestsOnly' }] },
      });
    }
    // Gardener's high-availability-config webhook spreads the fail-closed webhook server.
    expect((find(objects, 'Deployment', 'gardener-acl-webhook').metadata['labels'] as Record<string, string>)['high-availability-config.resources.gardener.cloud/type']).toBe('server');
    expect((find(objects, 'Deployment', 'gardener-acl').metadata['labels'] as Record<string, string>)['high-availability-config.resources.gardener.cloud/type']).toBe('controller');
    expect((await renderChart(SEED_CHART, { vpa: { enabled: false } })).filter((o) => o.kind === 'VerticalPodAutoscaler')).toEqual([]);
    // The webhook's Service selects only webhook pods; the two Deployments' selectors do not overlap.
    const selector = (kind: string, name: string) => (find(objects, kind, name) as unknown as { spec: { selector: unknown } }).spec.selector;
    expect(selector('Service', 'gardener-acl')).toEqual({ 'app.kubernetes.io/instance': 'gardener-acl', 'app.kubernetes.io/name': 'gardener-acl-webhook' });
    expect(selector('Deployment', 'gardener-acl')).toEqual({ matchLabels: { 'app.kubernetes.io/instance': 'gardener-acl', 'app.kubernetes.io/name': 'gardener-acl' } });
    expect(selector('Deployment', 'gardener-acl-webhook')).toEqual({ matchLabels: selector('Service', 'gardener-acl') });
  });

  it('non-default values reach the args, the OperatorConfiguration and the RBAC; Gardener-injected values are accepted', async () => {
    const objects = await renderChart(SEED_CHART, NON_DEFAULT_SEED);
    const spec = podSpec(objects);
    const controller = spec.template.spec.containers.find((c) => c.name === 'controller');
    expect(spec.template.spec.containers).toHaveLength(1);
    expect(controller?.image).toBe(`registry.example.com/acl@sha256:${'a'.repeat(64)}`);
    expect(controller?.args).toEqual([
      'controller', '--config=/etc/gardener-acl/config/config.yaml', '--leader-elect=true', '--leader-election-id=acl-leader',
      '--lease-duration=30s', '--renew-deadline=20s', '--retry-period=5s', '--probe-port=9090', '--workers=2',
      '--resync-period=5m', '--combined-min-interval=30s', '--served-check-interval=45s', '--served-check-max-read-mib=96', '--graceful-shutdown-timeout=30s', '--log-level=debug',
      // webhook.enabled false: the controller deletes what an earlier managed install registered.
      '--no-seed-webhook',
    ]);
    const configYaml = (find(objects, 'ConfigMap').data as Record<string, string>)['config.yaml'] ?? '';
    const parsed = parseOperatorConfig(parseYaml(configYaml));
    expect(parsed.ok && parsed.config).toMatchObject({ maxCIDRs: 200, protectedHeaders: ['x-gardener-destination'], protectedPorts: [8443], maxObjectBytes: 262144 });
    expect(find(objects, 'PodDisruptionBudget').spec).toMatchObject({ maxUnavailable: 2 });
    expect(objects.some((o) => o.kind === 'MutatingWebhookConfiguration')).toBe(false);
    expect(find(objects, 'Role', 'gardener-acl-leader-election').rules).toEqual(leaderElectionRules('acl-leader'));
  });

  it('the reference extension’s chart values work unchanged: mapped where they mean the same, the rest named on the Deployment', async () => {
    // stackitcloud/gardener-extension-acl charts/gardener-extension-acl/values.yaml, as operators set it.
    const reference = {
      image: { repository: 'registry.example.com/acl', tag: 'v1.0.0' },
      imagePullPolicy: 'Always',
      replicaCount: 3,
      resources: { requests: { cpu: '50m', memory: '64Mi' } },
      vpa: { enabled: true, resourcePolicy: { minAllowed: { cpu: '50m', memory: '64Mi' } }, updatePolicy: { updateMode: 'Recreate' } },
      controllers: { concurrentSyncs: 7, ignoreOperationAnnotation: false, healthcheck: { concurrentSyncs: 5 } },
      disableControllers: [],
      additionalAllowedCidrs: ['192.0.2.0/24'],
      gardener: { version: '1.130.0' },
      webhook: { enabled: false },
    };
    const objects = await renderChart(SEED_CHART, reference);
    const deployment = find(objects, 'Deployment', 'gardener-acl') as unknown as { metadata: { annotations?: Record<string, string> } };
    const spec = podSpec(objects);
    const controller = spec.template.spec.containers.find((c) => c.name === 'controller') as Container & { imagePullPolicy: string };
    expect(spec.replicas).toBe(3);
    expect(controller.image).toBe('registry.example.com/acl:v1.0.0');
    expect(controller.imagePullPolicy).toBe('Always');
    expect(controller.args).toContain('--workers=7');
    expect(controller.resources).toEqual({ requests: { cpu: '50m', memory: '64Mi' } });
    const configYaml = (find(objects, 'ConfigMap').data as Record<string, string>)['config.yaml'] ?? '';
    const parsed = parseOperatorConfig(parseYaml(configYaml));
    expect(parsed.ok && parsed.config.additionalAllowedCIDRs).toHaveLength(1);
    expect(configYaml).toContain('- 192.0.2.0/24');
    expect(deployment.metadata.annotations?.['acl.gardener.cloud/ignored-reference-values']).toBe('disableControllers, controllers.ignoreOperationAnnotation, controllers.healthcheck');
    // Its vpa value has the shape of ours and means the same.
    expect(find(objects, 'VerticalPodAutoscaler', 'gardener-acl').spec).toMatchObject({ updatePolicy: { updateMode: 'Recreate' }, resourcePolicy: { containerPolicies: [{ minAllowed: { cpu: '50m', memory: '64Mi' } }] } });
    expect(find(objects, 'PodDisruptionBudget').spec).toMatchObject({ maxUnavailable: 2 });
    // Our own values carry no such annotation.
    expect((find(await renderChart(SEED_CHART), 'Deployment', 'gardener-acl') as unknown as { metadata: { annotations?: unknown } }).metadata.annotations).toBeUndefined();
  });

  it('the default OperatorConfiguration is what the controller would use without --config: the ecds form; the controller flags are the command\'s defaults', async () => {
    const objects = await renderChart(SEED_CHART);
    const configYaml = (find(objects, 'ConfigMap').data as Record<string, string>)['config.yaml'] ?? '';
    const parsed = parseOperatorConfig(parseYaml(configYaml));
    expect(parsed).toEqual(parseOperatorConfig({ apiVersion: 'acl.gardener.cloud/v1alpha1', kind: 'OperatorConfiguration' }));
    expect(parsed.ok && [parsed.config.combinedForm, parsed.config.ecdsBuckets, parsed.config.maxObjectBytes]).toEqual(['ecds', 48, 512 * 1024]);
    const args = podSpec(objects, 'gardener-acl').template.spec.containers[0]?.args ?? [];
    expect(args).toEqual(
      expect.arrayContaining([
        `--workers=${CONTROLLER_DEFAULTS.workers}`,
        `--resync-period=${CONTROLLER_DEFAULTS.resyncPeriod}`,
        `--combined-min-interval=${CONTROLLER_DEFAULTS.combinedMinInterval}`,
        `--served-check-interval=${CONTROLLER_DEFAULTS.servedCheckInterval}`,
        `--served-check-max-read-mib=${CONTROLLER_DEFAULTS.servedCheckMaxReadMiB}`,
      ]),
    );
  });

  it('grants exactly the rules in the table, nothing broader', async () => {
    const objects = await renderChart(SEED_CHART);
    expect(sortRules(find(objects, 'ClusterRole', 'gardener-acl').rules as object[])).toEqual(sortRules([...CLUSTER_RULES, ...MANAGED_CERTIFICATE_CLUSTER_RULES]));
    expect(sortRules(find(objects, 'Role', 'gardener-acl-webhook-certificates', 'garden').rules as object[])).toEqual(sortRules(MANAGED_CERTIFICATE_RULES));
    // With certificates from a Secret the controller keeps none and registers nothing.
    const fromSecret = await renderChart(SEED_CHART, { webhook: { tls: { mode: 'secret', secretName: 'tls', caBundle: TEST_CA } } });
    expect(sortRules(find(fromSecret, 'ClusterRole', 'gardener-acl').rules as object[])).toEqual(sortRules(CLUSTER_RULES));
    expect(fromSecret.some((o) => o.metadata.name === 'gardener-acl-webhook-certificates')).toBe(false);
    // Without the webhook the controller may delete only the registration an earlier managed install made.
    const disabled = await renderChart(SEED_CHART, { webhook: { enabled: false } });
    expect(sortRules(find(disabled, 'ClusterRole', 'gardener-acl').rules as object[])).toEqual(sortRules([...CLUSTER_RULES, ...WEBHOOK_DISABLED_CLUSTER_RULES]));
    // Without the served check the controller reads no pod.
    const unchecked = await renderChart(SEED_CHART, { controller: { servedCheckInterval: '0s' } });
    expect(sortRules(find(unchecked, 'ClusterRole', 'gardener-acl').rules as object[])).toEqual(
      sortRules([...CLUSTER_RULES.filter((r) => !SERVED_CHECK_CLUSTER_RULES.includes(r)), ...MANAGED_CERTIFICATE_CLUSTER_RULES]),
    );
    expect(podSpec(unchecked, 'gardener-acl').template.spec.containers[0]?.args).toContain('--served-check-interval=0s');
    expect(sortRules(find(objects, 'ClusterRole', 'gardener-acl-webhook').rules as object[])).toEqual(sortRules(WEBHOOK_RULES));
    expect(sortRules(find(objects, 'Role', 'gardener-acl', 'kube-system').rules as object[])).toEqual(sortRules(KUBE_SYSTEM_RULES));
    expect(find(objects, 'Role', 'gardener-acl-leader-election', 'garden').rules).toEqual(leaderElectionRules('gardener-acl-leader-election'));
    const all = objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role').flatMap((o) => o.rules as { verbs: string[]; resources: string[] }[]);
    expect(all.flatMap((r) => [...r.verbs, ...r.resources]).filter((x) => x.includes('*'))).toEqual([]);
  });

  it('mode managed (default): no certificate, Secret or registration is rendered; the controller writes the configuration the webhook code defines', async () => {
    const objects = await renderChart(SEED_CHART);
    expect(objects.filter((o) => o.kind === 'Secret' || o.kind === 'MutatingWebhookConfiguration')).toEqual([]);
    expect(JSON.stringify(objects)).not.toContain('BEGIN');
    const controller = podSpec(objects, 'gardener-acl').template.spec.containers[0];
    // Exactly the options of the configuration below (src/cli/controller-command.ts builds it from them).
    expect(controller?.args.filter((arg) => arg.startsWith('--webhook-') || arg.startsWith('--controller-username'))).toEqual([
      '--webhook-certificates-namespace=garden', '--webhook-service=gardener-acl.garden:443', '--webhook-config-owner=gardener-acl',
      '--webhook-timeout-seconds=10', '--controller-username=system:serviceaccount:garden:gardener-acl', '--webhook-ca-validity=30d', '--webhook-cert-validity=30d',
    ]);
    // The webhook Pods mount the Secret the controller keeps.
    const webhookVolumes = (find(objects, 'Deployment', 'gardener-acl-webhook') as unknown as { spec: { template: { spec: { volumes: { name: string; secret?: { secretName: string } }[] } } } }).spec.template.spec.volumes;
    expect(webhookVolumes.find((v) => v.name === 'webhook-tls')?.secret).toEqual({ secretName: 'gardener-acl-webhook-tls' });
  });

  it('mode secret: the MutatingWebhookConfiguration is the one the webhook code defines, with the given CA', async () => {
    const objects = await renderChart(SEED_CHART, { webhook: { tls: { mode: 'secret', secretName: 'from-cert-manager', caBundle: TEST_CA } } });
    const rendered = find(objects, 'MutatingWebhookConfiguration') as unknown as { webhooks: { clientConfig: { caBundle: string }; matchConditions: { name: string; expression: string }[] }[] };
    const ca = Buffer.from(rendered.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString();
    expect(ca).toBe(TEST_CA);
    const expected = mutatingWebhookConfiguration({
      target: { service: { name: 'gardener-acl', namespace: 'garden', port: 443 } },
      caBundlePem: ca,
      controllerUsername: 'system:serviceaccount:garden:gardener-acl',
    }) as { webhooks: Record<string, unknown>[] };
    const [webhook] = rendered.webhooks;
    // The controller's own combined filters skip the webhook; its empty re-trigger patches of
    // Gardener's shoot-* filters do not.
    expect(webhook?.matchConditions.slice(1)).toEqual([
      { name: 'not-a-combined-filter-written-by-the-controller', expression: `!object.metadata.name.startsWith('acl-connect-') || request.userInfo.username != "system:serviceaccount:garden:gardener-acl"` },
    ]);
    expect(webhook).toEqual(expected.webhooks[0]);
    expect(objects.filter((o) => o.kind === 'Secret')).toHaveLength(0);
  });
});

describe('no certificate is made at render time (issue 11 point 4)', () => {
  // gardenlet re-renders the seed chart often and gardener-operator renders the admission chart
  // twice; any render-time CA would differ between renders.
  const runtimeInjected = { gardener: { runtimeCluster: { priorityClassName: 'gardener-garden-system-400' }, virtualCluster: { enabled: true, namespace: 'extension-admission-acl' } } };
  const virtualInjected = { gardener: { virtualCluster: { enabled: true, serviceAccount: { name: 'extension-admission-acl', namespace: 'kube-system' } } } };
  it.each([
    ['seed chart', SEED_CHART, {}],
    ['admission chart', ADMISSION_CHART, {}],
    ['admission chart, operator runtime render', ADMISSION_CHART, runtimeInjected],
    ['admission chart, operator virtual-garden render', ADMISSION_CHART, virtualInjected],
  ])('%s: two renders are byte-identical and carry no certificate or key', async (_name, chart, values) => {
    const render = async () => (await helm(['template', 'gardener-acl', chart, '--namespace', 'garden', ...Object.keys(values).length > 0 ? ['--set-json', `gardener=${JSON.stringify((values as { gardener: unknown }).gardener)}`] : []])).stdout;
    const [first, second] = [await render(), await render()];
    expect(first.length).toBeGreaterThan(1000);
    expect(second).toBe(first);
    expect(first).not.toMatch(/BEGIN (CERTIFICATE|PRIVATE KEY|EC PRIVATE KEY)|caBundle:/);
  });
});

describe('admission chart rendering', () => {
  it('defaults (mode managed): the server keeps its certificates and registers itself, with exactly that RBAC', async () => {
    const objects = await renderChart(ADMISSION_CHART);
    expect(objects.filter((o) => o.kind === 'Secret' || o.kind === 'ValidatingWebhookConfiguration')).toEqual([]);
    expect(find(objects, 'ServiceAccount').automountServiceAccountToken).toBe(true);
    expect(find(objects, 'Role', 'gardener-acl-admission').rules).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['gardener-acl-admission-ca', 'gardener-acl-admission-tls'], verbs: ['get', 'patch'] },
    ]);
    expect(find(objects, 'ClusterRole', 'gardener-acl-admission').rules).toEqual([
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['validatingwebhookconfigurations'], verbs: ['create'] },
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['validatingwebhookconfigurations'], resourceNames: ['gardener-acl'], verbs: ['get', 'patch'] },
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], resourceNames: ['gardener-acl-admission'], verbs: ['get'] },
    ]);
    expect(podSpec(objects).template.spec.containers[0]?.args.slice(7)).toEqual([
      '--certificates-namespace=garden', '--certificates-name=gardener-acl-admission', '--service=gardener-acl-admission.garden:443',
      '--webhook-config-owner=gardener-acl-admission', '--timeout-seconds=10', '--ca-validity=30d', '--cert-validity=30d',
    ]);
  });

  it('mode secret: the ValidatingWebhookConfiguration of the webhook code; no token, no RBAC', async () => {
    const objects = await renderChart(ADMISSION_CHART, { webhook: { tls: { mode: 'secret', secretName: 'from-cert-manager', caBundle: TEST_CA } } });
    expect(objects.some((o) => o.kind.endsWith('Role') || o.kind.endsWith('RoleBinding'))).toBe(false);
    expect(find(objects, 'ServiceAccount').automountServiceAccountToken).toBe(false);
    const rendered = find(objects, 'ValidatingWebhookConfiguration') as unknown as { webhooks: { clientConfig: { caBundle: string } }[] };
    const ca = Buffer.from(rendered.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString();
    expect(rendered.webhooks).toEqual((validatingWebhookConfiguration({ target: { service: { name: 'gardener-acl-admission', namespace: 'garden', port: 443 } }, caBundlePem: ca }) as { webhooks: unknown[] }).webhooks);
    expect(podSpec(objects).template.spec.containers[0]?.args.slice(0, 2)).toEqual(['webhook', '--webhooks=shoot']);
  });

  it('webhook.garden.enabled true in a plain install: the server also validates Gardens and registers gardener-acl-garden with its own ClusterRole', async () => {
    const objects = await renderChart(ADMISSION_CHART, { webhook: { garden: { enabled: true } } });
    expect(find(objects, 'ClusterRole', 'gardener-acl-admission').rules).toContainEqual({
      apiGroups: ['admissionregistration.k8s.io'], resources: ['validatingwebhookconfigurations'], resourceNames: ['gardener-acl', 'gardener-acl-garden'], verbs: ['get', 'patch'],
    });
    const args = podSpec(objects).template.spec.containers[0]?.args ?? [];
    expect(args[1]).toBe('--webhooks=shoot,garden');
    expect(args).toContain('--garden-service=gardener-acl-admission.garden:443');
    expect(args).toContain('--garden-webhook-config-owner=gardener-acl-admission');
  });

  it('virtual-garden release: only the registration, by URL', async () => {
    const ca = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    const objects = await renderChart(ADMISSION_CHART, {
      server: { enabled: false },
      webhook: { registration: { mode: 'url', url: 'https://gardener-acl-admission.garden.svc' }, tls: { mode: 'secret', secretName: 'admission-tls', caBundle: ca } },
    });
    expect(objects.map((o) => o.kind)).toEqual(['ValidatingWebhookConfiguration']);
    expect((find(objects, 'ValidatingWebhookConfiguration') as unknown as { webhooks: { clientConfig: unknown }[] }).webhooks[0]?.clientConfig).toEqual({
      url: 'https://gardener-acl-admission.garden.svc/validate-shoot',
      caBundle: Buffer.from(ca).toString('base64'),
    });
  });
});

describe('admission chart with the reference extension’s admission values', () => {
  it('maxAllowedCIDRs and replicaCount mean the same as config.maxCIDRs and replicas', async () => {
    const objects = await renderChart(ADMISSION_CHART, { maxAllowedCIDRs: 20, replicaCount: 3 });
    const configYaml = (find(objects, 'ConfigMap').data as Record<string, string>)['config.yaml'] ?? '';
    const parsed = parseOperatorConfig(parseYaml(configYaml));
    expect(parsed.ok && parsed.config.maxCIDRs).toBe(20);
    expect(podSpec(objects).replicas).toBe(3);
    expect(find(objects, 'PodDisruptionBudget').spec).toMatchObject({ maxUnavailable: 2 });
  });
});

describe('admission chart as gardener-operator renders it (values of `registration --operator` plus what the operator injects)', () => {
  const ca = TEST_CA;
  const operatorValues = (admissionTls?: { caBundle: string; secretName: string }) =>
    (operatorExtension({
      name: 'acl', policy: 'OnDemand', values: {}, chartRef: 'ghcr.io/o/c:1', admissionChartRef: 'ghcr.io/o/a:1',
      admissionNamespace: 'garden', ...(admissionTls ? { admissionTls } : {}),
    }) as { spec: { deployment: { admission: { values: Record<string, unknown> } } } }).spec.deployment.admission.values;
  const values = operatorValues({ caBundle: ca, secretName: 'gardener-acl-admission-tls' });
  const managed = operatorValues();
  // pkg/operator/controller/extension/extension/admission/admission.go of gardener/gardener.
  const runtimeInjected = { gardener: { runtimeCluster: { priorityClassName: 'gardener-garden-system-400' }, virtualCluster: { enabled: true, namespace: 'extension-admission-acl' } } };
  const virtualInjected = { gardener: { virtualCluster: { enabled: true, serviceAccount: { name: 'extension-admission-acl', namespace: 'kube-system' } } } };

  it('mode managed, runtime-cluster render: the server registers itself by URL in the virtual garden (GARDEN_KUBECONFIG) and the Garden webhook in the runtime cluster; it may keep its two Secrets', async () => {
    const objects = await renderChart(ADMISSION_CHART, { ...managed, ...runtimeInjected });
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ClusterRole/gardener-acl-admission-garden', 'ClusterRoleBinding/gardener-acl-admission-garden',
      'ConfigMap/gardener-acl-admission-config', 'Deployment/gardener-acl-admission', 'PodDisruptionBudget/gardener-acl-admission', 'Role/gardener-acl-admission',
      'RoleBinding/gardener-acl-admission', 'Service/gardener-acl-admission', 'ServiceAccount/gardener-acl-admission',
    ]);
    const args = podSpec(objects).template.spec.containers[0]?.args;
    expect(args?.[1]).toBe('--webhooks=shoot,garden');
    expect(args).toContain('--register-url=https://gardener-acl-admission.garden.svc');
    expect(args).toContain('--garden-service=gardener-acl-admission.garden:443');
    expect(args).toContain('--garden-webhook-config-owner=gardener-acl-admission-garden');
    // Exactly what the certificate manager sends for gardener-acl-garden, in the runtime cluster.
    expect(find(objects, 'ClusterRole', 'gardener-acl-admission-garden').rules).toEqual([
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['validatingwebhookconfigurations'], verbs: ['create'] },
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['validatingwebhookconfigurations'], resourceNames: ['gardener-acl-garden'], verbs: ['get', 'patch'] },
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], resourceNames: ['gardener-acl-admission-garden'], verbs: ['get'] },
    ]);
    expect(find(objects, 'ClusterRoleBinding', 'gardener-acl-admission-garden').subjects).toEqual([{ kind: 'ServiceAccount', name: 'gardener-acl-admission', namespace: 'garden' }]);
  });

  it('webhook.garden.enabled false: the runtime render has no Garden webhook', async () => {
    const objects = await renderChart(ADMISSION_CHART, { ...managed, ...runtimeInjected, webhook: { ...(managed['webhook'] as object), garden: { enabled: false } } });
    expect(objects.some((o) => o.metadata.name === 'gardener-acl-admission-garden')).toBe(false);
    const args = podSpec(objects).template.spec.containers[0]?.args ?? [];
    expect(args[1]).toBe('--webhooks=shoot');
    expect(args.some((a) => a.startsWith('--garden-'))).toBe(false);
  });

  it('mode managed, virtual-garden render: no registration, only the rights of the ServiceAccount gardener-operator gives the server there', async () => {
    const objects = await renderChart(ADMISSION_CHART, { ...managed, ...virtualInjected }, 'extension-admission-acl');
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['ClusterRole/gardener-acl-admission', 'ClusterRoleBinding/gardener-acl-admission']);
    expect(find(objects, 'ClusterRoleBinding').subjects).toEqual([{ kind: 'ServiceAccount', name: 'extension-admission-acl', namespace: 'kube-system' }]);
  });

  it('mode secret, runtime-cluster render: the server with the operator’s priority class, no Shoot registration, no Secret of its own; the Garden webhook of the webhook code, by the Service', async () => {
    const objects = await renderChart(ADMISSION_CHART, { ...values, ...runtimeInjected });
    expect(objects.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Service', 'ServiceAccount', 'ValidatingWebhookConfiguration']);
    expect((podSpec(objects).template.spec as unknown as { priorityClassName: string }).priorityClassName).toBe('gardener-garden-system-400');
    const rendered = find(objects, 'ValidatingWebhookConfiguration', 'gardener-acl-garden') as unknown as { webhooks: unknown[] };
    expect(rendered.webhooks).toEqual((gardenWebhookConfiguration({ target: { service: { name: 'gardener-acl-admission', namespace: 'garden', port: 443 } }, caBundlePem: ca }) as { webhooks: unknown[] }).webhooks);
    expect(podSpec(objects).template.spec.containers[0]?.args.slice(0, 2)).toEqual(['webhook', '--webhooks=shoot,garden']);
  });

  it('mode secret, virtual-garden render: only the registration, by URL to the runtime Service, trusting the same CA', async () => {
    const objects = await renderChart(ADMISSION_CHART, { ...values, ...virtualInjected }, 'extension-admission-acl');
    expect(objects.map((o) => o.kind)).toEqual(['ValidatingWebhookConfiguration']);
    expect((find(objects, 'ValidatingWebhookConfiguration') as unknown as { webhooks: { clientConfig: unknown }[] }).webhooks[0]?.clientConfig).toEqual({
      url: 'https://gardener-acl-admission.garden.svc/validate-shoot',
      caBundle: Buffer.from(ca).toString('base64'),
    });
  });

  it('mode managed in a plain install whose registration lives in another cluster is refused with the fix', async () => {
    const result = await helm(['template', 'gardener-acl-admission', ADMISSION_CHART, '--set', 'webhook.registerWebhook=false']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('webhook.tls.mode=managed registers the webhook from the server, in the cluster it runs in: set webhook.registerWebhook=true, or use webhook.tls.mode=secret');
  });
});

describe('the controller’s memory limit holds its V8 heap limit', () => {
  const controllerContainer = async (values: Record<string, unknown>) => {
    const objects = await renderChart(SEED_CHART, values);
    const container = podSpec(objects, 'gardener-acl').template.spec.containers[0] as Container & { env?: { name: string; value?: string }[]; resources: { limits?: { memory?: string } } };
    return { nodeOptions: container.env?.find((e) => e.name === 'NODE_OPTIONS')?.value, limit: container.resources.limits?.memory };
  };

  it('raised together, or the heap limit dropped, renders as given', async () => {
    expect(await controllerContainer({ 'resources.controller.limits.memory': '1Gi', 'controller.heap.maxOldSpaceMiB': 800 })).toEqual({ nodeOptions: '--max-old-space-size=800 --max-semi-space-size=2', limit: '1Gi' });
    expect(await controllerContainer({ 'controller.heap': null })).toEqual({ nodeOptions: undefined, limit: '768Mi' });
    expect(await controllerContainer({ 'resources.controller.limits': null })).toEqual({ nodeOptions: '--max-old-space-size=512 --max-semi-space-size=2', limit: undefined });
  });

  it.each([
    ['a heap raised alone', ['--set', 'controller.heap.maxOldSpaceMiB=2048'], "the controller's memory limit 768Mi (768 MiB) is below what its heap needs: controller.heap.maxOldSpaceMiB 2048 + 3 x maxSemiSpaceMiB 2 + 128 MiB for code and native memory = 2182 MiB; raise resources.controller.limits.memory (or the flat resources.limits.memory) or lower controller.heap"],
    ['the reference extension’s flat limit', ['--set', 'resources.limits.memory=200Mi'], "the controller's memory limit 200Mi (200 MiB) is below what its heap needs"],
    ['a limit in decimal units', ['--set', 'resources.controller.limits.memory=400M'], "the controller's memory limit 400M (381 MiB) is below what its heap needs"],
  ])('%s is refused with the fix', async (_name, args, message) => {
    const result = await helm(['template', 'gardener-acl', SEED_CHART, ...args]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(message);
  });
});

describe('the webhook’s memory limit holds its V8 heap limit', () => {
  it('a heap raised alone is refused with the fix; with the heap dropped the limit stays', async () => {
    const result = await helm(['template', 'gardener-acl', SEED_CHART, '--set', 'webhook.heap.maxOldSpaceMiB=400']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      "the webhook's memory limit 320Mi (320 MiB) is below what its heap needs: webhook.heap.maxOldSpaceMiB 400 + 3 x maxSemiSpaceMiB 2 + 128 MiB for code and native memory = 534 MiB; raise resources.webhook.limits.memory or lower webhook.heap",
    );
    const objects = await renderChart(SEED_CHART, { 'webhook.heap': null });
    const container = podSpec(objects, 'gardener-acl-webhook').template.spec.containers[0] as Container & { env?: unknown[]; resources: { limits?: { memory?: string } } };
    expect({ env: container.env, limit: container.resources.limits?.memory }).toEqual({ env: undefined, limit: '320Mi' });
  });
});

describe('invalid values are rejected by values.schema.json with the field named', () => {
  it.each([
    ['a typo at the top level', SEED_CHART, ['--set', 'replica=3'], "at '': additional properties 'replica' not allowed"],
    ['a CIDR that is not one', SEED_CHART, ['--set-json', 'config.additionalAllowedCIDRs=["10.0.0.0"]'], "at '/config/additionalAllowedCIDRs/0'"],
    ['maxCIDRs out of range', SEED_CHART, ['--set', 'config.maxCIDRs=5000'], "at '/config/maxCIDRs': maximum: got 5,000, want 1,000"],
    ['a header name with a space', SEED_CHART, ['--set-json', 'config.protectedHeaders=["X Bad"]'], "at '/config/protectedHeaders/0'"],
    ['a duration without unit', SEED_CHART, ['--set', 'controller.resyncPeriod=10'], "at '/controller/resyncPeriod'"],
    ['an unknown log level', SEED_CHART, ['--set', 'logLevel=verbose'], "at '/logLevel'"],
    ['webhook TLS from a Secret without its CA', SEED_CHART, ['--set', 'webhook.tls.mode=secret', '--set', 'webhook.tls.secretName=x'], "at '/webhook/tls/caBundle'"],
    ['zero replicas', SEED_CHART, ['--set', 'replicas=0'], "at '/replicas': minimum: got 0, want 1"],
    ['admission URL mode without https URL', ADMISSION_CHART, ['--set', 'webhook.registration.mode=url', '--set', 'webhook.registration.url=http://x'], "at '/webhook/registration/url'"],
    ['a Garden webhook switch that is neither auto nor true or false', ADMISSION_CHART, ['--set', 'webhook.garden.enabled=yes'], "at '/webhook/garden/enabled'"],
  ])('%s', async (_name, chart, args, message) => {
    const result = await helm(['template', 'gardener-acl', chart, ...args]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema(s)");
    expect(result.stderr).toContain(message);
  });
});
