// A Node program of a project that installed the published packages, as `packages.test.ts`
// runs it: plain ESM, no TypeScript, no workspace. Against the notes server at `ENGINE_URL`,
// alice creates and shares a list, bob accepts it, and bob's client sees it. Before that, a client asked for
// realtime where there is no `WebSocket` must fail at creation. Prints what it saw as JSON.

import { readFileSync } from "node:fs";

import { createEngineClient, createEngineStatus, defineSchema } from "@engine/client";
import { createCrdtText, engineCollectionOptions } from "@engine/db-collection";
import { createEngineNativeClient } from "@engine/mobile";

// Node 20 has no `WebSocket` unless started with `--experimental-websocket`; later versions do.
delete globalThis.WebSocket;

const url = process.env.ENGINE_URL;
const schema = defineSchema(JSON.parse(readFileSync(process.env.ENGINE_SCHEMA, "utf8")));
const client = (token) => createEngineClient({ url, schema, auth: token, realtime: false, background: false });

let refused = null;
try {
  const unexpected = await createEngineClient({ url, schema, auth: process.env.ALICE_TOKEN });
  await unexpected.close();
} catch (err) {
  refused = err.message;
}

const alice = await client(process.env.ALICE_TOKEN);
await alice.mutate("create_list", { id: "installed", title: "From the tarballs" });
await alice.mutate("share_list", { list_id: "installed", user_id: "bob", role: "viewer" });
await alice.sync();
const bob = await client(process.env.BOB_TOKEN);
// A share is an invitation: the list reaches bob once he accepts it.
await bob.mutate("accept_list", { list_id: "installed" });
await bob.sync();
await bob.pull();

console.log(
  JSON.stringify({
    refused,
    pending: createEngineStatus(alice).pending,
    seenByBob: bob.get("lists", "installed")?.title ?? null,
    loaded: [engineCollectionOptions, createCrdtText, createEngineNativeClient].map((f) => typeof f),
  }),
);
await Promise.all([alice.close(), bob.close()]);
