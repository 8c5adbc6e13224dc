/**
 * Write authorization offline against a real notes server: a write the server's rules certainly
 * refuse is refused by the client before it is queued, as `forbidden` and in the very words the
 * server gives for the same mutation; `canWrite` tells a UI which rows it may offer to edit.
 */

import { describe, expect, test } from "vitest";

import { ForbiddenError, newUuid } from "@engine/client";

import { mutators } from "../src/contract.gen.js";
import { accept, notesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** The server's answer to `name(args)` pushed by `user` over HTTP, with no client in between. */
async function pushRaw(user: string, name: string, args: unknown) {
  const response = await fetch(`${notes().url}/sync/push`, {
    method: "POST",
    headers: { authorization: `Bearer ${notes().token(user)}`, "content-type": "application/json" },
    body: JSON.stringify({ clientId: newUuid(), mutations: [{ mutationId: 1, clientMutationId: newUuid(), name, args }] }),
  });
  const body = (await response.json()) as { results: { status: string; error?: { code: string; detail: string } }[] };
  return body.results[0]!;
}

describe("offline authorization", () => {
  test("a viewer's edit of a note is refused offline with the server's words; an editor's goes", async () => {
    const owner = await notesClient(notes(), "olive");
    await mutators(owner).createList({ id: "olives", title: "Olive's" });
    await mutators(owner).addNote({ id: "olive-1", list_id: "olives", title: "Bread" });
    await mutators(owner).shareList({ list_id: "olives", user_id: "vic", role: "viewer" });
    await mutators(owner).shareList({ list_id: "olives", user_id: "ed", role: "editor" });
    await owner.sync();
    await Promise.all([accept(notes(), "vic", "olives"), accept(notes(), "ed", "olives")]);
    const viewer = await notesClient(notes(), "vic");
    const editor = await notesClient(notes(), "ed");
    await Promise.all([viewer.pull(), editor.pull()]);

    const note = viewer.get("notes", "olive-1")!;
    expect(note.title).toBe("Bread");
    expect(viewer.canWrite("notes", note)).toBe(false);
    expect(editor.canWrite("notes", note)).toBe(true);
    expect(viewer.canWrite("lists", viewer.get("lists", "olives")!)).toBe(false);

    const edit = { id: "olive-1", title: "Cake", done: null, position: null };
    const writes = [
      ["update_note", edit],
      ["add_note", { id: "vic-1", list_id: "olives", title: "Jam" }],
      ["delete_note", { id: "olive-1" }],
    ] as const;
    for (const [name, args] of writes) {
      const refusal = await viewer.mutate(name, args as never).catch((err: unknown) => err);
      expect(refusal, name).toBeInstanceOf(ForbiddenError);
      const { code, detail } = refusal as ForbiddenError;
      expect(code).toBe("forbidden");
      // The same mutation, pushed to the server: the same refusal, word for word.
      const answer = await pushRaw("vic", name, args);
      expect(answer.status, name).toBe("rejected");
      expect(answer.error, name).toMatchObject({ code: "forbidden", detail });
    }
    // Nothing written, nothing queued.
    expect(viewer.get("notes", "olive-1")?.title).toBe("Bread");
    expect(viewer.get("notes", "vic-1")).toBeUndefined();
    expect(viewer.status.pending).toBe(0);

    await mutators(editor).updateNote(edit);
    expect(editor.get("notes", "olive-1")?.title).toBe("Cake");
    await editor.sync();
    expect(editor.status.quarantined).toEqual([]);
    await Promise.all([owner.close(), viewer.close(), editor.close()]);
  });
});
