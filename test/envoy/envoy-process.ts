// Runs real Envoy processes for tests: start from a bootstrap object, wait until the listeners are
// bound, read the OS-assigned ports and the stats from the admin API, replace listeners at run time
// through file-based LDS, stop cleanly. Also `envoy --mode validate`.
//
// Several Envoys may run at once (parallel vitest workers): hot restart is disabled, so no shared
// memory base id is involved, and every port (admin and listeners) is port 0, picked by the kernel
// and read back from the admin API, so there is no "pick a free port, then bind it" race.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { findEnvoyBinary, type EnvoyVersion } from './envoy-binary.js';
import { cloneJson, getObject, getObjectList, getString, type JsonObject } from './json.js';
import { killOnExit } from '../support/child-processes.js';

export interface BoundAddress {
  host: string;
  port: number;
  family: 4 | 6;
}

export interface StartEnvoyOptions {
  /** Envoy bootstrap. Any `admin` section is replaced by the harness's own (127.0.0.1, port 0). */
  bootstrap: JsonObject;
  /**
   * Serve `static_resources.listeners` through file-based LDS instead, so that
   * `replaceListeners` can swap them without restarting Envoy (as Istio's xDS pushes do).
   */
  listenersViaFile?: boolean;
  /** Listeners that arrive through xDS (`dynamic_resources`): startEnvoy also waits until these are bound and warm. */
  awaitListeners?: readonly string[];
  logLevel?: 'trace' | 'debug' | 'info' | 'warning' | 'error';
  /** Envoy's `--drain-time-s`: how long replaced listeners/filter chains keep old connections. */
  drainTimeSeconds?: number;
  startTimeoutMs?: number;
  /** false: resolve once the admin API answers, without waiting for LIVE and the listeners (for tests of a server that may never get there). */
  awaitLive?: boolean;
  /** Which installed Envoy runs it (default: the version under test). */
  envoyVersion?: EnvoyVersion;
}

export interface ListenerUpdateResult {
  accepted: boolean;
  /** Envoy's log output written while the update was processed (the rejection reason, if any). */
  output: string;
}

export interface EnvoyInstance {
  readonly adminUrl: string;
  readonly pid: number;
  /** Every address a listener is bound to, keyed by listener name. */
  listenerAddresses(): Promise<Map<string, BoundAddress[]>>;
  /** The address of listener `name` (of the given IP family, if the listener has several). */
  boundAddress(listenerName: string, family?: 4 | 6): Promise<BoundAddress>;
  /** Counters and gauges whose name matches the RE2 `filter` (Envoy's `/stats?filter=`). */
  stats(filter?: string): Promise<Map<string, number>>;
  /** The value of one stat; throws if Envoy has no stat of that name (a misspelt name must not read as 0). */
  stat(name: string): Promise<number>;
  /**
   * Change runtime values through the admin API (`/runtime_modify`, needs an admin layer in the
   * bootstrap's layered_runtime), e.g. to flip `envoy.reloadable_features.*` guards between cases.
   */
  setRuntime(values: Readonly<Record<string, string | number | boolean>>): Promise<void>;
  /** Replace all listeners (only with `listenersViaFile`); resolves once Envoy accepted or rejected them. */
  replaceListeners(listeners: JsonObject[]): Promise<ListenerUpdateResult>;
  /** Everything Envoy has logged so far (bounded). */
  output(): string;
  stop(): Promise<void>;
}

const ADMIN_REQUEST_TIMEOUT_MS = 2_000;
const STOP_GRACE_MS = 5_000;
const LDS_UPDATE_TIMEOUT_MS = 10_000;
const POLL_INTERVAL_MS = 20;
const MAX_OUTPUT_CHARS = 256 * 1024;
const LISTENER_TYPE_URL = 'type.googleapis.com/envoy.config.listener.v3.Listener';


/** Keeps the last MAX_OUTPUT_CHARS of the process output, addressable by absolute position. */
class OutputTail {
  private text = '';
  private dropped = 0;
  append(chunk: string): void {
    this.text += chunk;
    const excess = this.text.length - MAX_OUTPUT_CHARS;
    if (excess > 0) {
      this.text = this.text.slice(excess);
      this.dropped += excess;
    }
  }
  /** Position just after everything appended so far. */
  get end(): number {
    return this.dropped + this.text.length;
  }
  all(): string {
    return this.text;
  }
  since(position: number): string {
    return this.text.slice(Math.max(0, position - this.dropped));
  }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Calls `probe` until it returns a value; throws after `timeoutMs` (or as soon as `probe` throws). */
export async function pollUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(POLL_INTERVAL_MS);
  }
}

async function adminGet(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(ADMIN_REQUEST_TIMEOUT_MS) });
  return { status: response.status, body: await response.text() };
}

const socketAddressSchema = z.object({
  socket_address: z.object({ address: z.string(), port_value: z.number().optional() }).optional(),
});
const listenersResponseSchema = z.object({
  listener_statuses: z
    .array(
      z.object({
        name: z.string(),
        local_address: socketAddressSchema.optional(),
        additional_local_addresses: z.array(socketAddressSchema).optional(),
      }),
    )
    .optional(),
});
const statsResponseSchema = z.object({ stats: z.array(z.record(z.string(), z.unknown())) });

function toBoundAddress(address: z.infer<typeof socketAddressSchema> | undefined): BoundAddress | undefined {
  const socket = address?.socket_address;
  if (socket?.port_value === undefined || socket.port_value === 0) return undefined;
  return { host: socket.address, port: socket.port_value, family: socket.address.includes(':') ? 6 : 4 };
}

/** Names of the listeners that bind an address (an internal listener binds none: nothing to wait for). */
function listenerNames(listeners: JsonObject[]): string[] {
  return listeners.filter((listener) => listener['internal_listener'] === undefined).map((listener) => {
    const name = getString(listener, 'name');
    if (name === undefined) throw new Error('every listener needs a name (the harness looks ports up by name)');
    return name;
  });
}

function ldsDocument(version: number, listeners: JsonObject[]): string {
  const resources = listeners.map((listener) => ({ '@type': LISTENER_TYPE_URL, ...listener }));
  return JSON.stringify({ version_info: String(version), resources }, null, 2);
}

interface PreparedBootstrap {
  bootstrap: JsonObject;
  fileListeners: JsonObject[] | undefined;
  expectedListeners: string[];
}

function prepareBootstrap(options: StartEnvoyOptions, ldsPath: string, ldsDir: string): PreparedBootstrap {
  const bootstrap = cloneJson(options.bootstrap);
  bootstrap['admin'] = { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } };
  if (bootstrap['node'] === undefined) bootstrap['node'] = { id: 'gardener-acl-test', cluster: 'gardener-acl-test' };
  const staticResources = getObject(bootstrap, 'static_resources') ?? {};
  const listeners = getObjectList(staticResources, 'listeners');
  if (options.listenersViaFile !== true) {
    return { bootstrap, fileListeners: undefined, expectedListeners: [...listenerNames(listeners), ...(options.awaitListeners ?? [])] };
  }
  delete staticResources['listeners'];
  bootstrap['static_resources'] = staticResources;
  // watched_directory + atomic rename is the documented way to update a path config source.
  bootstrap['dynamic_resources'] = {
    lds_config: {
      resource_api_version: 'V3',
      path_config_source: { path: ldsPath, watched_directory: { path: ldsDir } },
    },
  };
  return { bootstrap, fileListeners: listeners, expectedListeners: listenerNames(listeners) };
}

class RunningEnvoy implements EnvoyInstance {
  /** How the process ended ("code 1", "signal SIGKILL"); undefined while it runs. */
  private exitStatus: string | undefined = undefined;
  private readonly exited: Promise<void>;
  private ldsVersion = 1;
  private expectedListeners: string[] = [];
  adminUrl = '';

  constructor(
    private readonly child: ChildProcess,
    private readonly workDir: string,
    private readonly ldsPath: string | undefined,
    private readonly log: OutputTail,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitStatus = code === null ? `signal ${String(signal)}` : `code ${code}`;
        resolve();
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  private failIfExited(what: string): void {
    if (this.exitStatus !== undefined) {
      throw new Error(`Envoy exited (${this.exitStatus}) while ${what}. Output:\n${this.log.all()}`);
    }
  }

  async waitUntilServing(adminAddressPath: string, expectedListeners: string[], timeoutMs: number, awaitLive = true): Promise<void> {
    this.expectedListeners = expectedListeners;
    const deadline = Date.now() + timeoutMs;
    const remaining = (): number => Math.max(0, deadline - Date.now());
    const adminAddress = await pollUntil('the admin address file', remaining(), async () => {
      this.failIfExited('starting');
      if (!existsSync(adminAddressPath)) return undefined;
      const text = (await readFile(adminAddressPath, 'utf8')).trim();
      return text === '' ? undefined : text;
    });
    this.adminUrl = `http://${adminAddress}`;
    if (!awaitLive) return;
    await pollUntil('/ready to report LIVE', remaining(), async () => {
      this.failIfExited('initialising');
      const ready = await adminGet(`${this.adminUrl}/ready`).catch(() => undefined);
      return ready?.status === 200 ? true : undefined;
    });
    await this.waitForListeners(remaining());
  }

  /** Every expected listener bound and nothing warming: only then do connections reach the new config. */
  private async waitForListeners(timeoutMs: number): Promise<void> {
    // Envoy's log says why a listener is missing (an update it rejected); a bare timeout does not.
    const waited = pollUntil(`listeners ${this.expectedListeners.join(', ')} to be bound`, timeoutMs, async () => {
      this.failIfExited('binding listeners');
      const bound = await this.listenerAddresses();
      if (!this.expectedListeners.every((name) => (bound.get(name)?.length ?? 0) > 0)) return undefined;
      const warming = (await this.stats('^listener_manager\\.total_listeners_warming$')).get(
        'listener_manager.total_listeners_warming',
      );
      return warming === 0 ? true : undefined;
    });
    await waited.catch((error: unknown) => {
      throw new Error(`${error instanceof Error ? error.message : String(error)}\nEnvoy's log (tail):\n${this.log.all().slice(-4_000)}`);
    });
  }

  async listenerAddresses(): Promise<Map<string, BoundAddress[]>> {
    const response = await adminGet(`${this.adminUrl}/listeners?format=json`);
    const parsed = listenersResponseSchema.parse(JSON.parse(response.body));
    const result = new Map<string, BoundAddress[]>();
    for (const status of parsed.listener_statuses ?? []) {
      const addresses = [status.local_address, ...(status.additional_local_addresses ?? [])]
        .map(toBoundAddress)
        .filter((address): address is BoundAddress => address !== undefined);
      result.set(status.name, addresses);
    }
    return result;
  }

  async boundAddress(listenerName: string, family?: 4 | 6): Promise<BoundAddress> {
    const addresses = (await this.listenerAddresses()).get(listenerName) ?? [];
    const match = addresses.find((address) => family === undefined || address.family === family);
    if (match === undefined) {
      throw new Error(
        `listener ${listenerName} has no bound ${family === undefined ? '' : `IPv${family} `}address ` +
          `(bound: ${JSON.stringify(addresses)})`,
      );
    }
    return match;
  }

  async stats(filter?: string): Promise<Map<string, number>> {
    const query = filter === undefined ? '' : `&filter=${encodeURIComponent(filter)}`;
    const response = await adminGet(`${this.adminUrl}/stats?format=json${query}`);
    const result = new Map<string, number>();
    for (const entry of statsResponseSchema.parse(JSON.parse(response.body)).stats) {
      const name = entry['name'];
      const value = entry['value'];
      if (typeof name === 'string' && typeof value === 'number') result.set(name, value);
    }
    return result;
  }

  async stat(name: string): Promise<number> {
    const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const value = (await this.stats(`^${escaped}$`)).get(name);
    if (value === undefined) {
      const similar = [...(await this.stats(name.split('.').slice(-2).join('\\.'))).keys()].slice(0, 20);
      throw new Error(`Envoy has no stat ${name}; stats with a similar suffix: ${similar.join(', ') || '(none)'}`);
    }
    return value;
  }

  async setRuntime(values: Readonly<Record<string, string | number | boolean>>): Promise<void> {
    const query = new URLSearchParams(Object.entries(values).map(([key, value]): [string, string] => [key, String(value)]));
    const response = await fetch(`${this.adminUrl}/runtime_modify?${query.toString()}`, {
      method: 'POST',
      signal: AbortSignal.timeout(ADMIN_REQUEST_TIMEOUT_MS),
    });
    const body = await response.text();
    if (response.status !== 200) throw new Error(`runtime_modify failed (${response.status}): ${body}`);
  }

  async replaceListeners(listeners: JsonObject[]): Promise<ListenerUpdateResult> {
    if (this.ldsPath === undefined) throw new Error('replaceListeners needs startEnvoy({ listenersViaFile: true })');
    const counters = async (): Promise<{ success: number; rejected: number }> => {
      const stats = await this.stats('^listener_manager\\.lds\\.update_(success|rejected|failure)$');
      return {
        success: stats.get('listener_manager.lds.update_success') ?? 0,
        rejected:
          (stats.get('listener_manager.lds.update_rejected') ?? 0) +
          (stats.get('listener_manager.lds.update_failure') ?? 0),
      };
    };
    const before = await counters();
    const logPosition = this.log.end;
    this.ldsVersion += 1;
    await writeAtomically(this.ldsPath, ldsDocument(this.ldsVersion, listeners));
    const accepted = await pollUntil('Envoy to accept or reject the new listeners', LDS_UPDATE_TIMEOUT_MS, async () => {
      this.failIfExited('updating listeners');
      const now = await counters();
      if (now.success > before.success) return true;
      return now.rejected > before.rejected ? false : undefined;
    });
    if (accepted) {
      this.expectedListeners = listenerNames(listeners);
      await this.waitForListeners(LDS_UPDATE_TIMEOUT_MS);
    }
    return { accepted, output: this.log.since(logPosition) };
  }

  output(): string {
    return this.log.all();
  }

  async stop(): Promise<void> {
    if (this.exitStatus === undefined) {
      this.child.kill('SIGTERM');
      const graceful = await Promise.race([this.exited.then(() => true), sleep(STOP_GRACE_MS).then(() => false)]);
      if (!graceful) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
    }
    await rm(this.workDir, { recursive: true, force: true });
  }
}

// Rename is atomic within a directory, so Envoy never reads a half-written file.
async function writeAtomically(path: string, content: string): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, content);
  await rename(temporary, path);
}

/** Starts Envoy and resolves once it is LIVE and every listener is bound. */
export async function startEnvoy(options: StartEnvoyOptions): Promise<EnvoyInstance> {
  const binary = findEnvoyBinary(options.envoyVersion);
  const workDir = await mkdtemp(join(tmpdir(), 'gardener-acl-envoy-'));
  const ldsDir = join(workDir, 'lds');
  const ldsPath = join(ldsDir, 'listeners.json');
  const prepared = prepareBootstrap(options, ldsPath, ldsDir);
  if (prepared.fileListeners !== undefined) {
    await mkdir(ldsDir);
    await writeAtomically(ldsPath, ldsDocument(1, prepared.fileListeners));
  }
  const bootstrapPath = join(workDir, 'bootstrap.json');
  const adminAddressPath = join(workDir, 'admin-address');
  await writeFile(bootstrapPath, JSON.stringify(prepared.bootstrap, null, 2));

  const args = [
    '--config-path', bootstrapPath,
    '--admin-address-path', adminAddressPath,
    '--disable-hot-restart',
    '--concurrency', '1',
    '--log-level', options.logLevel ?? 'warning',
    '--drain-time-s', String(options.drainTimeSeconds ?? 1),
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  killOnExit(child);
  const log = new OutputTail();
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => log.append(chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => log.append(chunk));

  const envoy = new RunningEnvoy(child, workDir, prepared.fileListeners === undefined ? undefined : ldsPath, log);
  try {
    await envoy.waitUntilServing(adminAddressPath, prepared.expectedListeners, options.startTimeoutMs ?? 20_000, options.awaitLive);
  } catch (error) {
    await envoy.stop();
    throw error;
  }
  return envoy;
}

export interface ValidationResult {
  ok: boolean;
  output: string;
}

const VALIDATE_TIMEOUT_MS = 30_000;

/** `envoy --mode validate`: Envoy's own strict parsing of the whole bootstrap, without binding sockets. */
export async function validateConfig(bootstrap: JsonObject): Promise<ValidationResult> {
  const binary = findEnvoyBinary();
  const workDir = await mkdtemp(join(tmpdir(), 'gardener-acl-envoy-validate-'));
  try {
    const path = join(workDir, 'bootstrap.json');
    await writeFile(path, JSON.stringify(bootstrap, null, 2));
    const child = spawn(binary, ['--mode', 'validate', '--config-path', path, '--disable-hot-restart', '--log-level', 'warning'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), VALIDATE_TIMEOUT_MS);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    clearTimeout(timer);
    return { ok: code === 0, output };
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

