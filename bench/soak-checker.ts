// The protection-continuity checker (test/continuity/checker.ts) of bench/soak.ts, in a process of
// its own: judging thousands of shoots after each change of a combined filter takes long enough
// that, in the bench's process, it would hold up the clocks the bench reads (the Wait latencies).
// Driven over the IPC channel of child_process.fork; every message is parsed at the boundary.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { ContinuityChecker } from '../test/continuity/checker.js';
import { cidrs, type ShootExpectation } from '../test/continuity/protection-oracle.js';
import { rule } from '../test/support/test-seed.js';

const WireShoot = z.object({
  technicalID: z.string(),
  /** Acceptable ALLOW rules, each as its CIDRs (an ACL change in flight has two). */
  acls: z.array(z.array(z.string()).min(1)).min(1),
  alwaysAllowed: z.array(z.string()),
  sniGateways: z.array(z.string()),
});
export type WireShoot = z.infer<typeof WireShoot>;
const Topology = z.object({ gateways: z.array(z.string()), connectPorts: z.array(z.number().int()), sniPort: z.number().int() });

export const CheckerRequest = z.discriminatedUnion('type', [
  z.object({ type: z.literal('start'), kubeconfig: z.string(), topology: Topology, shoots: z.array(WireShoot), coalesceCombinedMs: z.number().int().positive() }),
  z.object({ type: z.literal('expect'), shoot: WireShoot }),
  z.object({ type: z.literal('fault'), key: z.string() }),
  z.object({ type: z.literal('report') }),
]);
export type CheckerRequest = z.infer<typeof CheckerRequest>;

const expectation = (w: WireShoot): ShootExpectation => ({
  technicalID: w.technicalID,
  rules: w.acls.map((acl) => rule('ALLOW', 'remote_ip', acl)),
  alwaysAllowed: cidrs(w.alwaysAllowed),
  sniGateways: w.sniGateways,
});

let checker: ContinuityChecker | undefined;
// SOAK_GAP_DUMP_DIR: the stored combined filters are written there when the checker charges the
// controller with new gaps (up to ten times), with the objects the checker holds for their shoots, for a look at what was stored.
const dumpDir = process.env['SOAK_GAP_DUMP_DIR'];
let dumped = 0;
let gapsSeen = 0;
if (dumpDir !== undefined) {
  setInterval(() => {
    const gaps = checker?.report().controllerGaps ?? [];
    if (gaps.length === gapsSeen || dumped >= 10 || checker === undefined) return;
    const file = path.join(dumpDir, `gap-${++dumped}.json`);
    const before = gapsSeen;
    gapsSeen = gaps.length;
    const fresh = gaps.slice(before, before + 50);
    const shoots = [...new Set(fresh.map((g) => g.gap.split(' ')[0] ?? ''))].slice(0, 10);
    const known = checker;
    writeFileSync(file, JSON.stringify({ gaps: fresh, shoots: Object.fromEntries(shoots.map((id) => [id, known.storedFor(id)])), combined: checker.storedCombined() }, null, 1));
  }, 200).unref();
}
const send = (message: unknown) => process.send?.(message);

process.on('message', (raw: unknown) => {
  const parsed = CheckerRequest.safeParse(raw);
  if (!parsed.success) {
    send({ type: 'error', error: `soak checker: message not understood: ${parsed.error.message}` });
    return;
  }
  const request = parsed.data;
  void (async () => {
    switch (request.type) {
      case 'start': {
        const kubeConfig = new KubeConfig();
        kubeConfig.loadFromFile(request.kubeconfig);
        checker = new ContinuityChecker(kubeConfig, request.topology, request.coalesceCombinedMs);
        await checker.start(request.shoots.map(expectation));
        send({ type: 'started' });
        return;
      }
      case 'expect':
        checker?.expectShoot(expectation(request.shoot));
        send({ type: 'expected' });
        return;
      case 'fault':
        checker?.fault(request.key);
        return;
      case 'report':
        send({ type: 'report', report: checker?.report(), timeOrigin: performance.timeOrigin });
        return;
    }
  })().catch((error: unknown) => send({ type: 'error', error: String(error) }));
});
process.on('SIGTERM', () => void checker?.stop().finally(() => process.exit(0)));
