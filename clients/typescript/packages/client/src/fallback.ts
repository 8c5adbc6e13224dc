/**
 * The default realtime source: the WebSocket stream, and long-poll (`GET /sync/poll`) when
 * something between the client and the server refuses the upgrade. A WHATWG WebSocket does not
 * say why it failed to open, so a refusal is told by its effects: the socket fails before it
 * opens `refusalsBeforePolling` times in a row, then a poll is tried. A poll that answers means
 * HTTP passes where the upgrade does not, and the source stays on polling; one that fails as
 * well means the server is out of reach, and the socket is tried again (with its backoff).
 *
 *   socket ──N failures before open──▶ poll ──first poll fails──▶ socket
 *     ▲  (opens: the count starts over)  │
 *     └────────socketRetryMs on polls────┘ (one more failure returns to polling)
 *
 * `transport` says which is in use, and the client's status shows it (`longPoll`).
 */

import { createLongPollSource, type LongPollSourceOptions } from "./longpoll.js";
import { createWebSocketSource, type RealtimeSession, type RealtimeSource, type WebSocketSourceOptions } from "./websocket.js";

/** Options of `createRealtimeSource`. */
export interface RealtimeSourceOptions {
  /** The WebSocket source's options. */
  webSocket?: WebSocketSourceOptions;
  /** The long-poll source's options. */
  longPoll?: LongPollSourceOptions;
  /** Failures to open in a row before a poll is tried (2). */
  refusalsBeforePolling?: number;
  /** How long the source polls before it tries the socket again, in milliseconds (600,000). */
  socketRetryMs?: number;
}

/** A WebSocket source that falls back to long-poll when the upgrade is refused on the way. */
export function createRealtimeSource(options: RealtimeSourceOptions = {}): RealtimeSource {
  const socket = createWebSocketSource(options.webSocket);
  const poll = createLongPollSource(options.longPoll);
  const refusals = Math.max(1, options.refusalsBeforePolling ?? 2);
  const socketRetryMs = options.socketRetryMs ?? 600_000;
  let session: RealtimeSession | undefined;
  let active: RealtimeSource = socket;
  let failures = 0;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;

  const use = (next: RealtimeSource) => {
    if (!session) return;
    clearTimeout(retryTimer);
    retryTimer = undefined;
    active.stop();
    active = next;
    if (next === poll) {
      retryTimer = setTimeout(() => {
        failures = refusals - 1;
        use(socket);
      }, socketRetryMs);
    }
    next.start(through(next, session));
  };

  /** `outer` as `source` reports to it, the switches between the two decided on the way. */
  const through = (source: RealtimeSource, outer: RealtimeSession): RealtimeSession => ({
    ...outer,
    onOpen() {
      if (source === socket) failures = 0;
      outer.onOpen();
    },
    onFailure(reason) {
      outer.onFailure(reason);
      if (active !== source || session !== outer) return;
      // Switched after the source has finished reporting, so that it stops in a settled state.
      if (source === socket && ++failures >= refusals) queueMicrotask(() => active === socket && use(poll));
      if (source === poll) queueMicrotask(() => active === poll && use(socket));
    },
  });

  return {
    get transport() {
      return active.transport;
    },
    start(next: RealtimeSession) {
      session = next;
      failures = 0;
      active = socket;
      socket.start(through(socket, next));
    },
    send(frame) {
      return active.send(frame);
    },
    reconnect() {
      active.reconnect();
    },
    retryNow() {
      active.retryNow?.();
    },
    stop() {
      clearTimeout(retryTimer);
      retryTimer = undefined;
      session = undefined;
      active.stop();
    },
    get connected() {
      return active.connected;
    },
  };
}
