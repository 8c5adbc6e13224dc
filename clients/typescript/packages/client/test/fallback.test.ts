/**
 * The default realtime source's fallback, driven through sockets that never open and a scripted
 * `fetch`: after two failures to open it polls, passing each answer's position to the next poll
 * and each answer's frames on; a poll that fails before any answer sends it back to the socket.
 */

import { describe, expect, test } from "vitest";

import { createRealtimeSource, type WebSocketLike } from "../src/index.js";

/** A socket that fails before it opens, as one whose upgrade a proxy refused. */
class RefusedSocket implements WebSocketLike {
  bufferedAmount = 0;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;

  constructor() {
    setTimeout(() => this.onclose?.({ code: 1006, reason: "" }), 1);
  }

  send(): void {}
  close(): void {}
}

async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  if (!condition()) throw new Error(`not reached: ${what}`);
}

function harness(answer: (url: URL, n: number) => Response) {
  const polls: URL[] = [];
  const events: string[] = [];
  let sockets = 0;
  const quick = { backoffBaseMs: 1, backoffMaxMs: 5, random: () => 0.5 };
  const source = createRealtimeSource({
    webSocket: { ...quick, webSocket: () => (sockets++, new RefusedSocket()) },
    longPoll: {
      ...quick,
      fetch: async (input) => {
        const url = new URL(input);
        polls.push(url);
        // A poll waits: the next one comes only after the test looked.
        if (polls.length > 3) await new Promise((resolve) => setTimeout(resolve, 50));
        return answer(url, polls.length);
      },
    },
  });
  source.start({
    url: "ws://engine.test/sync/stream",
    pollUrl: "http://engine.test/sync/poll",
    token: async () => "token",
    refresh: async () => undefined,
    onOpen: () => events.push("open"),
    onFrame: (frame) => events.push(`frame ${frame.type}`),
    onClose: () => events.push("close"),
    onFailure: () => events.push("failure"),
  });
  return { source, polls, events, sockets: () => sockets };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status });

describe("createRealtimeSource", () => {
  test("two sockets that do not open make it poll, each poll from the last answer's position", async () => {
    const { source, polls, events, sockets } = harness((_, n) =>
      json({ position: `p${n}`, frames: n === 1 ? [{ type: "buckets_changed" }] : [{ type: "ping", bucket: "own/a" }] }),
    );
    await until("three polls", () => polls.length >= 3);
    expect(sockets()).toBe(2);
    expect(source.transport).toBe("long-poll");
    expect(source.connected).toBe(true);
    expect(polls[0]!.searchParams.get("position")).toBeNull();
    expect(polls[1]!.searchParams.get("position")).toBe("p1");
    expect(polls[2]!.searchParams.get("position")).toBe("p2");
    expect(events.slice(0, 4)).toEqual(["failure", "failure", "open", "frame buckets_changed"]);
    expect(events).toContain("frame ping");
    expect(source.send({ type: "heartbeat" })).toBe(false);
    source.stop();
  });

  test("a poll that fails before any answer sends it back to the socket", async () => {
    const { source, polls, sockets } = harness(() => json({ code: "retry_later", status: 503 }, 503));
    await until("a poll and a third socket", () => polls.length >= 1 && sockets() >= 3);
    expect(source.transport).toBe("websocket");
    source.stop();
  });
});
