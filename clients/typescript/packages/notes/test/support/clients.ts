/**
 * Clients of the notes app for tests, and a wait for what the background work brings about.
 */

import { createEngineClient, type EngineClient, type EngineClientOptions } from "@engine/client";

import { schema, type Mutators, type Tables } from "../../src/contract.gen.js";
import { optimistic } from "../../src/optimistic.js";
import type { NotesServer } from "./server.js";

export type NotesClient = EngineClient<Tables, Mutators>;

/** A client of `server` for `user` with the notes app's optimistic mutators, over memory. */
export function notesClient(
  server: NotesServer | { url: string; token(user: string): string },
  user: string,
  options: Partial<EngineClientOptions<Tables, Mutators>> = {},
): Promise<NotesClient> {
  return createEngineClient({
    url: server.url,
    schema,
    auth: server.token(user),
    optimistic,
    realtime: false,
    background: false,
    retry: { backoffBaseMs: 20, backoffMaxMs: 500 },
    ...options,
  });
}

/** Wait until `condition` holds (checked every 10 ms, up to `timeoutMs`); fail with `what` otherwise. */
export async function waitFor(what: string, condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * `user` accepts its invitation to list `listId`: a share is an invitation
 * (`invite(ListMember::accepted)`), and a test whose share means the member to hold the list, as
 * every share did before invitations, follows it with this. `accept_list` goes from a device of its
 * own that pushes nothing else; a share a client pushes in the background may not be there yet, so
 * a refusal is tried again, from another fresh device, for up to 20 s.
 */
export async function accept(
  server: NotesServer | { url: string; token(user: string): string },
  user: string,
  listId: string,
): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const body = {
      clientId: crypto.randomUUID(),
      mutations: [{ mutationId: 1, clientMutationId: crypto.randomUUID(), name: "accept_list", args: { list_id: listId } }],
    };
    const response = await fetch(`${server.url.replace(/\/$/, "")}/sync/push`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token(user)}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`accept_list answered ${response.status}`);
    const result = ((await response.json()) as { results: { status: string }[] }).results[0];
    if (result?.status === "applied") return;
    if (Date.now() > deadline) throw new Error(`${user} could not accept list ${listId}: ${JSON.stringify(result)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
