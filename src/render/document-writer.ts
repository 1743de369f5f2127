import { writeJsonListItem } from './json-documents.js';
import { TextBuffer } from '../kube/text-buffer.js';
import { writeYamlDocument } from '../kube/yaml-documents.js';

export type OutputFormat = 'yaml' | 'json';

export interface OutputSink {
  /** false: the text is buffered; wait for `drained` before writing more. */
  readonly write: (text: string) => unknown;
  readonly drained?: () => Promise<void>;
}

export interface Written {
  readonly documents: number;
  /** UTF-8 bytes of the output so far. */
  readonly bytes: number;
}

/**
 * The text of whole objects is gathered up to this size before it is written: a per-shoot filter
 * is a few KiB, and a write each cost a system call (stdout to a file or pipe is synchronous); a
 * larger object goes out in pieces of this size, strings short-lived enough to die young.
 */
const CHUNK_BYTES = 64 * 1024;

const JSON_LIST_START = '{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [';

/**
 * Writes the documents as they are produced, byte for byte what one JSON List (indented by 2) or
 * one multi-document YAML of all of them would be, holding one document's text at a time (in a
 * buffer reused from one to the next) and waiting whenever the sink has buffered enough.
 * `onDocument` hears the counts after each document.
 */
export async function writeDocuments(documents: Iterable<unknown>, format: OutputFormat, sink: OutputSink, onDocument?: (written: Written) => void): Promise<Written> {
  const text = new TextBuffer(2 * CHUNK_BYTES);
  let flushed = 0;
  let count = 0;
  const flush = async () => {
    for (const chunk of text.chunks(CHUNK_BYTES)) if (sink.write(chunk) === false) await sink.drained?.();
    flushed += text.length;
    text.truncate(0);
  };
  if (format === 'json') text.write(JSON_LIST_START);
  for (const document of documents) {
    if (format === 'json') {
      text.write(count === 0 ? '\n    ' : ',\n    ');
      writeJsonListItem(document, text);
    } else {
      if (count > 0) text.write('---\n');
      writeYamlDocument(document, text);
    }
    count++;
    onDocument?.({ documents: count, bytes: flushed + text.length });
    if (text.length >= CHUNK_BYTES) await flush();
  }
  if (format === 'json') text.write(count === 0 ? ']\n}\n' : '\n  ]\n}\n');
  await flush();
  return { documents: count, bytes: flushed };
}
