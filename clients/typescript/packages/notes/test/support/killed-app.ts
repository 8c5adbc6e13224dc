/**
 * An app on a phone, as a process of its own that a test kills with SIGKILL: a native client over
 * `mobileSqlitePersistence` on the database file `ENGINE_DB`, a user's notes server at
 * `ENGINE_URL`. It pulls, queues a list and `ENGINE_NOTES` notes, prints `queued`, and then pushes
 * one mutation per request until it is killed. Built into plain JavaScript by `mobile-sqlite.test.ts`.
 */

import { createEngineNativeClient } from "@engine/mobile";

import { mutators, schema, type Mutators, type Tables } from "../../src/contract.gen.js";
import { optimistic } from "../../src/optimistic.js";
import { betterSqlite } from "./sqlite.js";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const phone = await createEngineNativeClient<Tables, Mutators>({
  url: env("ENGINE_URL"),
  schema,
  auth: env("ENGINE_TOKEN"),
  optimistic,
  realtime: false,
  background: false,
  pushBatch: 1,
  database: betterSqlite(env("ENGINE_DB")),
});
await phone.pull();
await mutators(phone).createList({ id: "killed", title: "Killed mid-outbox" });
for (let i = 0; i < Number(env("ENGINE_NOTES")); i++) {
  await mutators(phone).addNote({ id: `killed-${i}`, list_id: "killed", title: `Note ${i}` });
}
process.stdout.write("queued\n");
for (;;) await phone.push();
