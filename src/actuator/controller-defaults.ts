// The controller's tunable defaults in one place: the command's flags take them, and the tests and
// benches that start a controller run them, so what is tested is what ships (the seed chart's
// values.yaml holds the same, checked by test/charts/charts-render.test.ts).
export const CONTROLLER_DEFAULTS = {
  workers: 5,
  resyncPeriod: '10m',
  /** Least time between two writes that change a stored CONNECT listener (see ControllerOptions.combinedMinIntervalMs). */
  combinedMinInterval: '60s',
  /** How often every gateway pod's Envoy is read to check each ACL shoot's protection is served (0: never). */
  servedCheckInterval: '20s',
  /** Largest read of one gateway pod's Envoy config by the served check, in MiB (about 2,500 ACL shoots; bench/served-check.ts). */
  servedCheckMaxReadMiB: 48,
} as const;
