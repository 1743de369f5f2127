// The command listing and the usage texts, in a module that imports nothing heavy: `--help` and
// `completion` read them without loading what the commands run on (@kubernetes/client-node,
// fastify, pino, ...). The command modules re-export their text from here.
import { CONTROLLER_DEFAULTS } from '../actuator/controller-defaults.js';

/** Every command, in the order `--help` lists them; main dispatches each, completion offers each. */
export const COMMANDS = [
  { name: 'render', summary: "print the EnvoyFilters for a seed's objects (offline)" },
  { name: 'explain', summary: "why a client is admitted or refused on each path into a shoot's control plane" },
  { name: 'verify', summary: "whether a gateway's Envoy serves every ACL shoot's protection (its config dump)" },
  { name: 'validate', summary: "check Shoot manifests' acl providerConfig offline, as the admission webhook does" },
  { name: 'controller', summary: 'run the extension controller on a seed' },
  { name: 'registration', summary: 'print the ControllerRegistration/ControllerDeployment (or gardener-operator Extension)' },
  { name: 'webhook', summary: 'serve the admission webhooks (EnvoyFilters on the seed, Shoots in the garden)' },
  { name: 'webhook-config', summary: 'print the webhook registration objects' },
  { name: 'completion', summary: 'print a bash or zsh completion script' },
  { name: 'version', summary: 'print the version' },
] as const;

export type CommandName = (typeof COMMANDS)[number]['name'];

export function isCommandName(word: string | undefined): word is CommandName {
  return COMMANDS.some((c) => c.name === word);
}

export const EXPLAIN_USAGE = `usage: gardener-acl explain [--shoot ID] --client IP [--peer IP] [--path api|connect|observability|legacy]
                           [--header 'Name: value']... [--output text|json]
                           [--kubeconfig PATH] [--config operator.yaml] [--always-allowed CIDR]... [PATH...]

Prints, for every path into the shoot's control plane and every gateway, whether the client is
admitted and why: the ALLOW/DENY or always-allowed range that decided, or that none matched.
--client is the address Envoy sees as remote (the PROXY-protocol source when the seed's load
balancer sends one); --peer the physical peer, for direct_remote_ip rules (default: --client).
--header gives a concrete CONNECT request (repeat it for several headers): the verdict then
names every shoot the request targets and the header form that targets it.
The seed is read from files (like render; without PATH the embedded example seed) or, with
--kubeconfig, from the live seed (the objects the controller reads; --config names the
operator configuration file the controller runs with, default values otherwise).
A Shoot manifest (core.gardener.cloud) among the PATHs stands for its shoot's ACL as written in the
garden, before it is applied: with the seed's objects (files, or --kubeconfig with only manifests
as PATHs) its acl providerConfig replaces what the seed holds; alone, it is explained on a seed
with one gateway, the shoot's own node range and the always-allowed ranges given with
--always-allowed (the seed's nodes and pods, the shoot's egress, the operator's additional ones).
--shoot defaults to the one manifest's technical ID (shoot--<project>--<name>).
--client and --peer may carry a port, as copied from an access log (203.0.113.9:443,
[2001:db8::1]:443); it does not change the verdict.
Exit codes: 0 every listed path admits, 1 some path refuses, 2 invalid input, 3 every path
admits but some only because the rule is in audit mode (enforce would refuse there).`;

export const VERIFY_USAGE = `usage: gardener-acl verify --kubeconfig PATH [--gateway NAMESPACE] [--shoot ID]... [--output text|json]
       gardener-acl verify (--config-dump FILE | --admin-url URL) [--gateway NAMESPACE]
                          [--shoot ID]... [--output text|json]
                          [--kubeconfig PATH | [--config operator.yaml] [PATH...]]

Answers, for one ingress gateway, whether every ACL shoot's protection is served: judged on what
the gateway's Envoy holds, not on what is stored. An EnvoyFilter whose match no longer finds its
listener, chain or filter is accepted by Istio and does nothing; verify finds every chain that
serves a shoot's host or forwards to its control plane, and every connection manager that routes
CONNECT by a protected header, and says where the shoot's filter is missing.
With --kubeconfig alone: the live seed, every ready pod of each gateway (or of --gateway) read
               through the API server's port-forward to Envoy's admin port, as the controller
               does (needs pods list and pods/portforward create), one report per pod.
--config-dump  the gateway Envoy's admin /config_dump as JSON ("-": stdin), e.g. from
               kubectl exec -n istio-ingress deploy/istio-ingressgateway -- pilot-agent request GET config_dump
               or istioctl proxy-config all <pod>.istio-ingress -o json
--admin-url    Envoy's admin address, e.g. http://127.0.0.1:15000 after
               kubectl port-forward -n istio-ingress deploy/istio-ingressgateway 15000
--gateway      the gateway's namespace (default: the seed's only gateway)
--shoot        check only these shoots (technical IDs)
The seed is read as by explain: from files (without PATH the embedded example seed) or, with
--kubeconfig, from the live seed (each Extension's applied ACL).
Exit codes: 0 every path that exists is served with the shoot's filter (paths the gateway does
not serve are listed), 1 some path serves a shoot without its filter or refuses it whole,
2 invalid input, or (live) some pod could not be read.`;

export const CONTROLLER_USAGE = `usage: gardener-acl controller [options]

Runs the extension controller for Extensions of type acl on a seed.

  --kubeconfig PATH                 kubeconfig (default: $KUBECONFIG, else in-cluster)
  --config PATH                     OperatorConfiguration YAML (default: built-in defaults)
  --leader-elect true|false         Lease leader election (default true)
  --leader-election-namespace NS    default: $LEADER_ELECTION_NAMESPACE or garden; the leader also
                                    renews Gardener's extension heartbeat Lease
                                    (gardener-extension-heartbeat) there
  --leader-election-id NAME         default: gardener-acl-leader-election
  --lease-duration DURATION         leader election lease duration (default 15s)
  --renew-deadline DURATION         leader gives up after failing to renew this long (default 10s)
  --retry-period DURATION           leader election retry period (default 2s)
  --probe-port PORT                 /healthz, /readyz, /metrics (default 8080)
  --cache-unready-after DURATION    /readyz fails while a cache has had no open watch this long
                                    (default 60s)
  --cache-unhealthy-after DURATION  /healthz fails (the kubelet restarts the container) when a
                                    cache has had no open watch this long (default 5m)
  --workers N                       concurrent reconciles (default ${CONTROLLER_DEFAULTS.workers})
  --resync-period DURATION          full resync (default ${CONTROLLER_DEFAULTS.resyncPeriod})
  --combined-min-interval DURATION  least time between two writes that change a CONNECT listener
                                    (rules and matcher forms: every write; ecds: its listener
                                    parts only); repairs never wait (default ${CONTROLLER_DEFAULTS.combinedMinInterval})
  --served-check-interval DURATION  every gateway pod's Envoy is read this often (through a port-forward
                                    to its admin port 15000) to check each ACL shoot's protection is
                                    served, not only stored; 0s turns the check off (the status then
                                    says stored only) (default ${CONTROLLER_DEFAULTS.servedCheckInterval})
  --served-check-max-read-mib N     largest read of one gateway pod (listeners and routes; a
                                    larger gateway is reported unchecked, not parsed); parsing
                                    takes about 2.3 times as much heap (default ${CONTROLLER_DEFAULTS.servedCheckMaxReadMiB})
  --graceful-shutdown-timeout DURATION  on SIGTERM, wait this long for reconciles in flight before
                                    the lease is released (default 30s)
  --log-level LEVEL                 trace|debug|info|warn|error (default info)

  --no-seed-webhook                 the seed webhook is not installed: the leader deletes the
                                    MutatingWebhookConfiguration gardener-acl an earlier install in
                                    managed mode made (only one with the certificate manager's labels)

Seed webhook certificates (the leader keeps them; off unless the namespace is given):
  --webhook-certificates-namespace NS  CA and serving certificate in Secrets gardener-acl-webhook-ca
                                    and gardener-acl-webhook-tls of NS (the webhook Pods mount the
                                    latter), renewed at 80 % of their lifetime; the caBundle of the
                                    MutatingWebhookConfiguration gardener-acl kept current
  --webhook-service NAME.NAMESPACE[:PORT]  the webhook's Service (default port 443)
  --webhook-url URL                 instead of --webhook-service: the URL the API server calls
  --webhook-config-owner CLUSTERROLE  owner of the configuration, so it goes with the installation
  --webhook-timeout-seconds N       1-30 (default 10)
  --controller-username USER        this controller's user; its writes of combined filters skip the webhook
  --webhook-ca-validity DURATION    default 30d
  --webhook-cert-validity DURATION  default 30d`;

export const REGISTRATION_USAGE = `usage: gardener-acl registration [options]

Prints what a Gardener operator applies to install the extension: a ControllerRegistration
(Extension type acl) and a ControllerDeployment (core.gardener.cloud/v1) carrying the seed chart
as helm.rawChart (packed here, deterministically; Helm is not needed). With --operator, prints
a gardener-operator Extension (operator.gardener.cloud/v1alpha1) instead, which refers to the
charts pushed to an OCI registry.

  --name NAME                     object names (default acl)
  --chart DIR                     seed chart directory (default: charts/gardener-acl of this installation)
  --image-repository REPO         image.repository value (with --operator: of the admission chart too)
  --image-tag TAG                 image.tag value (with --operator: of the admission chart too)
  --values FILE                   YAML map of further chart values (merged under the flags above)
  --policy POLICY                 OnDemand|Always|AlwaysExceptNoShoots (default OnDemand)
  --output yaml|json              (default yaml)
  --operator                      print the gardener-operator Extension
  --chart-ref REF                 --operator: OCI ref of the seed chart
  --admission-chart-ref REF       --operator: OCI ref of the admission chart
  --admission-namespace NS        --operator: runtime namespace of the admission server (default garden)
  --admission-values FILE         --operator: YAML map of admission chart values (the image flags
                                  above and the registration/TLS values are merged over it)
  --admission-ca-bundle FILE      --operator: PEM CA of an existing admission TLS Secret (e.g. from
                                  cert-manager); without it the admission server keeps its own
                                  certificates and registration (webhook.tls.mode managed)
  --admission-tls-secret NAME     --operator, with --admission-ca-bundle: kubernetes.io/tls Secret of
                                  the admission server (default gardener-acl-admission-tls)
Exit codes: 0 ok, 2 invalid input.`;

export const WEBHOOK_USAGE = `usage: gardener-acl webhook [options]

Serves the admission webhooks over HTTPS: /mutate-envoyfilter (seed) and /validate-shoot (garden).

  --webhooks LIST              envoyfilter,shoot (default both); envoyfilter needs seed access
  --kubeconfig PATH            seed kubeconfig for the caches (default: $KUBECONFIG, else in-cluster)
  --config PATH                OperatorConfiguration YAML (default: built-in defaults)
  --host ADDRESS               listen address (default 0.0.0.0)
  --port PORT                  HTTPS port (default 9443)
  --cert-dir DIR               tls.crt and tls.key, reloaded on change (default $TMPDIR/k8s-webhook-server/serving-certs)
  --cert-poll-interval DURATION  also re-read the pair this often (default 10s)
  --self-signed                generate a CA and serving certificate instead of reading --cert-dir
  --service NAME.NAMESPACE     Service the API server calls (SANs of the self-signed certificate)
  --ca-out PATH                write the self-signed CA (the caBundle) to PATH
  --probe-port PORT            plain HTTP /healthz, /readyz, /metrics (default 8081)
  --shutdown-delay DURATION    on SIGTERM, answer /readyz 503 and keep serving this long before the
                               listener closes, so the endpoint is unpublished while requests still
                               succeed (default 10s; keep it below terminationGracePeriodSeconds)
  --controller-username USER   the controller's authenticated user (e.g. system:serviceaccount:garden:gardener-acl);
                               its writes of combined filters pass unchanged, everyone else's are refused
  --log-level LEVEL            trace|debug|info|warn|error (default info)

Certificates managed in-process (e.g. the garden admission; every replica may run it):
  --certificates-namespace NS  CA and serving certificate in Secrets NAME-ca and NAME-tls of NS
                               (the --kubeconfig cluster), renewed at 80 % of their lifetime; the
                               stored pair is written into --cert-dir; the webhook configurations
                               (named gardener-acl) are created with a current caBundle
  --certificates-name NAME     default gardener-acl-admission
  --register-url URL           the URL the API server calls (instead of --service)
  --webhook-config-kubeconfig PATH  the API server whose configurations these are (default:
                               $GARDEN_KUBECONFIG, which gardener-operator injects, else --kubeconfig)
  --webhook-config-owner CLUSTERROLE  owner of the configurations there, so they go with the installation
  --timeout-seconds N          1-30 (default 10)
  --ca-validity DURATION       default 30d
  --cert-validity DURATION     default 30d`;

export const WEBHOOK_CONFIG_USAGE = `usage: gardener-acl webhook-config (--url URL | --service NAME.NAMESPACE[:PORT]) --ca-bundle-file PATH [options]

Prints the MutatingWebhookConfiguration and ValidatingWebhookConfiguration as YAML.

  --webhooks LIST              envoyfilter,shoot (default both)
  --timeout-seconds N          1-30 (default 10)
  --controller-username NAME   exempt this user's (the controller's) writes of combined filters
                               (the name the other commands use; --controller-user is accepted too)
  --legacy-proxy-port N        the legacy apiserver-proxy port whose Gardener filters the webhook
                               patches (OperatorConfiguration legacyProxyPort; default 8443)`;

export const COMPLETION_SHELLS = ['bash', 'zsh'] as const;

export const COMPLETION_USAGE = `usage: gardener-acl completion ${COMPLETION_SHELLS.join('|')}

Prints a script that completes gardener-acl's commands, each command's long flags (as its usage
text names them) and the values of flags that take one of a few words; other arguments complete
as file names.
  bash: source <(gardener-acl completion bash)   e.g. in ~/.bashrc
  zsh:  source <(gardener-acl completion zsh)    after compinit, e.g. in ~/.zshrc; or save it as
        _gardener-acl in a directory of $fpath
Exit codes: 0 ok, 2 invalid input.`;

/**
 * Each command's usage text (version has none). render's and validate's texts live in their
 * command modules, so those two (zod and yaml, no cluster or server libraries) are imported to
 * read them.
 */
const USAGES: Record<Exclude<CommandName, 'version'>, () => Promise<string>> = {
  render: async () => (await import('./render-command.js')).RENDER_USAGE,
  explain: async () => EXPLAIN_USAGE,
  verify: async () => VERIFY_USAGE,
  validate: async () => (await import('./validate-command.js')).VALIDATE_USAGE,
  controller: async () => CONTROLLER_USAGE,
  registration: async () => REGISTRATION_USAGE,
  webhook: async () => WEBHOOK_USAGE,
  'webhook-config': async () => WEBHOOK_CONFIG_USAGE,
  completion: async () => COMPLETION_USAGE,
};

/** The usage text of a command; undefined for one without (version). */
export async function commandUsage(command: CommandName): Promise<string | undefined> {
  return command === 'version' ? undefined : USAGES[command]();
}

/** What `gardener-acl --help` prints: the command listing, then every command's usage text. */
export async function mainUsage(): Promise<string> {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  const listing = COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`).join('\n');
  const usages = (await Promise.all(COMMANDS.map((c) => commandUsage(c.name)))).filter((u) => u !== undefined);
  return `usage: gardener-acl <command> [options]\n\ncommands:\n${listing}\n\n${usages.join('\n\n')}`;
}
