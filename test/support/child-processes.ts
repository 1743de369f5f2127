// Last line of defence for test harnesses: a test that forgot stop(), or a worker that crashed,
// must not leave Envoy, etcd or kube-apiserver processes behind.
import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();
let hookInstalled = false;

/** Kills `child` with SIGKILL when this process exits, unless it exited first. */
export function killOnExit(child: ChildProcess): void {
  if (!hookInstalled) {
    hookInstalled = true;
    process.once('exit', () => {
      for (const c of live) {
        try {
          c.kill('SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
  live.add(child);
  child.once('exit', () => live.delete(child));
}
