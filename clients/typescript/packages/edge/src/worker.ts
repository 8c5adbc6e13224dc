/**
 * The edge relay's Worker (`docs/protocol.md#edge-relay`): it checks what comes in and hands it
 * to the bucket's Durable Object (`relay.ts`), one per bucket, named by the bucket key.
 *
 * - `POST /publish`: pings from the sync server, signed with the shared secret (`signing.ts`),
 *   refused once expired; passed to each bucket's object, which refuses a nonce it has seen.
 * - `GET /socket?bucket=…&ticket=…`: a client's WebSocket for one bucket, upgraded by the
 *   bucket's object once the ticket holds.
 * - `POST /poll`: the long-poll of a client whose upgrade is refused on the way, over several
 *   buckets at once, each with its ticket and position; answered when one of them is pinged or
 *   the wait runs out.
 *
 * The module exports only what the runtime takes from it: the handler and the object class.
 *
 * Nothing here reads a database: a ticket is the sync server's word that its holder held the
 * bucket when it was signed.
 */

import { BucketRelay } from "./relay.js";
import { checkTicket, SIGNATURE_HEADER, verify } from "./signing.js";
import type { Env } from "./workers.js";

export { BucketRelay };
export type { Env };

/** The longest a publish may be signed ahead of the relay's clock, in milliseconds. */
const PUBLISH_AHEAD_MS = 5 * 60_000;
/** The longest poll, in seconds. */
const LONGEST_POLL = 30;
/** The most buckets in one poll or publish. */
const MOST_BUCKETS = 1_000;

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  "access-control-allow-headers": "content-type",
  "access-control-max-age": "86400",
};

/** A problem document of the protocol (`docs/protocol.md#problem-documents`). */
function problem(status: number, code: string, detail: string): Response {
  const title = code.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());
  return Response.json(
    { type: `urn:engine:problem:${code}`, title, status, code, detail },
    { status, headers: { "content-type": "application/problem+json", ...CORS } },
  );
}

/** The bucket's Durable Object. */
function relayOf(env: Env, bucket: string) {
  return env.BUCKETS.get(env.BUCKETS.idFromName(bucket));
}

async function publish(request: Request, env: Env): Promise<Response> {
  const body = await request.text();
  const signature = request.headers.get(SIGNATURE_HEADER) ?? "";
  if (!(await verify(env.EDGE_SECRET, "publish", body, signature))) {
    return problem(403, "forbidden", "the publish is not signed with the relay's secret");
  }
  const message = JSON.parse(body) as { buckets?: unknown; expires?: unknown; nonce?: unknown };
  const { buckets, expires, nonce } = message;
  if (!Array.isArray(buckets) || buckets.length > MOST_BUCKETS || !buckets.every((b) => typeof b === "string")) {
    return problem(400, "malformed_request", "`buckets` is not a list of bucket keys");
  }
  if (typeof expires !== "number" || typeof nonce !== "string") {
    return problem(400, "malformed_request", "`expires` and `nonce` are missing");
  }
  const now = Date.now();
  if (expires <= now || expires > now + PUBLISH_AHEAD_MS) {
    return problem(403, "forbidden", "the publish has expired, or is dated too far ahead");
  }
  const answers = await Promise.all(
    buckets.map((bucket) =>
      relayOf(env, bucket).fetch("https://relay/ping", { method: "POST", body: JSON.stringify({ bucket, nonce, expires }) }),
    ),
  );
  const fresh = answers.filter((answer) => answer.status === 204).length;
  if (fresh === 0 && buckets.length > 0) return problem(409, "conflict", "every bucket has seen this publish: a replay");
  return new Response(null, { status: 204 });
}

async function socket(request: Request, env: Env, url: URL): Promise<Response> {
  const bucket = url.searchParams.get("bucket") ?? "";
  const ticket = url.searchParams.get("ticket") ?? "";
  const checked = await checkTicket(env.EDGE_SECRET, bucket, ticket);
  if ("refused" in checked) return problem(403, "forbidden", checked.refused);
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
    return problem(400, "malformed_request", "not a WebSocket upgrade");
  }
  const inner = new URL("https://relay/socket");
  inner.searchParams.set("bucket", bucket);
  inner.searchParams.set("expires", String(checked.expires));
  return relayOf(env, bucket).fetch(new Request(inner, request));
}

/** One bucket of a poll. */
interface Polled {
  bucket: string;
  ticket: string;
  position?: string;
}

async function poll(request: Request, env: Env): Promise<Response> {
  let body: { wait?: unknown; buckets?: unknown };
  try {
    body = (await request.json()) as typeof body;
  } catch {
    return problem(400, "malformed_request", "the body is not JSON");
  }
  const polled = body.buckets;
  if (
    !Array.isArray(polled) ||
    polled.length > MOST_BUCKETS ||
    !polled.every((p: Partial<Polled>) => typeof p?.bucket === "string" && typeof p.ticket === "string")
  ) {
    return problem(400, "malformed_request", "`buckets` is not a list of `{bucket, ticket, position?}`");
  }
  const wait = typeof body.wait === "number" && body.wait >= 0 ? Math.min(Math.floor(body.wait), LONGEST_POLL) : 25;
  for (const { bucket, ticket } of polled as Polled[]) {
    const checked = await checkTicket(env.EDGE_SECRET, bucket, ticket);
    if ("refused" in checked) return problem(403, "forbidden", `bucket \`${bucket}\`: ${checked.refused}`);
  }
  // Each bucket's object answers when pinged or at the wait; the first ping answers the poll.
  const positions: Record<string, string> = {};
  const frames: { type: "ping"; bucket: string }[] = [];
  const asks = (polled as Polled[]).map(async ({ bucket, position }) => {
    const answer = await relayOf(env, bucket).fetch("https://relay/poll", {
      method: "POST",
      body: JSON.stringify({ bucket, position, wait }),
    });
    const { position: next, pinged } = (await answer.json()) as { position: string; pinged: boolean };
    positions[bucket] = next;
    if (pinged) frames.push({ type: "ping", bucket });
    return pinged;
  });
  const anyPinged = new Promise<void>((resolve) => asks.forEach((ask) => void ask.then((pinged) => pinged && resolve(), () => undefined)));
  await Promise.race([anyPinged, Promise.allSettled(asks)]);
  // Buckets whose objects have yet to answer keep the position the client sent.
  for (const { bucket, position } of polled as Polled[]) positions[bucket] ??= position ?? "";
  return Response.json({ positions, frames }, { headers: CORS });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "OPTIONS") return new Response(null, { status: 204, headers: CORS });
    try {
      if (url.pathname === "/publish" && request.method === "POST") return await publish(request, env);
      if (url.pathname === "/socket" && request.method === "GET") return await socket(request, env, url);
      if (url.pathname === "/poll" && request.method === "POST") return await poll(request, env);
    } catch (err) {
      if (err instanceof SyntaxError) return problem(400, "malformed_request", "the body is not JSON");
      throw err;
    }
    return problem(404, "not_found", "no such route");
  },
};
