// Issue 34 item 9: a long `render` shows its progress on stderr (a bar of the ACL shoots redrawn
// in place on a terminal, then the seed-wide objects after them; a line every few seconds in a log;
// nothing when stdout is a terminal too), and never touches stdout. The command is driven in process with a fake terminal and a clock that moves a
// fixed step each time it is read; the sizes in the expected text come from the output itself.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CommandIO } from '../../src/cli/command-io.js';
import { renderCommand } from '../../src/cli/render-command.js';
import { LINE_EVERY_MS, RenderProgress } from '../../src/render/render-progress.js';
import { writeGeneratedSeed } from '../support/generated-seed.js';

/** 3 ACL shoots on one gateway, one ECDS bucket, no tunnel hop: 6 objects (3 per-shoot filters, 2 listener parts, 1 bucket). */
const OPERATOR = { ecdsBuckets: 1, tunnelRevocation: 'none' } as const;
const SHOOTS = 3;
/** Read from the directory: the OperatorConfiguration, the gateway Deployment, 4 objects per shoot. */
const OBJECTS_READ = 2 + 4 * SHOOTS;

async function seed(cidrs: number): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'acl-render-progress-'));
  await writeGeneratedSeed(dir, SHOOTS, cidrs, { gateways: 1, operator: OPERATOR });
  return dir;
}

async function render(dir: string, terminal: Pick<CommandIO, 'stderrIsTTY' | 'stdoutIsTTY'>, stepMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  let clock = 0;
  const code = await renderCommand([dir], {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    ...terminal,
    now: () => (clock += stepMs),
  });
  return { code, stdout, stderr };
}

/** The size shown after each document: KiB under 1 MiB, from the documents of the output. */
function sizesAfterEachDocument(stdout: string): string[] {
  const documents = stdout.split(/^(?=---\n)/m);
  let bytes = 0;
  return documents.map((d) => `${Math.round((bytes += Buffer.byteLength(d)) / 1024)} KiB`);
}

const CSI_CLEAR_LINE = '\x1b[K';

describe('render progress on stderr', () => {
  it('on a terminal: the stage, then a bar per object redrawn in place, then a summary line; stdout unchanged', async () => {
    const dir = await seed(5);
    // Each read of the clock is 600 ms later: the start, the stage (0.6 s in), one per object, the summary.
    const { code, stdout, stderr } = await render(dir, { stderrIsTTY: true, stdoutIsTTY: false }, 600);
    expect(code).toBe(0);
    const sizes = sizesAfterEachDocument(stdout);
    expect(sizes).toHaveLength(6);
    expect(stderr).toBe(
      `\rrender: ${OBJECTS_READ} objects read; building the model (0.6 s)${CSI_CLEAR_LINE}` +
        `\rrender [#####-----------] 1/3 shoots, 1 object, ${sizes[0]}${CSI_CLEAR_LINE}` +
        `\rrender [###########-----] 2/3 shoots, 2 objects, ${sizes[1]}${CSI_CLEAR_LINE}` +
        `\rrender [################] 3/3 shoots, 3 objects, ${sizes[2]}${CSI_CLEAR_LINE}` +
        `\rrender [################] 3/3 shoots + 1 seed-wide object, ${sizes[3]}${CSI_CLEAR_LINE}` +
        `\rrender [################] 3/3 shoots + 2 seed-wide objects, ${sizes[4]}${CSI_CLEAR_LINE}` +
        `\rrender [################] 3/3 shoots + 3 seed-wide objects, ${sizes[5]}${CSI_CLEAR_LINE}` +
        `\rgardener-acl render: 3/3 ACL shoots, 6 objects, ${sizes[5]} written in 4.8 s${CSI_CLEAR_LINE}\n`,
    );
    // The objects are what a render without progress prints, with nothing of the bar in them.
    expect(stdout).toBe((await render(dir, { stderrIsTTY: false, stdoutIsTTY: false }, 0)).stdout);
  });

  it('in a log: nothing for the first 5 s, then at most one line per 5 s, and the summary', async () => {
    const dir = await seed(5);
    // 2 s per read: the stage is 2 s in, the objects 4, 6, ..., 14 s in; lines at 6 s and 12 s.
    const { code, stdout, stderr } = await render(dir, { stderrIsTTY: false, stdoutIsTTY: false }, 2000);
    expect(code).toBe(0);
    const sizes = sizesAfterEachDocument(stdout);
    expect(stderr).toBe(
      `gardener-acl render: 2/3 ACL shoots, 2 objects, ${sizes[1]} written (6.0 s)\n` +
        `gardener-acl render: 3/3 ACL shoots + 2 seed-wide objects, ${sizes[4]} written (12.0 s)\n` +
        `gardener-acl render: 3/3 ACL shoots, 6 objects, ${sizes[5]} written in 16.0 s\n`,
    );
  });

  it('says nothing when stdout is the terminal too, or when the render is short', async () => {
    const dir = await seed(5);
    expect((await render(dir, { stderrIsTTY: true, stdoutIsTTY: true }, 10_000)).stderr).toBe('');
    expect((await render(dir, { stderrIsTTY: true, stdoutIsTTY: false }, 1)).stderr).toBe('');
    expect((await render(dir, { stderrIsTTY: false, stdoutIsTTY: false }, LINE_EVERY_MS / 10)).stderr).toBe('');
  });

  it('clears the bar before warnings, so that they start on a line of their own', async () => {
    // Four CIDRs: IPv4 only, a warning per shoot.
    const { code, stderr } = await render(await seed(4), { stderrIsTTY: true, stdoutIsTTY: false }, 600);
    expect(code).toBe(0);
    expect(stderr.startsWith(`\rrender: ${OBJECTS_READ} objects read; building the model (0.6 s)${CSI_CLEAR_LINE}\r${CSI_CLEAR_LINE}warning: `)).toBe(true);
    const afterWarnings = stderr.slice(stderr.lastIndexOf('\n', stderr.indexOf('\rrender [')) + 1);
    expect(afterWarnings.startsWith('\rrender [#####-----------] 1/3 shoots, 1 object, ')).toBe(true);
  });

  it('shows MiB from 1 MiB on, a seed without ACL shoots as a full bar, and redraws at most every 100 ms', () => {
    let text = '';
    let clock = 0;
    const progress = new RenderProgress('bar', (t) => (text += t), () => clock, 0);
    progress.writing(0);
    clock = 1000;
    progress.object(undefined);
    progress.documentWritten({ documents: 1, bytes: 3 * 1024 * 1024 + 200 * 1024 });
    clock = 1099;
    progress.object(undefined);
    progress.documentWritten({ documents: 2, bytes: 4 * 1024 * 1024 });
    clock = 1500;
    progress.finish({ documents: 2, bytes: 4 * 1024 * 1024 });
    expect(text).toBe(
      `\rrender [################] 0/0 shoots + 1 seed-wide object, 3.2 MiB${CSI_CLEAR_LINE}` + `\rgardener-acl render: 0/0 ACL shoots, 2 objects, 4.0 MiB written in 1.5 s${CSI_CLEAR_LINE}\n`,
    );
  });
});
