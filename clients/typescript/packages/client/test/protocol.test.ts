/** The protocol's small pieces: clock readings, ids, bucket keys, backoff, `Retry-After`. */

import { describe, expect, test } from "vitest";

import { bucketKey, derivedId, formatHlc, HlcClock, parseHlc, retryAfterMs } from "../src/index.js";
import { Backoff } from "../src/backoff.js";

describe("hybrid logical clock", () => {
  test("readings have the protocol's form and order like their text", () => {
    let wall = 1_763_700_000_000;
    const clock = new HlcClock("0192f0e0-0000-7000-8000-000000000001", () => wall);
    const first = clock.now();
    expect(first).toBe("1763700000000-0000-0192f0e0-0000-7000-8000-000000000001");
    wall -= 5;
    const second = clock.now();
    expect(second > first).toBe(true);
    expect(parseHlc(second)).toEqual({ physicalMs: 1_763_700_000_000, counter: 1, node: clock.node });
    clock.observe("1763700009000-00a0-server");
    expect(clock.now()).toBe("1763700009000-00a1-0192f0e0-0000-7000-8000-000000000001");
  });

  test("malformed readings are refused", () => {
    for (const bad of ["", "1763700000000-0001", "176370000000-0001-n", "1763700000000-00A1-n", "1763700000000-0001-n n"]) {
      expect(parseHlc(bad)).toBeUndefined();
    }
    expect(formatHlc({ physicalMs: 5, counter: 255, node: "n" })).toBe("0000000000005-00ff-n");
    expect(() => new HlcClock("no spaces")).toThrow();
  });
});

describe("ids", () => {
  test("a mutation's ids are derived as the server derives them", () => {
    // Computed independently from the description: UUID v5 of n (big-endian) in the seed's
    // namespace, its last 10 bytes under a UUID v7 timestamp.
    const seed = "0192f0e0-0000-7000-8000-00000000a001";
    expect(derivedId(seed, 1_763_700_000_000, 0)).toBe("019aa4b6-4500-78b5-bffd-974b99244f0a");
    expect(derivedId(seed, 1_763_700_000_000, 1)).toBe("019aa4b6-4500-7729-840a-f450f86bfd97");
  });
});

describe("bucket keys", () => {
  test("parameters are percent-encoded canonically", () => {
    expect(bucketKey("shared", ["a/b c%", "é"])).toBe("shared/a%2Fb%20c%25/%C3%A9");
    expect(bucketKey("own", ["a.b_c~d-e"])).toBe("own/a.b_c~d-e");
    expect(bucketKey("n", [42, true, "!*'()"])).toBe("n/42/true/%21%2A%27%28%29");
    expect(bucketKey("global", [])).toBe("global");
    expect(() => bucketKey("1rule", [])).toThrow();
  });
});

describe("backoff", () => {
  test("waits grow to the ceiling and stay jittered", () => {
    const backoff = new Backoff(500, 30_000);
    const waits = Array.from({ length: 12 }, () => backoff.next());
    waits.forEach((wait, n) => expect(wait).toBeLessThanOrEqual(Math.min(30_000, 500 * 2 ** n)));
    expect(waits.slice(6).some((w) => w > 1_000)).toBe(true);
    expect(new Set(waits).size).toBeGreaterThan(6);
    backoff.reset();
    expect(backoff.next()).toBeLessThanOrEqual(500);
  });

  test("Retry-After is read in seconds or as a date", () => {
    expect(retryAfterMs("2")).toBe(2_000);
    expect(retryAfterMs(null)).toBeUndefined();
    expect(retryAfterMs("Thu, 01 Jan 1970 00:00:10 GMT", 4_000)).toBe(6_000);
    expect(retryAfterMs("soon")).toBeUndefined();
  });
});
