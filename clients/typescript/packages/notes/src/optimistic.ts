/**
 * The notes app's optimistic mutators: what each mutation does to the local view at once,
 * written in TypeScript after the app's Rust mutators (`examples/notes/src/mutators.rs`). The
 * server runs the Rust ones; after every pull these run again on its rows until its result
 * shows. `edit_note_body` merges its update into the body as the server does: merging is
 * idempotent, so running it again after a pull changes nothing the server already merged, and
 * the note counts as pending (`Client.isPending`) until a pull shows the server ran it.
 */

import type { MutationTx, OptimisticMutators } from "@engine/client";
import { applyCrdtUpdate, createCrdtText, encodeCrdtUpdate } from "@engine/db-collection";

import type { Mutators, Tables } from "./contract.gen.js";

type Tx = MutationTx<Tables>;

/** The id the client proposed, or the one the server's run takes too. */
const resolveId = (tx: Tx, proposed: string | null | undefined) => (proposed ? proposed : tx.newId());

function ownedList(tx: Tx, listId: string, verb: string) {
  const list = tx.get("lists", listId);
  if (!list) throw new Error(`no list \`${listId}\``);
  if (list.owner_id !== tx.actor.ownerId) throw new Error(`only the list's owner may ${verb} it`);
  return list;
}

function found(exists: boolean, id: string): void {
  if (!exists) throw new Error(`no note \`${id}\``);
}

export const optimistic: OptimisticMutators<Tables, Mutators> = {
  create_list(tx, args) {
    const id = resolveId(tx, args.id);
    tx.insert("lists", { id, owner_id: tx.actor.ownerId, title: args.title, archived: false });
    tx.insert("list_members", {
      list_id: id,
      user_id: tx.actor.userId,
      owner_id: tx.actor.ownerId,
      role: "owner",
      accepted: true,
      invited_by: tx.actor.userId,
      title: args.title,
    });
    return id;
  },
  rename_list(tx, args) {
    ownedList(tx, args.id, "rename");
    tx.update("lists", args.id, { title: args.title });
    // The memberships' copy of the title, as the server's run rewrites it.
    for (const member of tx.select("list_members", { list_id: args.id })) {
      tx.update("list_members", { list_id: member.list_id, user_id: member.user_id }, { title: args.title });
    }
  },
  share_list(tx, args) {
    const list = ownedList(tx, args.list_id, "share");
    const key = { list_id: args.list_id, user_id: args.user_id };
    const member = tx.get("list_members", key);
    if (member?.role === "owner") throw new Error("the owner's membership cannot change");
    if (member) tx.update("list_members", key, { role: args.role });
    else {
      const invitation = { accepted: false, invited_by: tx.actor.userId, title: list.title };
      tx.insert("list_members", { ...key, owner_id: list.owner_id, role: args.role, ...invitation });
    }
  },
  accept_list(tx, args) {
    const key = { list_id: args.list_id, user_id: tx.actor.userId };
    const member = tx.get("list_members", key);
    if (!member) throw new Error("you are not invited to the list");
    if (!member.accepted) tx.update("list_members", key, { accepted: true });
  },
  unshare_list(tx, args) {
    ownedList(tx, args.list_id, "unshare");
    const key = { list_id: args.list_id, user_id: args.user_id };
    const member = tx.get("list_members", key);
    if (!member) throw new Error("that user is not a member of the list");
    if (member.role === "owner") throw new Error("the owner's membership cannot be removed");
    tx.delete("list_members", key);
  },
  leave_list(tx, args) {
    const key = { list_id: args.list_id, user_id: tx.actor.userId };
    const member = tx.get("list_members", key);
    if (!member) throw new Error("you are not a member of the list");
    if (member.role === "owner") throw new Error("the owner cannot leave their own list");
    tx.delete("list_members", key);
  },
  add_note(tx, args) {
    if (!tx.get("lists", args.list_id)) throw new Error(`no list \`${args.list_id}\``);
    const id = resolveId(tx, args.id);
    tx.insert("notes", {
      id,
      owner_id: tx.actor.ownerId,
      list_id: args.list_id,
      title: args.title,
      done: false,
      // Creation time orders new notes after older ones, as on the server.
      position: tx.physicalMs,
      body: "AAA=",
      image: null,
      deleted_at: null,
    });
    return id;
  },
  update_note(tx, args) {
    const changes: Partial<Tables["notes"]> = {};
    if (args.title != null) changes.title = args.title;
    if (args.done != null) changes.done = args.done;
    if (args.position != null) changes.position = args.position;
    found(tx.update("notes", args.id, changes), args.id);
  },
  edit_note_body(tx, args) {
    const note = tx.get("notes", args.id);
    if (!note) return found(false, args.id);
    const body = createCrdtText(note.body);
    applyCrdtUpdate(body, args.update);
    found(tx.update("notes", args.id, { body: encodeCrdtUpdate(body) }), args.id);
  },
  set_note_image(tx, args) {
    found(tx.update("notes", args.id, { image: args.image ?? null }), args.id);
  },
  move_note(tx, args) {
    if (!tx.get("lists", args.list_id)) throw new Error(`no list \`${args.list_id}\``);
    found(tx.update("notes", args.id, { list_id: args.list_id }), args.id);
  },
  delete_note(tx, args) {
    found(tx.delete("notes", args.id), args.id);
  },
  purge_note(tx, args) {
    found(tx.purge("notes", args.id), args.id);
  },
};
