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

export function formatProblem(problem: Problem): string {
  return `${problem.severity}: ${problem.object}: ${problem.message}`;
}
