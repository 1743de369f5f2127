/** Something wrong with the inputs of one object; errors stop that shoot's ACL from changing. */
export interface Problem {
  readonly severity: 'error' | 'warning';
  /** `Kind namespace/name`, plus the file it came from when known. */
  readonly object: string;
  readonly message: string;
}

export function objectRef(kind: string, namespace: string | undefined, name: string): string {
  return `${kind} ${namespace ? `${namespace}/` : ''}${name}`;
}

/** One line per line of the message, each naming the object, so no line of a long list is orphaned (or lost to a grep). */
export function formatProblem(problem: Problem): string {
  return problem.message
    .split('\n')
    .map((line) => `${problem.severity}: ${problem.object}: ${line}`)
    .join('\n');
}
