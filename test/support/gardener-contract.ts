// Runs tools/gardener/contract (gardener-contract, built by scripts/setup-gardener.sh): Gardener's
// own code — gardenlet's Extension deployer, its health checks, the resource manager's garbage
// collector, Gardener's API validation — against the test kube-apiserver or files.
import { execFile } from 'node:child_process';

import { z } from 'zod';

import { gardenerBin } from './gardener-resource-manager.js';

const StepResult = z.object({ step: z.string(), ok: z.boolean(), error: z.string().optional(), codes: z.array(z.string()).optional(), ms: z.number() });
export type StepResult = z.infer<typeof StepResult>;

export interface ContractRun {
  ok: boolean;
  steps: StepResult[];
  stderr: string;
  /** The step named `name`; throws if the run did not reach it. */
  step(name: string): StepResult;
}

export function runContract(args: string[], timeoutMs = 600_000): Promise<ContractRun> {
  const binary = gardenerBin('gardener-contract');
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        reject(new Error(`gardener-contract ${args.join(' ')}: ${err.message}\n${stderr}`));
        return;
      }
      const steps = stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => StepResult.parse(JSON.parse(line)));
      resolve({
        ok: !err && steps.every((s) => s.ok),
        steps,
        stderr,
        step(name) {
          const found = steps.find((s) => s.step === name);
          if (!found) throw new Error(`gardener-contract ${args.join(' ')} did not reach step ${name}: ${stdout}\n${stderr}`);
          return found;
        },
      });
    });
  });
}

export interface ExtensionSteps {
  kubeconfig: string;
  namespace: string;
  steps: ('deploy' | 'wait' | 'destroy' | 'wait-cleanup' | 'migrate' | 'wait-migrate' | 'restore')[];
  providerConfig?: unknown;
  /** gardenlet's defaults unless set: timeout 3m, interval 5s, severe threshold 30s. */
  timeout?: string;
  interval?: string;
  severeThreshold?: string;
}

/** Drives the Extension `acl` of one shoot through gardenlet's deployer, step by step. */
export function gardenletExtension(o: ExtensionSteps): Promise<ContractRun> {
  return extensionSteps(o, []);
}

/**
 * Drives the Garden's Extension `acl` as gardener-operator does: the same deployer with class
 * garden and the name prefix garden- in namespace garden (Extension garden/garden-acl), and the
 * same readiness check before the Garden's reconcile goes on.
 */
export function gardenOperatorExtension(o: Omit<ExtensionSteps, 'namespace'>): Promise<ContractRun> {
  return extensionSteps({ ...o, namespace: 'garden' }, ['--class=garden', '--name-prefix=garden-']);
}

function extensionSteps(o: ExtensionSteps, extra: readonly string[]): Promise<ContractRun> {
  const args = ['extension', `--kubeconfig=${o.kubeconfig}`, `--namespace=${o.namespace}`, `--steps=${o.steps.join(',')}`, ...extra];
  if (o.providerConfig !== undefined) args.push(`--provider-config=${JSON.stringify(o.providerConfig)}`);
  if (o.timeout) args.push(`--timeout=${o.timeout}`);
  if (o.interval) args.push(`--interval=${o.interval}`);
  if (o.severeThreshold) args.push(`--severe-threshold=${o.severeThreshold}`);
  return runContract(args);
}

/** gardenlet's health checks on the stored Extension and (optionally) a ManagedResource. */
export function gardenletHealth(kubeconfig: string, namespace: string, managedResource?: string): Promise<ContractRun> {
  const args = ['health', `--kubeconfig=${kubeconfig}`, `--namespace=${namespace}`];
  if (managedResource) args.push(`--managed-resource=${managedResource}`);
  return runContract(args);
}

/** One pass of the resource manager's garbage collector, sparing nothing for age. */
export function garbageCollectOnce(kubeconfig: string): Promise<ContractRun> {
  return runContract(['gc', `--kubeconfig=${kubeconfig}`]);
}

/** Gardener's strict decoding and API validation of the objects in `files`. */
export function validateWithGardener(files: string[]): Promise<ContractRun> {
  return runContract(['validate', ...files]);
}

/**
 * What gardenlet's shoot care makes of the Extension's ControlPlaneHealthy condition and the
 * extension's heartbeat Lease (HealthChecker.CheckExtensionCondition): ok, or the shoot's
 * condition as "<status> <reason>: <message>".
 */
export function gardenletCare(kubeconfig: string, namespace: string, heartbeatNamespace: string): Promise<ContractRun> {
  return runContract(['care', `--kubeconfig=${kubeconfig}`, `--namespace=${namespace}`, `--heartbeat-namespace=${heartbeatNamespace}`]);
}
