/**
 * The refusals the app words without a browser: a leave the server refused, whether the user
 * had already been removed or is the list's owner.
 */

import { describe, expect, test } from "vitest";

import type { QuarantinedEntry } from "@engine/client";

import { describeRefused, type Names } from "../src/messages.js";

const names: Names = {
  me: "rosa",
  list: (id) => (id === "club" ? { title: "Book club", ownerId: "quinn" } : undefined),
  noteTitle: () => undefined,
};

const refused = (name: string, args: object, detail: string) =>
  ({ name, args, error: { code: "mutator_failed", detail } }) as unknown as QuarantinedEntry;

describe("refusals in words", () => {
  test("a refused leave says why, with the list's name and no ids", () => {
    const removed = describeRefused(refused("leave_list", { list_id: "club" }, "you are not a member of the list"), names);
    expect(removed.text).toBe("You did not leave “Book club”: you were no longer a member of it.");
    expect(removed.lost).toBe(true);
    const owner = describeRefused(refused("leave_list", { list_id: "club" }, "the owner cannot leave their own list"), names);
    expect(owner.text).toBe("You did not leave “Book club”: its owner cannot leave it.");
    const unknown = describeRefused(refused("leave_list", { list_id: "0192f0e0-gone" }, "you are not a member of the list"), names);
    expect(unknown.text).not.toContain("0192f0e0");
  });
});
