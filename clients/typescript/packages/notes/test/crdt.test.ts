/**
 * Collaborative bodies written from TypeScript (`yjs`, through `@engine/db-collection`'s
 * helpers) and from the Rust client (`yrs`, the `engine-body-editor` binary) at the same time:
 * the server merges both, and both clients end with the same text holding both edits.
 */

import { spawnSync } from "node:child_process";

import { createCrdtText, editCrdtText } from "@engine/db-collection";
import { describe, expect, inject, test } from "vitest";

import { mutators } from "../src/contract.gen.js";
import { notesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** Run the Rust client: pull, insert `text` at `at` when given, sync, and return the body's text. */
function rustClient(token: string, noteId: string, edit?: [number, string]): string {
  const args = [notes().url, token, noteId, ...(edit ? [String(edit[0]), edit[1]] : [])];
  const run = spawnSync(inject("bodyEditorBin"), args, { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`engine-body-editor failed (${run.status}):\n${run.stderr}`);
  return run.stdout.trimEnd();
}

describe("collaborative text across the TypeScript and the Rust client", () => {
  test("concurrent edits of one body from both clients converge on both", async () => {
    const ts = await notesClient(notes(), "tess");
    const call = mutators(ts);
    await call.createList({ id: "shop", title: "Shop" });
    await call.addNote({ id: "milk", list_id: "shop", title: "Milk" });
    const start = createCrdtText(ts.get("notes", "milk")!.body);
    await call.editNoteBody({ id: "milk", update: editCrdtText(start, (text) => text.insert(0, "milk")) });
    await ts.sync();
    expect(createCrdtText(ts.get("notes", "milk")!.body).text.toString()).toBe("milk");

    // Both edit the same state: TypeScript queues its edit, Rust's reaches the server first.
    const mine = createCrdtText(ts.get("notes", "milk")!.body);
    await call.editNoteBody({ id: "milk", update: editCrdtText(mine, (text) => text.insert(0, "oat ")) });
    const token = notes().token("tess");
    expect(rustClient(token, "milk", [4, " × 2 litres"])).toBe("milk × 2 litres");
    await ts.sync();

    const merged = createCrdtText(ts.get("notes", "milk")!.body).text.toString();
    expect(merged).toBe("oat milk × 2 litres");
    expect(rustClient(token, "milk")).toBe(merged);
    await ts.close();
  });
});
