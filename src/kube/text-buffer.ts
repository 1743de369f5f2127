/**
 * UTF-8 text written piece by piece into one buffer that is reused from object to object. A large
 * object's text built as a string was a rope of a string per piece, alive long enough to be
 * promoted out of V8's young generation, and then one more copy of the whole text: that garbage,
 * not the render's model, made most of `render`'s heap growth while writing.
 */
export class TextBuffer {
  private bytes: Buffer;
  /** Bytes written since the last truncate. */
  length = 0;

  constructor(initialBytes = 64 * 1024) {
    this.bytes = Buffer.allocUnsafe(initialBytes);
  }

  write(text: string): void {
    const n = text.length;
    if (this.length + 3 * n > this.bytes.length) this.grow(3 * n);
    // Most pieces are short ASCII (keys, indentation, CIDRs): copied here faster than through a call into C++.
    if (n <= 32) {
      const bytes = this.bytes;
      const at = this.length;
      let i = 0;
      for (; i < n; i++) {
        const code = text.charCodeAt(i);
        if (code > 0x7f) break;
        bytes[at + i] = code;
      }
      if (i === n) {
        this.length += n;
        return;
      }
    }
    this.length += this.bytes.write(text, this.length, 'utf8');
  }

  truncate(length: number): void {
    this.length = length;
  }

  /** The text from `start` on. */
  text(start = 0): string {
    return this.bytes.toString('utf8', start, this.length);
  }

  /** The text as strings of at most `size` bytes (a character is never cut), small enough to die young once written. */
  *chunks(size: number): Generator<string> {
    let start = 0;
    while (start < this.length) {
      let end = Math.min(start + size, this.length);
      // Back to the first byte of a character: continuation bytes are 10xxxxxx.
      while (end < this.length && end > start + 1 && ((this.bytes[end] ?? 0) & 0xc0) === 0x80) end--;
      yield this.bytes.toString('utf8', start, end);
      start = end;
    }
  }

  private grow(needed: number): void {
    const grown = Buffer.allocUnsafe(Math.max(2 * this.bytes.length, this.length + needed));
    this.bytes.copy(grown, 0, 0, this.length);
    this.bytes = grown;
  }
}

/** Thrown by one of the emitters for a value it does not write exactly as the reference serialiser would. */
export class NotHandledHere extends Error {}

/**
 * Appends what `emit` writes to `text`; when it meets a value it does not handle (NotHandledHere),
 * what it wrote is taken back and the reference serialiser's text of the whole document is written.
 */
export function emitOrFallback(text: TextBuffer, emit: () => void, reference: () => string): void {
  const start = text.length;
  try {
    emit();
    return;
  } catch (error) {
    if (!(error instanceof NotHandledHere)) throw error;
    text.truncate(start);
  }
  text.write(reference());
}
