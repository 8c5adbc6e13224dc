/**
 * What the app says when a write is refused, in the user's words: which note or list, what
 * happened to it, and what they can do. No mutator or rule names and no ids reach the page; the
 * server's problem document is read only for its `code` and the mutators' known refusals
 * (`examples/notes/src/mutators.rs`).
 */

import { ForbiddenError, ServerError, type QuarantinedEntry } from "@engine/client";

/** What the app knows of a list, kept after the list is gone from the user's buckets. */
export interface KnownList {
  title: string;
  ownerId: string;
}

/** Where names come from: lists by id (also those the user lost), notes' titles by id. */
export interface Names {
  list(id: string): KnownList | undefined;
  noteTitle(id: string): string | undefined;
  /** The signed-in user's owner id. */
  me: string;
}

/** A refusal as the user reads it; `lost` when the write's list is out of the user's reach. */
export interface Refusal {
  text: string;
  /** The title of a note the user typed that was not kept, for copying or adding elsewhere. */
  keptTitle?: string;
  /** Whether the write's list is out of the user's reach now. */
  lost: boolean;
}

const quoted = (text: string) => `“${text.length > 60 ? `${text.slice(0, 59)}…` : text}”`;

function listName(names: Names, id: string | undefined): string {
  const list = id === undefined ? undefined : names.list(id);
  return list ? quoted(list.title) : "that list";
}

/** Why a list is out of reach, saying who decided when the app knows. */
function lostReason(names: Names, listId: string | undefined): string {
  const list = listId === undefined ? undefined : names.list(listId);
  if (!list) return "you no longer have access to its list";
  if (list.ownerId === names.me) return `the list ${quoted(list.title)} is gone`;
  return `${list.ownerId} removed you from ${quoted(list.title)}`;
}

/** The reason in the server's problem `code` and `detail`, said for people. */
function reason(code: string, detail: string, names: Names, listId: string | undefined): { text: string; lost: boolean } {
  if (/only the list's owner/.test(detail)) return { text: `only the owner of ${listName(names, listId)} can do that`, lost: false };
  if (code === "forbidden") {
    if (/`lists`|`list_members`/.test(detail)) return { text: `only the owner of ${listName(names, listId)} can do that`, lost: false };
    return { text: `you can only view ${listName(names, listId)}`, lost: false };
  }
  if (/^no list/.test(detail)) return { text: lostReason(names, listId), lost: true };
  if (/^no note/.test(detail)) return { text: "someone deleted the note", lost: false };
  if (/owner's membership/.test(detail)) return { text: "you own this list already", lost: false };
  if (/cannot leave/.test(detail)) return { text: "its owner cannot leave it", lost: false };
  if (/^you are not a member/.test(detail)) return { text: "you were no longer a member of it", lost: true };
  if (/not a member/.test(detail)) return { text: "they no longer have access to it", lost: false };
  if (code === "validation_failed" || code === "malformed_request") return { text: "the server could not read it", lost: false };
  return { text: "the server refused it", lost: false };
}

type Args = Record<string, unknown>;
const text = (value: unknown) => (typeof value === "string" ? value : undefined);

/** What a refused write was, in words: "Your note “Oat milk” was not added". */
function what(name: string, args: Args, names: Names): string {
  const title = text(args.title);
  const note = text(args.id) === undefined ? undefined : names.noteTitle(text(args.id)!);
  switch (name) {
    case "add_note":
      return `Your note ${quoted(title ?? "")} was not added`;
    case "update_note":
      return `Your change to ${note ? quoted(note) : "a note"} was not saved`;
    case "delete_note":
    case "purge_note":
      return `${note ? quoted(note) : "A note"} was not deleted`;
    case "move_note":
      return `${note ? quoted(note) : "A note"} was not moved`;
    case "edit_note_body":
      return `Your edit of ${note ? quoted(note) : "a note"} was not saved`;
    case "set_note_image":
      return `The image of ${note ? quoted(note) : "a note"} was not saved`;
    case "create_list":
      return `The list ${quoted(title ?? "")} was not created`;
    case "rename_list":
      return `${listName(names, text(args.id))} was not renamed to ${quoted(title ?? "")}`;
    case "share_list":
      return `${listName(names, text(args.list_id))} was not shared with ${text(args.user_id) ?? "them"}`;
    case "leave_list":
      return `You did not leave ${listName(names, text(args.list_id))}`;
    case "unshare_list":
      return `${text(args.user_id) ?? "They"} still ${text(args.user_id) ? "has" : "have"} access to ${listName(names, text(args.list_id))}`;
    default:
      return "A change was not saved";
  }
}

/** A write the server refused (an entry of the quarantine), for people. */
export function describeRefused(entry: QuarantinedEntry, names: Names): Refusal {
  const args = (entry.args ?? {}) as Args;
  const listId = text(args.list_id) ?? (entry.name === "rename_list" ? text(args.id) : undefined);
  const why = reason(entry.error.code, entry.error.detail ?? "", names, listId);
  const keptTitle = entry.name === "add_note" ? text(args.title) : undefined;
  const kept = keptTitle === undefined ? "" : ": it was kept here, copy it or add it to another list";
  return { text: `${what(entry.name, args, names)}: ${why.text}${kept}.`, keptTitle, lost: why.lost };
}

/** A write refused before it was queued (by the client's own rules, or its local run), for people. */
export function describeFailure(error: unknown, names: Names, listId: string | undefined): string {
  if (error instanceof ForbiddenError) return `Not saved: ${reason("forbidden", error.detail, names, listId).text}.`;
  if (error instanceof ServerError) return `Not saved: ${reason(error.code, error.problem.detail ?? "", names, listId).text}.`;
  const detail = error instanceof Error ? error.message : "";
  const why = reason("mutator_failed", detail, names, listId);
  return `Not saved: ${why.text === "the server refused it" ? "something went wrong" : why.text}.`;
}
