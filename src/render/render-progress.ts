/**
 * Progress of a long render on stderr (never stdout, which carries the objects):
 * - stderr a terminal (and stdout not one): from BAR_AFTER_MS into the run one line, redrawn in
 *   place at most every BAR_EVERY_MS: the stage, then a bar of the ACL shoots written;
 * - stderr not a terminal (a log, CI): nothing for a run shorter than LINE_EVERY_MS, then one line
 *   per LINE_EVERY_MS at most, so that a log gets a sign of life every few seconds, not a flood;
 * - both terminals: nothing; the objects scrolling by are the progress, and a bar would tear them.
 * What was shown ends with a summary line. Times count from the start of the command, so that a
 * slow read of the inputs brings the first line sooner. Nothing runs on a timer: the stages and
 * each object written are the moments to show something (the model is built in one synchronous
 * step, during which nothing could be drawn anyway).
 */
import type { Written } from './document-writer.js';

export type ProgressMode = 'bar' | 'lines' | 'off';

export const BAR_AFTER_MS = 500;
export const BAR_EVERY_MS = 100;
export const LINE_EVERY_MS = 5000;
const BAR_WIDTH = 16;

export function progressMode(stderrIsTTY: boolean, stdoutIsTTY: boolean): ProgressMode {
  if (!stderrIsTTY) return 'lines';
  return stdoutIsTTY ? 'off' : 'bar';
}

const size = (bytes: number) => (bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export class RenderProgress {
  private aclShoots: number | undefined;
  /** The position of the last ACL shoot whose filters were begun; the shoots come in order. */
  private shoots = 0;
  /** Per-shoot filters begun; the seed-wide objects (combined filters, tunnel hop, patches) come after all of them. */
  private perShootObjects = 0;
  private written: Written = { documents: 0, bytes: 0 };
  /** When something was last shown; undefined: nothing yet. */
  private shownAt: number | undefined;
  /** A bar line stands on the terminal without its newline. */
  private barShown = false;

  constructor(
    private readonly mode: ProgressMode,
    private readonly write: (text: string) => void,
    private readonly now: () => number,
    private readonly startedAt: number,
  ) {}

  /** What the render does next, e.g. building the model after the inputs are read. */
  stage(text: string): void {
    this.show((elapsed) => `${text} (${seconds(elapsed)})`);
  }

  /** Writing begins: `aclShoots` is the bar's whole. */
  writing(aclShoots: number): void {
    this.aclShoots = aclShoots;
  }

  /** For SeedRenderStream.documents. */
  readonly object = (shoot: number | undefined): void => {
    if (shoot === undefined) {
      this.shoots = this.aclShoots ?? 0;
      return;
    }
    this.shoots = Math.max(this.shoots, shoot);
    this.perShootObjects++;
  };

  /** For writeDocuments, after each document. */
  readonly documentWritten = (written: Written): void => {
    this.written = written;
    this.show((elapsed) => `${this.counts('ACL shoots')} written (${seconds(elapsed)})`);
  };

  /** Before other text on stderr: a bar standing on the line is cleared (and drawn again at the next update). */
  interrupt(): void {
    if (!this.barShown) return;
    this.write('\r\x1b[K');
    this.barShown = false;
  }

  /** The summary, when anything was shown (a short render stays silent). */
  finish(written: Written): void {
    this.written = written;
    this.shoots = this.aclShoots ?? 0;
    if (this.shownAt === undefined) return;
    const summary = `gardener-acl render: ${this.counts('ACL shoots', true)} written in ${seconds(this.now() - this.startedAt)}`;
    this.write(this.barShown ? `\r${summary}\x1b[K\n` : `${summary}\n`);
    this.barShown = false;
  }

  private show(lineText: (elapsed: number) => string): void {
    if (this.mode === 'off') return;
    const now = this.now();
    const first = this.mode === 'bar' ? BAR_AFTER_MS : LINE_EVERY_MS;
    const every = this.mode === 'bar' ? BAR_EVERY_MS : LINE_EVERY_MS;
    if (this.shownAt === undefined ? now - this.startedAt < first : now - this.shownAt < every) return;
    this.shownAt = now;
    if (this.mode === 'lines') {
      this.write(`gardener-acl render: ${lineText(now - this.startedAt)}\n`);
      return;
    }
    this.write(`\r${this.aclShoots === undefined ? `render: ${lineText(now - this.startedAt)}` : this.bar()}\x1b[K`);
    this.barShown = true;
  }

  // Under 80 columns up to 9,999 shoots and 9,999 seed-wide objects: a line that wraps is not redrawn in place.
  private bar(): string {
    const fraction = this.aclShoots ? this.shoots / this.aclShoots : 1;
    const filled = Math.round(fraction * BAR_WIDTH);
    return `render [${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${this.counts('shoots')}`;
  }

  /**
   * While the shoots' filters are written, how many objects; after them (the bar full, the larger
   * half of a render's bytes still to come), how many seed-wide objects. `total`: every object.
   */
  private counts(shoots: string, total = false): string {
    const { documents, bytes } = this.written;
    const seedWide = documents - this.perShootObjects;
    const objects = (n: number, what = 'object') => `${n} ${what}${n === 1 ? '' : 's'}`;
    const progress = total || seedWide <= 0 ? `, ${objects(documents)}` : ` + ${objects(seedWide, 'seed-wide object')}`;
    return `${this.shoots}/${this.aclShoots ?? 0} ${shoots}${progress}, ${size(bytes)}`;
  }
}
