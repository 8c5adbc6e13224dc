/**
 * A reconnecting WebSocket to `/sync/stream` over any WHATWG WebSocket: exponential backoff
 * with full jitter between attempts, reset only once a connection has stayed up long enough
 * (the stability gate); a connect timeout; a fresh token on every connection, sent as the first
 * frame (browsers cannot set headers), and again before it expires; heartbeats; frames paced
 * below the server's limit.
 *
 * A WHATWG socket cannot send WebSocket pings, and the server answers nothing to a heartbeat, so
 * a dead connection shows only as frames that never leave: a socket whose send buffer has not
 * drained over a whole heartbeat interval counts as lost.
 */

import { tokenClaims } from "./auth.js";
import { Backoff } from "./backoff.js";
import { STREAM_SUBPROTOCOL, parseServerFrame, type ClientFrame, type ServerFrame } from "./wire.js";

/** The part of a WHATWG `WebSocket` the source uses. */
export interface WebSocketLike {
  readonly bufferedAmount: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/** Opens a WebSocket: `(url, protocols) => new WebSocket(url, protocols)`. */
export type WebSocketFactory = (url: string, protocols: string[]) => WebSocketLike;

/** How the source reconnects; every time is in milliseconds. */
export interface ReconnectOptions {
  /** The first wait after a failure (500). */
  backoffBaseMs?: number;
  /** The longest wait (30,000). */
  backoffMaxMs?: number;
  /** A connection up this long resets the backoff (5,000). */
  stableAfterMs?: number;
  /** How long opening may take (5,000). */
  connectTimeoutMs?: number;
  /** How often a heartbeat goes out (15,000; the server closes a socket silent for 30 s). */
  heartbeatMs?: number;
}

/** How a closed connection ended. */
export interface CloseInfo {
  code: number;
  reason: string;
  /** The code of the server's `error` frame before the close, if it sent one. */
  error?: string;
}

/** What the client gives a realtime source to run with. */
export interface RealtimeSession {
  /** The stream's URL (`ws://…/sync/stream`). */
  url: string;
  /** The long-poll's URL (`http://…/sync/poll`), for a source that polls. */
  pollUrl: string;
  /** The token to authenticate the next connection with. */
  token(): Promise<string>;
  /** The server refused the token. */
  refresh(): Promise<void>;
  /** A connection is up and authenticated as far as the client can tell. */
  onOpen(): void;
  onFrame(frame: ServerFrame): void;
  /** A connection that was up went down; another attempt follows. */
  onClose(info: CloseInfo): void;
  /** An attempt failed before the connection was up. */
  onFailure(reason: string): void;
}

/** A source of realtime frames that keeps itself connected. */
export interface RealtimeSource {
  /** How frames come now: a WebSocket, or long-poll (which carries no presence). */
  readonly transport?: "websocket" | "long-poll";
  start(session: RealtimeSession): void;
  /** Queue a frame for the connection that is up; `false` when none is. */
  send(frame: ClientFrame): boolean;
  /** Close the connection that is up and open a new one at once. */
  reconnect(): void;
  /** Waiting to reconnect: try at once, with the backoff reset (the platform went online). */
  retryNow?(): void;
  /** A pull found the buckets held changed (a source that connects per bucket follows them). */
  heldChanged?(buckets: readonly string[]): void;
  stop(): void;
  readonly connected: boolean;
}

/** Options of `createWebSocketSource`. */
export interface WebSocketSourceOptions extends ReconnectOptions {
  /** Opens sockets (`new WebSocket(url, protocols)` of the global by default). */
  webSocket?: WebSocketFactory;
  /** A uniform random number in [0, 1), for the jitter. */
  random?: () => number;
}

/** Frames a second the source sends at most, and at once: half the server's default limits. */
const FRAMES_PER_SECOND = 10;
const FRAME_BURST = 25;
/** How long before a token's `exp` a fresh one is asked for. */
const REAUTH_AHEAD_MS = 30_000;
/** The close code of a server that is restarting (another instance takes the connection). */
const SERVICE_RESTART = 1012;
/** The most a reconnection waits after a restart's close. */
const RESTART_JITTER_MS = 250;

/** A reconnecting WebSocket source (`RealtimeSource`) over any WHATWG WebSocket factory. */
export function createWebSocketSource(options: WebSocketSourceOptions = {}): RealtimeSource {
  const factory = options.webSocket ?? defaultFactory();
  const settings = {
    stableAfterMs: options.stableAfterMs ?? 5_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    heartbeatMs: options.heartbeatMs ?? 15_000,
  };
  const random = options.random ?? Math.random;
  const backoff = new Backoff(options.backoffBaseMs ?? 500, options.backoffMaxMs ?? 30_000, random);

  let session: RealtimeSession | undefined;
  let stopped = true;
  let socket: WebSocketLike | undefined;
  let open = false;
  let openedAt = 0;
  let attemptTimer: ReturnType<typeof setTimeout> | undefined;
  let connectTimer: ReturnType<typeof setTimeout> | undefined;
  let heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  let reauthTimer: ReturnType<typeof setTimeout> | undefined;
  let paceTimer: ReturnType<typeof setTimeout> | undefined;
  let queue: string[] = [];
  let tokens = FRAME_BURST;
  let tokensAt = Date.now();
  let lastError: string | undefined;

  const clearTimers = () => {
    for (const timer of [connectTimer, reauthTimer, paceTimer, attemptTimer]) clearTimeout(timer);
    clearInterval(heartbeatTimer);
    connectTimer = reauthTimer = paceTimer = attemptTimer = heartbeatTimer = undefined;
  };

  const pump = () => {
    paceTimer = undefined;
    const now = Date.now();
    tokens = Math.min(FRAME_BURST, tokens + ((now - tokensAt) / 1000) * FRAMES_PER_SECOND);
    tokensAt = now;
    while (queue.length > 0 && tokens >= 1 && socket && open) {
      tokens -= 1;
      try {
        socket.send(queue.shift()!);
      } catch {
        lost({ code: 1006, reason: "send failed" });
        return;
      }
    }
    if (queue.length > 0 && open) {
      paceTimer = setTimeout(pump, Math.ceil(((1 - tokens) / FRAMES_PER_SECOND) * 1000));
    }
  };

  const enqueue = (frame: ClientFrame) => {
    queue.push(JSON.stringify(frame));
    if (paceTimer === undefined) pump();
  };

  /** Drop the socket (its late events are ignored) and schedule the next attempt. */
  const lost = (info: CloseInfo) => {
    const current = socket;
    if (!current) return;
    socket = undefined;
    current.onopen = current.onmessage = current.onclose = current.onerror = null;
    try {
      current.close();
    } catch {
      // Already closed.
    }
    const wasOpen = open;
    open = false;
    queue = [];
    clearTimers();
    if (wasOpen && Date.now() - openedAt >= settings.stableAfterMs) backoff.reset();
    const refused = info.error === "unauthenticated";
    if (wasOpen) session?.onClose(info);
    else session?.onFailure(info.error ?? info.reason);
    if (stopped) return;
    // A server restarting (1012) sends its sockets to another instance: come back at once,
    // with a short jitter so they do not all arrive together, and start the backoff over.
    if (info.code === SERVICE_RESTART) backoff.reset();
    const wait = info.code === SERVICE_RESTART ? Math.floor(random() * RESTART_JITTER_MS) : backoff.next();
    attemptTimer = setTimeout(() => {
      attemptTimer = undefined;
      void (refused ? session!.refresh().catch(() => undefined) : Promise.resolve()).then(attempt);
    }, wait);
  };

  const scheduleReauth = (token: string) => {
    const exp = tokenClaims(token)?.exp;
    if (typeof exp !== "number") return;
    const due = Math.max(1_000, exp * 1000 - Date.now() - REAUTH_AHEAD_MS);
    reauthTimer = setTimeout(async () => {
      reauthTimer = undefined;
      const current = socket;
      try {
        const fresh = await session!.token();
        if (socket !== current || !open) return;
        if (fresh !== token) enqueue({ type: "auth", token: fresh });
        scheduleReauth(fresh);
      } catch {
        // The connection ends at `exp`; the next one asks again.
      }
    }, due);
  };

  const attempt = async () => {
    if (stopped || socket || !session) return;
    let token: string;
    try {
      token = await session.token();
    } catch (err) {
      session.onFailure(`no token: ${err instanceof Error ? err.message : String(err)}`);
      if (!stopped) attemptTimer = setTimeout(() => void attempt(), backoff.next());
      return;
    }
    if (stopped || socket) return;
    let current: WebSocketLike;
    try {
      current = factory(session.url, [STREAM_SUBPROTOCOL]);
    } catch (err) {
      session.onFailure(err instanceof Error ? err.message : String(err));
      attemptTimer = setTimeout(() => void attempt(), backoff.next());
      return;
    }
    socket = current;
    lastError = undefined;
    connectTimer = setTimeout(() => lost({ code: 1006, reason: "the stream did not open in time" }), settings.connectTimeoutMs);
    current.onopen = () => {
      clearTimeout(connectTimer);
      connectTimer = undefined;
      open = true;
      openedAt = Date.now();
      tokens = FRAME_BURST;
      tokensAt = openedAt;
      enqueue({ type: "auth", token });
      scheduleReauth(token);
      let bufferedBefore = 0;
      heartbeatTimer = setInterval(() => {
        const buffered = current.bufferedAmount;
        if (buffered > 0 && bufferedBefore > 0) {
          lost({ code: 1006, reason: "the connection stopped sending" });
          return;
        }
        bufferedBefore = buffered;
        enqueue({ type: "heartbeat" });
      }, settings.heartbeatMs);
      session?.onOpen();
    };
    current.onmessage = (event) => {
      if (typeof event.data !== "string") return;
      const frame = parseServerFrame(event.data);
      if (!frame) return;
      if (frame.type === "error") lastError = frame.code;
      session?.onFrame(frame);
    };
    current.onclose = (event) => {
      lost({ code: event.code, reason: event.reason, ...(lastError === undefined ? {} : { error: lastError }) });
    };
    current.onerror = () => {
      // A close event follows, except that some WebSockets (Node 20's) fire none for an upgrade
      // that was refused: that attempt has failed now, not at the connect timeout.
      if (!open) lost({ code: 1006, reason: "the stream did not open" });
    };
  };

  return {
    transport: "websocket",
    start(next: RealtimeSession) {
      session = next;
      stopped = false;
      void attempt();
    },
    send(frame: ClientFrame) {
      if (!open) return false;
      enqueue(frame);
      return true;
    },
    retryNow() {
      if (stopped || socket || !session) return;
      clearTimeout(attemptTimer);
      attemptTimer = undefined;
      backoff.reset();
      void attempt();
    },
    reconnect() {
      if (!socket) return;
      lost({ code: 1000, reason: "reconnecting" });
      clearTimeout(attemptTimer);
      attemptTimer = undefined;
      void attempt();
    },
    stop() {
      stopped = true;
      const current = socket;
      clearTimers();
      if (current) {
        socket = undefined;
        open = false;
        current.onopen = current.onmessage = current.onclose = current.onerror = null;
        try {
          current.close(1000, "client closed");
        } catch {
          // Already closed.
        }
      }
    },
    get connected() {
      return open;
    },
  };
}

function defaultFactory(): WebSocketFactory {
  return (url, protocols) => {
    const WebSocketClass = (globalThis as { WebSocket?: new (url: string, protocols: string[]) => WebSocketLike }).WebSocket;
    if (!WebSocketClass) {
      throw new Error("no global WebSocket: pass `webSocket: (url, protocols) => new WebSocket(url, protocols)`");
    }
    return new WebSocketClass(url, protocols);
  };
}
