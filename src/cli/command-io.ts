// What a command sees of its process: its output streams, its stdin and its clock, so that a test
// or the compiled CLI can run every command the same way.
export interface CommandIO {
  /** false: the text is buffered; wait for `drained` before writing more. */
  readonly stdout: (text: string) => unknown;
  readonly stderr: (text: string) => void;
  readonly drained?: () => Promise<void>;
  /** All of stdin, for a FILE argument of "-". */
  readonly readStdin?: () => Promise<string>;
  /** Whether stderr and stdout are terminals, for render's progress; undefined: those of this process. */
  readonly stderrIsTTY?: boolean;
  readonly stdoutIsTTY?: boolean;
  /** A clock in milliseconds, for render's progress; undefined: performance.now. */
  readonly now?: () => number;
}
