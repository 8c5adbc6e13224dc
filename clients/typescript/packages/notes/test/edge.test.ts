/**
 * The edge relay (`@engine/edge`) in the Workers runtime, run here by Miniflare (workerd, from
 * npm), fed by a real notes server that publishes to it (`ENGINE_REALTIME=edge`): two clients
 * hear each other's writes through the relay's sockets, and through its long-poll behind a proxy
 * that refuses upgrades; a revoked member gets no ticket, and tickets that expired, forged ones
 * and unsigned, expired or replayed publishes are refused, a replay also after the relay's
 * runtime restarted.
 */

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

import { Miniflare } from "miniflare";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

import { bucketKey, createWebSocketSource } from "@engine/client";
import { createEdgeSubscribeSource, sign, signTicket, SIGNATURE_HEADER, type EdgeTickets } from "@engine/edge";

import { mutators } from "../src/contract.gen.js";
import { accept, notesClient, waitFor } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";
import { Proxy } from "./support/proxy.js";

const SECRET = randomBytes(24).toString("hex");
/** The relay's sources, as workerd runs them once TypeScript's types are stripped. */
const WORKER_FILES = ["worker", "relay", "signing", "workers"];

let relay: Miniflare | undefined;
let relayOptions: ConstructorParameters<typeof Miniflare>[0] = {};
let relayUrl = "";
const env: Record<string, string> = { ENGINE_REALTIME: "edge", ENGINE_EDGE_SECRET: SECRET, ENGINE_EDGE_TICKET_SECONDS: "10" };

/** A port nobody listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

beforeAll(async () => {
  const modules = WORKER_FILES.map((name) => {
    const source = readFileSync(fileURLToPath(new URL(`../../edge/src/${name}.ts`, import.meta.url)), "utf8");
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true },
    });
    return { type: "ESModule" as const, path: `/relay/${name}.js`, contents: outputText };
  });
  const port = await freePort();
  relayOptions = {
    modules,
    modulesRoot: "/relay",
    compatibilityDate: "2026-04-01",
    durableObjects: { BUCKETS: "BucketRelay" },
    bindings: { EDGE_SECRET: SECRET },
    host: "127.0.0.1",
    port,
  };
  relay = new Miniflare(relayOptions);
  relayUrl = (await relay.ready).toString().replace(/\/$/, "");
  env.ENGINE_EDGE_URL = relayUrl;
});

afterAll(async () => {
  await relay?.dispose();
});

// Started after the relay (hooks run in order), and told its URL through `env`.
const notes = useNotesServer({ env });

/** A client of `user` whose realtime comes through the relay, and whose only pulls are the ones realtime asks for. */
const viaEdge = (user: string, relayAt?: string) =>
  notesClient(notes(), user, {
    background: true,
    pullIntervalMs: 3_600_000,
    realtime: createEdgeSubscribeSource({
      backoffBaseMs: 50,
      backoffMaxMs: 500,
      connectTimeoutMs: 2_000,
      ...(relayAt ? { relayUrl: relayAt } : {}),
    }),
  });

/** `user`'s tickets, as the server answers them. */
async function ticketsOf(user: string): Promise<EdgeTickets> {
  const response = await fetch(`${notes().url}/sync/edge-tickets`, { headers: { authorization: `Bearer ${notes().token(user)}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as EdgeTickets;
}

/** A publish of `buckets` signed with `secret`, expiring at `expires` (ms). */
function publish(buckets: string[], options: { secret?: string; expires?: number; nonce?: string } = {}) {
  const body = JSON.stringify({ buckets, expires: options.expires ?? Date.now() + 30_000, nonce: options.nonce ?? randomBytes(8).toString("hex") });
  return sign(options.secret ?? SECRET, "publish", body).then((signature) =>
    fetch(`${relayUrl}/publish`, { method: "POST", headers: { [SIGNATURE_HEADER]: signature }, body }),
  );
}

/** A socket to the relay for `bucket` with `ticket`: whether it opened, and what it heard. */
function openSocket(bucket: string, ticket: string) {
  const url = new URL(`${relayUrl.replace(/^http/, "ws")}/socket`);
  url.searchParams.set("bucket", bucket);
  url.searchParams.set("ticket", ticket);
  const socket = new WebSocket(url);
  const frames: string[] = [];
  socket.onmessage = (event) => frames.push(String(event.data));
  const opened = new Promise<boolean>((resolve) => {
    socket.onopen = () => resolve(true);
    // Node's WebSocket fires no close for an upgrade refused, only an error.
    socket.onerror = () => resolve(false);
    socket.onclose = () => resolve(false);
  });
  return { socket, frames, opened };
}

describe("edge relay", () => {
  test("two clients hear each other's writes through the relay and converge, and the server's own stream still works", async () => {
    const ann = await viaEdge("ann");
    const ben = await viaEdge("ben");
    // A client of the server's own stream, beside the relay.
    const cyd = await notesClient(notes(), "cyd", {
      background: true,
      pullIntervalMs: 3_600_000,
      realtime: createWebSocketSource({ backoffBaseMs: 50, backoffMaxMs: 500, connectTimeoutMs: 2_000 }),
    });
    await waitFor("all connected", () => ann.status.connected && ben.status.connected && cyd.status.connected);
    await mutators(ann).createList({ id: "edge-ab", title: "Edge" });
    await mutators(ann).shareList({ list_id: "edge-ab", user_id: "ben", role: "editor" });
    await mutators(ann).shareList({ list_id: "edge-ab", user_id: "cyd", role: "viewer" });
    await Promise.all([accept(notes(), "ben", "edge-ab"), accept(notes(), "cyd", "edge-ab")]);
    // Ben learns of the grant when his tickets are refreshed (half their 10 s lifetime).
    await waitFor("ben to see the shared list", () => ben.get("lists", "edge-ab")?.title === "Edge");
    const room = bucketKey("shared", ["edge-ab"]);
    expect((await ticketsOf("ben")).tickets.map((t) => t.bucket)).toContain(room);
    // Ann may hear of ben's note by the pull her new socket makes on opening; ben hears of her
    // edit only by the relay's ping, his socket open since he learned of the list.
    await mutators(ben).addNote({ id: "edge-from-ben", list_id: "edge-ab", title: "via the edge" });
    await waitFor("ann to see ben's note", () => ann.get("notes", "edge-from-ben")?.title === "via the edge");
    await mutators(ann).updateNote({ id: "edge-from-ben", title: "answered" });
    await waitFor("ben to see ann's edit", () => ben.get("notes", "edge-from-ben")?.title === "answered");
    await waitFor("cyd to see ann's edit on the server's stream", () => cyd.get("notes", "edge-from-ben")?.title === "answered");
    expect(ann.rows("notes")).toEqual(ben.rows("notes"));
    expect(cyd.rows("notes")).toEqual(ben.rows("notes"));
    await Promise.all([ann.close(), ben.close(), cyd.close()]);
  });

  test("a revoked member is issued no ticket, and tickets expired or forged are refused", async () => {
    const owner = await viaEdge("ola");
    await mutators(owner).createList({ id: "edge-rev", title: "Revoked" });
    await mutators(owner).shareList({ list_id: "edge-rev", user_id: "pim", role: "viewer" });
    await owner.sync();
    await accept(notes(), "pim", "edge-rev");
    const room = bucketKey("shared", ["edge-rev"]);
    const before = await ticketsOf("pim");
    const held = before.tickets.find((t) => t.bucket === room);
    expect(held, "a member is issued the bucket's ticket").toBeDefined();
    expect(before.url).toBe(relayUrl);

    await mutators(owner).unshareList({ list_id: "edge-rev", user_id: "pim" });
    await owner.sync();
    const after = await ticketsOf("pim");
    expect(after.tickets.map((t) => t.bucket)).not.toContain(room);

    // The relay refuses a ticket past its expiry, and one another secret signed.
    const expired = await signTicket(SECRET, room, Math.floor(Date.now() / 1000) - 1);
    const forged = await signTicket("not the relay's secret", room, Math.floor(Date.now() / 1000) + 60);
    for (const ticket of [expired, forged, held!.ticket.replace(/^\d+/, "9999999999")]) {
      expect(await openSocket(room, ticket).opened, ticket).toBe(false);
      const polled = await fetch(`${relayUrl}/poll`, { method: "POST", body: JSON.stringify({ wait: 0, buckets: [{ bucket: room, ticket }] }) });
      expect(polled.status).toBe(403);
    }
    // A ticket is good for its own bucket only.
    const own = after.tickets.find((t) => t.bucket === bucketKey("own", ["pim"]))!;
    expect(await openSocket(room, own.ticket).opened).toBe(false);

    // A socket whose ticket has run out hears no more pings: an `unauthenticated` error instead.
    const shortLived = await signTicket(SECRET, room, Math.floor(Date.now() / 1000) + 2);
    const lapsing = openSocket(room, shortLived);
    expect(await lapsing.opened).toBe(true);
    expect((await publish([room])).status).toBe(204);
    await waitFor("the ping while the ticket holds", () => lapsing.frames.length === 1);
    const expiry = Number(shortLived.split(".")[0]) * 1000;
    await waitFor("the ticket to expire", () => Date.now() > expiry, 10_000);
    expect((await publish([room])).status).toBe(204);
    await waitFor("the relay to refuse the socket", () => lapsing.frames.length === 2);
    expect(lapsing.frames.map((f) => JSON.parse(f) as { type: string; code?: string })).toEqual([
      { type: "ping", bucket: room },
      expect.objectContaining({ type: "error", code: "unauthenticated" }),
    ]);
    lapsing.socket.close();
    await owner.close();
  });

  test("the relay refuses publishes unsigned, expired or replayed", async () => {
    const bucket = bucketKey("own", ["nobody"]);
    expect((await publish([bucket], { secret: "not the relay's secret" })).status).toBe(403);
    expect((await publish([bucket], { expires: Date.now() - 1 })).status).toBe(403);
    const nonce = randomBytes(8).toString("hex");
    expect((await publish([bucket], { nonce })).status).toBe(204);
    expect((await publish([bucket], { nonce })).status).toBe(409);
    // The runtime started afresh (the same options restart workerd; storage stays): the bucket's
    // object comes back without its memory and still knows the nonce.
    await relay?.setOptions(relayOptions);
    await relay?.ready;
    expect((await publish([bucket], { nonce })).status).toBe(409);
    expect((await publish([bucket])).status).toBe(204);
  });

  test("behind a proxy that refuses upgrades, writes arrive by the relay's long-poll", async () => {
    const proxy = await Proxy.start(relayUrl, { refuseUpgrades: true });
    const fay = await viaEdge("fay", proxy.url);
    const gus = await viaEdge("gus", proxy.url);
    await mutators(fay).createList({ id: "edge-fg", title: "Polled" });
    await mutators(fay).shareList({ list_id: "edge-fg", user_id: "gus", role: "editor" });
    await accept(notes(), "gus", "edge-fg");
    await waitFor("gus to see the shared list", () => gus.get("lists", "edge-fg")?.title === "Polled");
    await waitFor("both long-poll the relay", () => [fay, gus].every((c) => c.status.longPoll && c.status.connected));
    expect(proxy.refusedUpgrades).toBeGreaterThanOrEqual(2);
    await mutators(gus).addNote({ id: "edge-from-gus", list_id: "edge-fg", title: "polled" });
    await waitFor("fay to see gus's note", () => fay.get("notes", "edge-from-gus")?.title === "polled");
    // Fay may have seen that one by the pull a new bucket's first poll makes; the next comes by a ping.
    await mutators(gus).addNote({ id: "edge-from-gus-2", list_id: "edge-fg", title: "pinged" });
    await waitFor("fay to see gus's second note", () => fay.get("notes", "edge-from-gus-2")?.title === "pinged");
    expect(proxy.seen.some((s) => s.path === "/poll" && s.status === 200)).toBe(true);
    await Promise.all([fay.close(), gus.close(), proxy.stop()]);
  });
});
