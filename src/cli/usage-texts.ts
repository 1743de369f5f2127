// The command listing and the usage texts, in a module that imports nothing heavy: `--help` and
// `completion` read them without loading what the commands run on (@kubernetes/client-node,
// fastify, pino, ...). The command modules re-export their text from here.
import { CONTROLLER_FLAGS } from './controller-flags.js';
import { EXPLAIN_FLAGS } from './explain-flags.js';
import { GARDEN_CONTROLLER_FLAGS } from './garden-controller-flags.js';
import { flagLines } from './flag-table.js';
import { VERIFY_FLAGS } from './verify-flags.js';
import { REGISTRATION_FLAGS } from './registration-flags.js';
import { WEBHOOK_CONFIG_FLAGS, WEBHOOK_FLAGS } from './webhook-flags.js';

/** Every command, in the order `--help` lists them; main dispatches each, completion offers each. */
export const COMMANDS = [
  { name: 'render', summary: "print the EnvoyFilters for a seed's objects (offline)" },
  { name: 'explain', summary: "why a client is admitted or refused on each path into a shoot's control plane" },
  { name: 'verify', summary: "whether a gateway's Envoy serves every ACL shoot's protection (its config dump)" },
  { name: 'validate', summary: "check Shoot manifests' acl providerConfig offline, as the admission webhook does" },
  { name: 'controller', summary: 'run the extension controller on a seed' },
  { name: 'garden-controller', summary: "run the controller that protects the virtual garden's API server (runtime cluster)" },
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
       gardener-acl explain --garden --client IP [--peer IP] [--output text|json] [--config operator.yaml]
                           (PATH... | --kubeconfig PATH [--virtual-garden-kubeconfig PATH])

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
With --garden: the virtual garden's API server instead, on every chain of its Gateway, with the
rule of the Garden's acl entry and the ranges the garden controller always admits (the runtime
cluster's nodes and pods from the Garden, every ManagedSeed's egress from its Shoot, the
operator's additional ones); PATHs hold kubectl get -o yaml of the runtime cluster (garden,
gateway, deployment) and of the virtual garden (managedseeds and shoots in namespace garden), or
--kubeconfig reads the runtime cluster and --virtual-garden-kubeconfig the virtual garden live.
Exit codes: 0 every listed path admits, 1 some path refuses, 2 invalid input, 3 every path
admits but some only because the rule is in audit mode (enforce would refuse there).

${flagLines(EXPLAIN_FLAGS, 31)}`;

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
through the API server's port-forward to Envoy's admin port, as the controller does (needs pods
list and pods/portforward create), one report per pod.
A config dump, from
  kubectl exec -n istio-ingress deploy/istio-ingressgateway -- pilot-agent request GET config_dump
  or istioctl proxy-config all <pod>.istio-ingress -o json
and an admin URL, after
  kubectl port-forward -n istio-ingress deploy/istio-ingressgateway 15000   (--admin-url http://127.0.0.1:15000)
The seed is read as by explain: from files (without PATH the embedded example seed) or, with
--kubeconfig, from the live seed (each Extension's applied ACL).
Exit codes: 0 every path that exists is served with the shoot's filter (paths the gateway does
not serve are listed), 1 some path serves a shoot without its filter or refuses it whole,
2 invalid input, or (live) some pod could not be read.

${flagLines(VERIFY_FLAGS, 31)}`;

export const CONTROLLER_USAGE = `usage: gardener-acl controller [options]

Runs the extension controller for Extensions of type acl on a seed.

${flagLines(CONTROLLER_FLAGS, 36)}`;

export const GARDEN_CONTROLLER_USAGE = `usage: gardener-acl garden-controller [options]

Runs the controller for the garden-class Extension of type acl (garden/garden-acl, written by
gardener-operator from the Garden's spec.extensions) in the runtime cluster: it protects the
virtual garden's kube-apiserver on its ingress gateway (every host of the Gateway
garden/virtual-garden-kube-apiserver), always admitting the runtime cluster's nodes and pods and
the egress of every ManagedSeed's shoot, read from the virtual garden.

${flagLines(GARDEN_CONTROLLER_FLAGS, 36)}`;

export const REGISTRATION_USAGE = `usage: gardener-acl registration [options]

Prints what a Gardener operator applies to install the extension: a ControllerRegistration
(Extension type acl) and a ControllerDeployment (core.gardener.cloud/v1) carrying the seed chart
as helm.rawChart (packed here, deterministically; Helm is not needed). With --operator, prints
a gardener-operator Extension (operator.gardener.cloud/v1alpha1) instead, which refers to the
charts pushed to an OCI registry.

${flagLines(REGISTRATION_FLAGS, 34)}
Exit codes: 0 ok, 2 invalid input.`;

export const WEBHOOK_USAGE = `usage: gardener-acl webhook [options]

Serves the admission webhooks over HTTPS: /mutate-envoyfilter (seed) and /validate-shoot (garden).

${flagLines(WEBHOOK_FLAGS, 31)}`;

export const WEBHOOK_CONFIG_USAGE = `usage: gardener-acl webhook-config (--url URL | --service NAME.NAMESPACE[:PORT]) --ca-bundle-file PATH [options]

Prints the MutatingWebhookConfiguration and ValidatingWebhookConfiguration as YAML.

${flagLines(WEBHOOK_CONFIG_FLAGS, 31)}`;

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
  'garden-controller': async () => GARDEN_CONTROLLER_USAGE,
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
