/**
 * Ids: client and mutation ids, and the ids a mutation takes for the rows it creates. Those are
 * derived from the mutation's `clientMutationId`, its clock's physical time and a counter, as
 * the server derives them (`docs/design.md` §9), so a row created offline keeps its id once the
 * server applies the mutation.
 */

import { parse, stringify, v5, v7 } from "uuid";

/** A fresh UUID v7 (time-ordered), for client and mutation ids. */
export function newUuid(): string {
  return v7();
}

/**
 * The `n`-th id a mutation with seed `seed` (its `clientMutationId`) takes at `ms` (its clock's
 * physical time): a UUID v7 whose timestamp is `ms` and whose other bits come from the UUID v5
 * of `n` (4 bytes, big-endian) in the namespace `seed`.
 */
export function derivedId(seed: string, ms: number, n: number): string {
  const name = new Uint8Array(4);
  new DataView(name.buffer).setUint32(0, n >>> 0, false);
  const hash = parse(v5(name, seed));
  const random = hash.subarray(6, 16);
  const bytes = new Uint8Array(16);
  // 48 bits of milliseconds, big-endian.
  let high = Math.floor(ms / 2 ** 16);
  const low = ms % 2 ** 16;
  bytes[4] = low >>> 8;
  bytes[5] = low & 0xff;
  for (let i = 3; i >= 0; i--) {
    bytes[i] = high & 0xff;
    high = Math.floor(high / 256);
  }
  bytes[6] = 0x70 | (random[0]! & 0x0f);
  bytes[7] = random[1]!;
  bytes[8] = 0x80 | (random[2]! & 0x3f);
  bytes.set(random.subarray(3, 10), 9);
  return stringify(bytes);
}
