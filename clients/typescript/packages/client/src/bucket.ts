/**
 * Bucket keys (`docs/protocol.md#bucket-keys`): the rule's name, then each parameter's canonical
 * text, percent-encoded, separated by `/`. Only the canonical form is accepted by the server, so
 * this is the one place that writes keys.
 */

/** A value a bucket parameter can have. */
export type BucketParam = string | number | boolean;

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const encoder = new TextEncoder();

/** The canonical text of one parameter: every byte outside `A-Z a-z 0-9 - . _ ~` as `%XX`. */
export function encodeBucketParam(value: BucketParam): string {
  const text = typeof value === "string" ? value : String(value);
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
