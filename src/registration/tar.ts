// A minimal ustar writer for chart archives. Deterministic on purpose: entries sorted by path,
// one fixed mtime, fixed mode/owner, so the same chart always packs to the same bytes and the
// ControllerDeployment does not change (and roll every seed's extension) without a reason.
import { gzipSync } from 'node:zlib';

export interface TarEntry {
  /** Path inside the archive, '/'-separated, no leading '/'. */
  readonly path: string;
  readonly content: Buffer;
}

const BLOCK = 512;
/** 2000-01-01T00:00:00Z; any fixed value works, 0 makes some tools warn about 1970. */
export const FIXED_MTIME_SECONDS = 946_684_800;

function octal(value: number, width: number): string {
  // width-1 octal digits and a NUL, as GNU tar and Go's archive/tar write them.
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

/** ustar splits long paths into prefix (155) and name (100) at a '/'. */
function splitPath(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let i = path.lastIndexOf('/'); i > 0; i = path.lastIndexOf('/', i - 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { name, prefix };
  }
  throw new Error(`path too long for a ustar archive: ${path}`);
}

function header(entry: TarEntry): Buffer {
  const block = Buffer.alloc(BLOCK);
  const { name, prefix } = splitPath(entry.path);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(0o644, 8), 100, 'ascii');
  block.write(octal(0, 8), 108, 'ascii');
  block.write(octal(0, 8), 116, 'ascii');
  block.write(octal(entry.content.length, 12), 124, 'ascii');
  block.write(octal(FIXED_MTIME_SECONDS, 12), 136, 'ascii');
  block.write('        ', 148, 'ascii'); // checksum field counts as spaces while summing
  block.write('0', 156, 'ascii'); // regular file
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return block;
}

export function tar(entries: readonly TarEntry[]): Buffer {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const parts: Buffer[] = [];
  for (const entry of sorted) {
    if (entry.path.startsWith('/') || entry.path.split('/').includes('..')) throw new Error(`unsafe path in archive: ${entry.path}`);
    parts.push(header(entry), entry.content, Buffer.alloc((BLOCK - (entry.content.length % BLOCK)) % BLOCK));
  }
  parts.push(Buffer.alloc(2 * BLOCK)); // end-of-archive marker
  return Buffer.concat(parts);
}

/** gzip without a file name and with mtime 0 (Node's default), so the bytes depend on content only. */
export function tarGz(entries: readonly TarEntry[]): Buffer {
  return gzipSync(tar(entries), { level: 9 });
}
