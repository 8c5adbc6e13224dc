/** Presence states and diffs, and the frames that tell the server the subscription and presence. */

import { describe, expect, test } from "vitest";

import { PresenceStates } from "../src/presence.js";
import { plan, Told } from "../src/realtime.js";

describe("presence", () => {
  test("diffs join and leave by presenceRef", () => {
    const presence = new PresenceStates();
    const first = presence.replace("shared/l1", { alice: [{ presenceRef: "a1", at: "title" }] });
    expect(first.joins).toEqual({ alice: [{ presenceRef: "a1", at: "title" }] });
    const event = presence.diff("shared/l1", { alice: [{ presenceRef: "a2" }], bob: [{ presenceRef: "b1" }] }, { alice: [{ presenceRef: "a1" }] });
    expect(event?.state).toEqual({ alice: [{ presenceRef: "a2" }], bob: [{ presenceRef: "b1" }] });
    expect(presence.diff("shared/l1", {}, { bob: [{ presenceRef: "b1" }] })?.state).toEqual({ alice: [{ presenceRef: "a2" }] });
    expect(presence.diff("shared/l2", { bob: [{ presenceRef: "b1" }] }, {})).toBeUndefined();
    const replaced = presence.replace("shared/l1", { carol: [{ presenceRef: "c1" }] });
    expect(replaced.leaves).toEqual({ alice: [{ presenceRef: "a2" }] });
    const forgotten = presence.forget();
    expect(forgotten.map((e) => [e.bucket, e.leaves])).toEqual([["shared/l1", { carol: [{ presenceRef: "c1" }] }]]);
  });
});

describe("stream plan", () => {
  const held = new Set(["shared/a", "shared/b"]);

  test("presence is announced once, and again when its meta changes", () => {
    const told = new Told();
    const tracked = new Map([["shared/a", { at: "title" }]]);
    expect(plan(undefined, tracked, held, false, told)).toEqual({ frames: [{ type: "track", bucket: "shared/a", meta: { at: "title" } }] });
    expect(plan(undefined, tracked, held, false, told)).toEqual({ frames: [] });
    tracked.set("shared/a", { at: "body" });
    tracked.set("shared/c", { at: "title" });
    expect(plan(undefined, tracked, held, false, told)).toEqual({
      frames: [{ type: "track", bucket: "shared/a", meta: { at: "body" } }],
    });
    tracked.delete("shared/a");
    expect(plan(undefined, tracked, held, false, told)).toEqual({ frames: [{ type: "untrack", bucket: "shared/a" }] });
  });

  test("a narrowed subscription goes between untracks and tracks, and only a reconnection widens it", () => {
    const told = new Told();
    const tracked = new Map([
      ["shared/a", { at: "t" }],
      ["shared/b", { at: "t" }],
    ]);
    expect(plan(["shared/a"], tracked, held, false, told)).toEqual({
      frames: [
        { type: "subscribe", buckets: ["shared/a"] },
        { type: "track", bucket: "shared/a", meta: { at: "t" } },
      ],
    });
    expect(plan(["shared/b"], tracked, held, false, told)).toEqual({
      frames: [
        { type: "untrack", bucket: "shared/a" },
        { type: "subscribe", buckets: ["shared/b"] },
        { type: "track", bucket: "shared/b", meta: { at: "t" } },
      ],
    });
    expect(plan(undefined, tracked, held, false, told)).toBe("reconnect");
  });

  test("after a refusal the subscription asks only for buckets held", () => {
    const wanted = ["shared/a", "own/bob"];
    expect(plan(wanted, new Map(), new Set(["shared/a"]), false, new Told())).toEqual({
      frames: [{ type: "subscribe", buckets: ["own/bob", "shared/a"] }],
    });
    expect(plan(wanted, new Map(), new Set(["shared/a"]), true, new Told())).toEqual({
      frames: [{ type: "subscribe", buckets: ["shared/a"] }],
    });
  });
});
