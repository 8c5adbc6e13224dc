/**
 * Realtime over plain HTTP, for a network that refuses WebSocket upgrades: `GET /sync/poll`
 * (`docs/protocol.md#get-syncpoll`) again and again, each poll passing the `position` of the one
 * before, so a ping that comes between two polls is in the second's answer. The frames are the
 * stream's `ping` and `buckets_changed`; no presence goes either way.
 *
 *   stopped ──start──▶ polling ──answer──▶ up (onOpen once) ──answer──▶ up …
 *                         │                     │
 *                         └──failure──▶ waiting (backoff, or Retry-After) ──▶ polling
 *
 * A failure before the first answer is reported with `onFailure`, one after it with `onClose`;
 * either way the source polls again after a backoff, with a fresh token (after `refresh` when
 * the server refused the token).
 */

import { Backoff } from "./backoff.js";
import { isProblem, parseServerFrame, type ServerFrame } from "./wire.js";
import { describe, readJson, retryAfterMs, type Fetch } from "./remote.js";
import type { RealtimeSession, RealtimeSource } from "./websocket.js";

/** Options of `createLongPollSource`. */
export interface LongPollSourceOptions {
  /** The `fetch` to poll with (the global one by default). */
  fetch?: Fetch;
  /** How long the server is asked to wait for a frame, in seconds (25; the server caps it at 30). */
  waitSeconds?: number;
  /** The first wait after a failed poll, in milliseconds (500). */
  backoffBaseMs?: number;
  /** The longest wait (30,000). */
  backoffMaxMs?: number;
  /** A uniform random number in [0, 1), for the jitter. */
  random?: () => number;
}

/** How long past its `wait` a poll counts as lost. */
const POLL_GRACE_MS = 30_000;

/** A long-polling source (`RealtimeSource`): pings and `buckets_changed`, never presence. */
export function createLongPollSource(options: LongPollSourceOptions = {}): RealtimeSource {
  const fetcher: Fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const waitSeconds = Math.max(0, Math.floor(options.waitSeconds ?? 25));
  const backoff = new Backoff(options.backoffBaseMs ?? 500, options.backoffMaxMs ?? 30_000, options.random);
  let session: RealtimeSession | undefined;
  let run = 0;
  let up = false;
  let abort: AbortController | undefined;
  let waitTimer: ReturnType<typeof setTimeout> | undefined;
  let wake: (() => void) | undefined;

  /** Poll until `run` moves on (`stop`, `reconnect`). */
  const loop = async (mine: number) => {
    let position: string | undefined;
    let refused = false;
    while (mine === run && session) {
      const current = session;
      let delay: number;
      try {
        if (refused) await current.refresh().catch(() => undefined);
        refused = false;
        const answer = await pollOnce(current, position);
        if (mine !== run) return;
        backoff.reset();
        position = answer.position;
        if (!up) {
          up = true;
          current.onOpen();
        }
        for (const frame of answer.frames) current.onFrame(frame);
        continue;
      } catch (err) {
        if (mine !== run) return;
        const failure = err instanceof PollFailure ? err : new PollFailure(describe(err));
        refused = failure.status === 401;
        if (up) current.onClose({ code: 1006, reason: failure.message });
        else current.onFailure(failure.message);
        up = false;
        position = undefined;
        delay = Math.max(backoff.next(), failure.retryAfterMs ?? 0);
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        waitTimer = setTimeout(resolve, delay);
      });
      wake = undefined;
    }
  };

  const pollOnce = async (current: RealtimeSession, position: string | undefined) => {
    const url = new URL(current.pollUrl);
    url.searchParams.set("wait", String(waitSeconds));
    if (position !== undefined) url.searchParams.set("position", position);
    const token = await current.token();
    abort = new AbortController();
    const timer = setTimeout(() => abort?.abort(), waitSeconds * 1000 + POLL_GRACE_MS);
    let response: Response;
    let text: string;
    try {
      response = await fetcher(url.toString(), { method: "GET", headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
      text = await response.text();
    } catch (err) {
      throw new PollFailure(`poll: ${describe(err)}`);
    } finally {
      clearTimeout(timer);
    }
    const json = readJson(text);
    if (!response.ok) {
      const detail = isProblem(json) ? `${json.code}: ${json.detail ?? ""}` : "not the engine's answer";
      throw new PollFailure(`poll: HTTP ${response.status}: ${detail}`, response.status, retryAfterMs(response.headers.get("retry-after")));
    }
    return readAnswer(json);
  };

  const interrupt = () => {
    run += 1;
    abort?.abort();
    clearTimeout(waitTimer);
    wake?.();
    if (up) {
      up = false;
      session?.onClose({ code: 1000, reason: "stopped" });
    }
  };

  return {
    transport: "long-poll",
    start(next: RealtimeSession) {
      interrupt();
      session = next;
      void loop(run);
    },
    send() {
      // Nothing goes to the server on a poll: no subscription, no presence.
      return false;
    },
    reconnect() {
      if (!session) return;
      interrupt();
      void loop(run);
    },
    retryNow() {
      if (!session || up) return;
      backoff.reset();
      clearTimeout(waitTimer);
      wake?.();
    },
    stop() {
      interrupt();
      session = undefined;
    },
    get connected() {
      return up;
    },
  };
}

/** A poll that failed: why, with the server's status and `Retry-After` when it answered. */
class PollFailure extends Error {
  constructor(
    message: string,
    readonly status?: number,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** The answer of a poll, its frames those this client knows. */
function readAnswer(json: unknown): { position: string; frames: ServerFrame[] } {
  const answer = json as { position?: unknown; frames?: unknown } | undefined;
  if (typeof answer?.position !== "string" || !Array.isArray(answer.frames)) {
    throw new PollFailure("poll: the answer is not the protocol's");
  }
  const frames = answer.frames.flatMap((frame) => parseServerFrame(JSON.stringify(frame)) ?? []);
  return { position: answer.position, frames };
}
