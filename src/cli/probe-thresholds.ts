// How long a cache may go without an open watch before the probes say so. Every watch re-open
// leaves a gap of milliseconds and a failing API server one of the informer's backoff (at most 30 s
// between attempts): readiness reports a gap past a minute, liveness one past five (then a
// restart, which lists afresh, is the better bet than serving an ever older view).
export const LAGGING_CACHE_MS = 60_000;
export const STUCK_CACHE_MS = 5 * 60_000;
