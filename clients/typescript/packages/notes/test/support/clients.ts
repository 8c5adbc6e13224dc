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
