// `gardener-acl render` as a user runs it: a generated seed directory of N ACL shoots x M CIDRs
// (one YAML file per shoot, test/support/generated-seed.ts) rendered to a file as YAML and as JSON,
// each by its own `node --import tsx src/cli/main.ts render` process with Node's default limits:
// wall time (process start to exit) and peak RSS (the process's own maxRSS, read as it exits).
// Issue 34 item 9 asks for 1,000 x 50 as YAML under 256 MiB.
// usage: npx tsx bench/render-command.ts [shoots=1000] [cidrs=50]
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { writeGeneratedSeed } from '../test/support/generated-seed.js';

const RESULT_MARK = 'render-command-bench:';
const LIMIT_MIB = 256;

if (process.argv[2] === '--child') {
  // The command runs in this process as main.ts runs it; its peak RSS is reported on stderr at exit.
  process.on('exit', () => writeSync(2, `\n${RESULT_MARK}${JSON.stringify({ peakRss: process.resourceUsage().maxRSS * 1024 })}\n`));
  const main = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
  process.argv = [process.argv[0] ?? process.execPath, main, ...process.argv.slice(3)];
  await import('../src/cli/main.js');
} else {
  const shoots = Number(process.argv[2] ?? 1000);
  const cidrs = Number(process.argv[3] ?? 50);
  const dir = mkdtempSync(path.join(tmpdir(), 'acl-render-command-bench-'));
  try {
    await writeGeneratedSeed(path.join(dir, 'seed'), shoots, cidrs);
    const run = (format: 'yaml' | 'json') => {
      const file = path.join(dir, `render.${format}`);
      const out = openSync(file, 'w');
      const started = performance.now();
      const child = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', 'render', '-o', format, path.join(dir, 'seed')], {
        stdio: ['ignore', out, 'pipe'],
        encoding: 'utf8',
        maxBuffer: 16 << 20,
      });
      const ms = performance.now() - started;
      closeSync(out);
      const mark = child.stderr.split('\n').find((line) => line.startsWith(RESULT_MARK));
      if (child.status !== 0 || !mark) throw new Error(`render -o ${format} failed (exit ${child.status ?? child.signal}): ${child.stderr.slice(-2000)}`);
      const { peakRss } = JSON.parse(mark.slice(RESULT_MARK.length)) as { peakRss: number };
      return { ms, peakRss, bytes: statSync(file).size };
    };
    const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
    console.log(`gardener-acl render as a command: ${shoots} ACL shoots x ${cidrs} CIDRs (${shoots} files), node --import tsx src/cli/main.ts render -o FORMAT DIR > file, Node ${process.version} defaults`);
    for (const format of ['yaml', 'json'] as const) {
      const { ms, peakRss, bytes } = run(format);
      console.log(`  ${format.toUpperCase().padEnd(5)} ${(ms / 1000).toFixed(1)} s, peak RSS ${mib(peakRss)}${peakRss >= LIMIT_MIB * 1024 * 1024 ? ` (over ${LIMIT_MIB} MiB)` : ''}, ${mib(bytes)} written`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
