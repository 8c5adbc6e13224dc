/**
 * Bucket keys (`docs/protocol.md#bucket-keys`): the rule's name, then each parameter's canonical
 * text, percent-encoded, separated by `/`. Only the canonical form is accepted by the server, so
 * this is the one place that writes keys.
 */

/** A value a bucket parameter can have. */
export type BucketParam = string | number | boolean;

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const encoder = new TextEncoder();

/**
 * The canonical text of a number (the server's `number_text`): `String(n)`, which the server
 * writes for a JSON float too (`7.0` is `7`, `1e21` is `1e+21`). `null` for an integer beyond
 * 2^53: `JSON.parse` may have rounded it, and the server writes the integer it read exactly.
 */
export function numberText(n: number): string | null {
  return Number.isInteger(n) && !Number.isSafeInteger(n) ? null : String(n);
}

/** The canonical text of one parameter: every byte outside `A-Z a-z 0-9 - . _ ~` as `%XX`. */
export function encodeBucketParam(value: BucketParam): string {
  const text = typeof value === "number" ? numberText(value) : String(value);
  if (text === null) {
    throw new RangeError(`a bucket parameter beyond 2^53 may not be exact: pass ${value} as a string`);
  }
  let out = "";
  for (const char of text) {
    if (UNRESERVED.test(char)) {
      out += char;
      continue;
    }
    for (const byte of encoder.encode(char)) {
      out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    }
  }
  return out;
}

/** The key of the bucket of rule `rule` with parameters `params`, in the rule's order. */
export function bucketKey(rule: string, params: readonly BucketParam[]): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(rule)) {
    throw new TypeError(`a sync rule's name is an identifier, not ${JSON.stringify(rule)}`);
  }
  return [rule, ...params.map(encodeBucketParam)].join("/");
}

/** The rule a bucket key belongs to. */
export function bucketRule(key: string): string {
  const slash = key.indexOf("/");
  return slash < 0 ? key : key.slice(0, slash);
}
