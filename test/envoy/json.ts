// JSON value types and the few helpers the harness needs to walk Envoy/Istio config
// without `any`. Envoy accepts both proto field spellings (snake_case and lowerCamelCase)
// in JSON, and so does Istio in EnvoyFilter values, so readers accept both.

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Deep copy, so that patches never alias the caller's objects (Istio clones patch values too). */
export function cloneJson<T extends JsonValue>(value: T): T {
  return structuredClone(value);
}

function camelCase(snake: string): string {
  return snake.replace(/_([a-z0-9])/g, (_match, c: string) => c.toUpperCase());
}

export function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The key under which `obj` holds the proto field `snakeName`, in either JSON spelling. */
export function fieldKey(obj: JsonObject, snakeName: string): string {
  const camel = camelCase(snakeName);
  return camel !== snakeName && !(snakeName in obj) && camel in obj ? camel : snakeName;
}

export function getField(obj: JsonObject, snakeName: string): JsonValue | undefined {
  return obj[fieldKey(obj, snakeName)];
}

export function getObject(obj: JsonObject, snakeName: string): JsonObject | undefined {
  const value = getField(obj, snakeName);
  return isJsonObject(value) ? value : undefined;
}

export function getObjectList(obj: JsonObject, snakeName: string): JsonObject[] {
  const value = getField(obj, snakeName);
  return Array.isArray(value) ? value.filter(isJsonObject) : [];
}

export function getString(obj: JsonObject, snakeName: string): string | undefined {
  const value = getField(obj, snakeName);
  return typeof value === 'string' ? value : undefined;
}
