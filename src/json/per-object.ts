// What is read from a cached object, read once per object. The informer caches hand out a new
// object for every stored change and keep the same one while nothing changed, so a result keyed
// by the object itself can never be stale. A reading of every stored combined filter then parses
// only the objects that changed since the last one: at a cold start the filters change with
// almost every sync, and parsing all of them for each reconcile made half of the controller's CPU.

/** `read` memoised per argument object (held weakly: a replaced cache entry takes its result with it). */
export function perObject<T extends object, R>(read: (obj: T) => R): (obj: T) => R {
  const results = new WeakMap<T, { readonly value: R }>();
  return (obj) => {
    const known = results.get(obj);
    if (known !== undefined) return known.value;
    const value = read(obj);
    results.set(obj, { value });
    return value;
  };
}
