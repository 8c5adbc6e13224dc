/**
 * `createEdgeSubscribeSource`: realtime through the edge relay (`worker.ts`) rather than the
 * sync server's own stream. It asks the sync server for a ticket per bucket held
 * (`GET /sync/edge-tickets`), opens one WebSocket per bucket to the relay (each a
 * `createWebSocketSource`, with its backoff, connect timeout and heartbeat), and turns the
 * relay's pings into pulls as the other sources do. Tickets are asked for afresh on every
 * reconnection and at half their lifetime; a fresh ticket goes to an open socket as an `auth`
 * frame. A bucket the answer no longer names (a revoked membership) loses its socket, and one
 * it names newly gets one; either way the client is told `buckets_changed` and pulls.
 *
 *   tickets ──▶ sockets (one per bucket) ──N failures before open──▶ long-poll ──first poll fails──▶ sockets
 *     ▲             │  (an open resets the count)                        │
 *     └─half life───┴──────────────────────socketRetryMs on polls────────┘
 *
 * Long-poll (`POST <relay>/poll`) carries every bucket's ticket and position in one request;
 * the relay answers when one of them is pinged. Neither way carries presence: the relay has
 * none, and `send` refuses every frame.
 */

import {
  createWebSocketSource,
  type CloseInfo,
  type Fetch,
  type RealtimeSession,
  type RealtimeSource,
  type ServerFrame,
  type WebSocketSourceOptions,
} from "@engine/client";

/** The answer of `GET /sync/edge-tickets` (`docs/protocol.md#get-syncedge-tickets`). */
export interface EdgeTickets {
  /** The relay's base URL. */
  url: string;
  /** When every ticket of the answer stops working (RFC 3339). */
  expiresAt: string;
  tickets: { bucket: string; ticket: string }[];
}

/** Options of `createEdgeSubscribeSource`. */
export interface EdgeSubscribeSourceOptions extends WebSocketSourceOptions {
  /** The `fetch` for tickets and polls (the global one by default). */
  fetch?: Fetch;
  /** The relay's URL, when this client reaches it by another address than the server names. */
  relayUrl?: string;
  /** Where tickets come from (`<server>/sync/edge-tickets`, beside the session's `pollUrl`, by default). */
  ticketsUrl?: string;
  /** Failures to open in a row before long-poll is tried (2). */
  refusalsBeforePolling?: number;
  /** How long the source polls before it tries sockets again, in milliseconds (600,000). */
  socketRetryMs?: number;
  /** How long the relay is asked to wait for a ping, in seconds (25; it caps it at 30). */
  waitSeconds?: number;
}

/** Tickets asked for this recently count as fresh for a reconnection, in milliseconds. */
const FRESH_MS = 1_000;
/** How long past its `wait` a poll counts as lost. */
const POLL_GRACE_MS = 30_000;

/** Realtime through the edge relay, with tickets from the sync server. */
export function createEdgeSubscribeSource(options: EdgeSubscribeSourceOptions = {}): RealtimeSource {
  const fetcher: Fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const refusals = Math.max(1, options.refusalsBeforePolling ?? 2);
  const socketRetryMs = options.socketRetryMs ?? 600_000;
  const waitSeconds = Math.max(0, Math.floor(options.waitSeconds ?? 25));
  const retryMs = () => Math.min(options.backoffMaxMs ?? 30_000, options.backoffBaseMs ?? 500);

  let session: RealtimeSession | undefined;
  let run = 0;
  let mode: "websocket" | "long-poll" = "websocket";
  let up = false;
  let failures = 0;
  let held: Map<string, string> | undefined;
  let relayUrl = "";
  let fetchedAt = 0;
  let lifetimeMs = 0;
  let asking: Promise<void> | undefined;
  const sockets = new Map<string, RealtimeSource>();
  let refreshTimer: ReturnType<typeof setTimeout> | undefined;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let pollAbort: AbortController | undefined;
  /** The poll in flight was cut short to poll the buckets of fresh tickets. */
  let renewed = false;

  const ticketsUrl = (current: RealtimeSession) =>
    options.ticketsUrl ?? current.pollUrl.replace(/sync\/poll$/, "sync/edge-tickets");

  /** Ask the sync server for tickets; once more after `refresh` when it refuses the token. */
  const askTickets = async (current: RealtimeSession): Promise<EdgeTickets> => {
    for (let attempt = 0; ; attempt++) {
      const token = await current.token();
      const response = await fetcher(ticketsUrl(current), { method: "GET", headers: { authorization: `Bearer ${token}` } });
      if (response.status === 401 && attempt === 0) {
        await current.refresh();
        continue;
      }
      if (!response.ok) throw new Error(`edge tickets: HTTP ${response.status}: ${await response.text()}`);
      return (await response.json()) as EdgeTickets;
    }
  };

  /**
   * Tickets no older than `maxAgeMs` (one request for every caller meanwhile), the sockets
   * brought to the buckets they name, and `buckets_changed` told when those changed.
   */
  const tickets = (maxAgeMs: number): Promise<void> => {
    if (held && Date.now() - fetchedAt < maxAgeMs) return Promise.resolve();
    const mine = run;
    asking ??= (async () => {
      const current = session;
      if (!current) return;
      const answer = await askTickets(current);
      if (mine !== run) return;
      const next = new Map(answer.tickets.map(({ bucket, ticket }) => [bucket, ticket]));
      const changed = held !== undefined && (held.size !== next.size || [...next.keys()].some((b) => !held!.has(b)));
      held = next;
      relayUrl = (options.relayUrl ?? answer.url).replace(/\/$/, "");
      fetchedAt = Date.now();
      lifetimeMs = Math.max(2_000, Date.parse(answer.expiresAt) - fetchedAt);
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(() => void tickets(0).catch((err) => current.onFailure(describe(err))), lifetimeMs / 2);
      if (mode === "websocket") followTickets();
      else if (changed) {
        renewed = true;
        pollAbort?.abort();
      }
      if (changed) current.onFrame({ type: "buckets_changed" });
    })().finally(() => {
      asking = undefined;
    });
    return asking;
  };

  /** One socket per bucket held; each open one given its fresh ticket. */
  const followTickets = () => {
    if (!held || !session) return;
    for (const [bucket, socket] of sockets) {
      if (!held.has(bucket)) {
        socket.stop();
        sockets.delete(bucket);
      } else {
        socket.send({ type: "auth", token: held.get(bucket)! });
      }
    }
    for (const bucket of held.keys()) {
      if (sockets.has(bucket)) continue;
      const socket = createWebSocketSource(options);
      sockets.set(bucket, socket);
      socket.start(bucketSession(bucket, session));
    }
    settle();
  };

  /** Tell the client whether realtime is up: every bucket's socket open (the poll says so itself). */
  const settle = (info: CloseInfo = { code: 1000, reason: "a bucket's socket is not open" }) => {
    if (mode !== "websocket") return;
    const now = held !== undefined && [...sockets.values()].every((s) => s.connected);
    if (now === up) return;
    up = now;
    if (now) session?.onOpen();
    else session?.onClose(info);
  };

  const bucketSession = (bucket: string, outer: RealtimeSession): RealtimeSession => ({
    get url() {
      const url = new URL(`${relayUrl.replace(/^http/, "ws")}/socket`);
      url.searchParams.set("bucket", bucket);
      url.searchParams.set("ticket", held?.get(bucket) ?? "");
      return url.toString();
    },
    pollUrl: outer.pollUrl,
    // Every connection of the bucket's socket after the first asks for fresh tickets.
    token: async () => {
      await tickets(FRESH_MS);
      const ticket = held?.get(bucket);
      if (ticket === undefined) throw new Error(`no ticket for ${bucket}: the bucket is no longer held`);
      return ticket;
    },
    refresh: () => tickets(0),
    onOpen() {
      failures = 0;
      // Pings of the bucket while its socket was down are lost: pull.
      outer.onFrame({ type: "ping", bucket });
      settle();
    },
    onFrame(frame: ServerFrame) {
      if (frame.type === "ping") outer.onFrame(frame);
      // The relay refused the ticket (expired): fresh tickets, then a fresh socket, unless the
      // bucket is no longer held and its socket went with the tickets.
      if (frame.type === "error") {
        void tickets(0)
          .then(() => sockets.get(bucket)?.reconnect())
          .catch((err) => outer.onFailure(describe(err)));
      }
    },
    onClose(info) {
      settle(info);
    },
    onFailure(reason) {
      outer.onFailure(`edge ${bucket}: ${reason}`);
      if (mode === "websocket" && ++failures >= refusals) queueMicrotask(() => mode === "websocket" && usePolling());
    },
  });

  const stopSockets = () => {
    for (const socket of sockets.values()) socket.stop();
    sockets.clear();
  };

  const usePolling = () => {
    const current = session;
    if (!current) return;
    stopSockets();
    mode = "long-poll";
    if (up) {
      up = false;
      current.onClose({ code: 1000, reason: "switching to long-poll" });
    }
    const mine = ++run;
    retryTimer = setTimeout(() => mine === run && useSockets(), socketRetryMs);
    void pollLoop(current, mine);
  };

  const useSockets = () => {
    const current = session;
    if (!current) return;
    clearTimeout(retryTimer);
    pollAbort?.abort();
    if (up) {
      up = false;
      current.onClose({ code: 1000, reason: "switching to sockets" });
    }
    mode = "websocket";
    failures = refusals - 1;
    const mine = ++run;
    held = undefined;
    tickets(0)
      .catch((err) => {
        current.onFailure(describe(err));
        if (mine === run) retryTimer = setTimeout(useSockets, retryMs());
      });
  };

  const pollLoop = async (current: RealtimeSession, mine: number) => {
    const positions = new Map<string, string>();
    let answered = false;
    while (mine === run) {
      try {
        await tickets(lifetimeMs / 2);
        if (mine !== run) return;
        const buckets = [...(held ?? new Map<string, string>())].map(([bucket, ticket]) => ({
          bucket,
          ticket,
          ...(positions.has(bucket) ? { position: positions.get(bucket) } : {}),
        }));
        renewed = false;
        pollAbort = new AbortController();
        const timer = setTimeout(() => pollAbort?.abort(), waitSeconds * 1000 + POLL_GRACE_MS);
        let response: Response;
        try {
          response = await fetcher(`${relayUrl}/poll`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ wait: waitSeconds, buckets }),
            signal: pollAbort.signal,
          });
        } finally {
          clearTimeout(timer);
        }
        if (mine !== run) return;
        if (response.status === 403) {
          // A ticket refused: ask for fresh ones, which drop the bucket if it is no longer held.
          await tickets(0);
          continue;
        }
        if (!response.ok) throw new Error(`edge poll: HTTP ${response.status}`);
        const answer = (await response.json()) as { positions: Record<string, string>; frames: ServerFrame[] };
        for (const [bucket, position] of Object.entries(answer.positions)) positions.set(bucket, position);
        answered = true;
        if (!up) {
          up = true;
          current.onOpen();
        }
        for (const frame of answer.frames) if (frame.type === "ping") current.onFrame(frame);
      } catch (err) {
        if (mine !== run) return;
        if (renewed) {
          renewed = false;
          continue;
        }
        current.onFailure(describe(err));
        if (up) {
          up = false;
          current.onClose({ code: 1006, reason: describe(err) });
        }
        // A first poll that fails as well: the relay is out of reach, not the upgrade refused.
        if (!answered) {
          useSockets();
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, retryMs()));
      }
    }
  };

  return {
    get transport() {
      return mode;
    },
    start(next: RealtimeSession) {
      this.stop();
      session = next;
      mode = "websocket";
      failures = 0;
      const mine = run;
      tickets(0).catch((err) => {
        next.onFailure(describe(err));
        if (mine === run) retryTimer = setTimeout(useSockets, retryMs());
      });
    },
    send() {
      // The relay takes no subscription and no presence.
      return false;
    },
    reconnect() {
      if (session) this.start(session);
    },
    retryNow() {
      for (const socket of sockets.values()) socket.retryNow?.();
    },
    heldChanged(buckets: readonly string[]) {
      // The client learned of a bucket granted or lost before the tickets did: ask now.
      const current = session;
      if (!current || !held || (buckets.length === held.size && buckets.every((b) => held!.has(b)))) return;
      tickets(0).catch((err) => current.onFailure(describe(err)));
    },
    stop() {
      run += 1;
      clearTimeout(refreshTimer);
      clearTimeout(retryTimer);
      pollAbort?.abort();
      stopSockets();
      if (up) {
        up = false;
        session?.onClose({ code: 1000, reason: "stopped" });
      }
      held = undefined;
      session = undefined;
    },
    get connected() {
      return up;
    },
  };
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
