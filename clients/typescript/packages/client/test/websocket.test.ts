/**
 * The reconnecting WebSocket source's decisions, driven through a scripted WHATWG socket and a
 * fake clock: the token goes first on every connection, fresh each time; an attempt that does
 * not open in time is abandoned; waits grow with full jitter and start over only after a
 * connection stayed up long enough, or at once when the server closes for a restart; a socket whose
 * heartbeats do not leave counts as lost.
 */

import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";

import { createWebSocketSource, type CloseInfo, type WebSocketLike } from "../src/index.js";

class ScriptedSocket implements WebSocketLike {
  bufferedAmount = 0;
  sent: unknown[] = [];
  closed = false;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;

  constructor(
    readonly url: string,
    readonly protocols: string[],
  ) {}

  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }

  close(): void {
    this.closed = true;
  }

  open(): void {
    this.onopen?.({});
  }

  drop(code = 1006): void {
    this.onclose?.({ code, reason: "" });
  }

  receive(frame: object): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
}

const settings = { backoffBaseMs: 100, backoffMaxMs: 10_000, stableAfterMs: 5_000, connectTimeoutMs: 1_000, heartbeatMs: 15_000 };

function harness() {
  const sockets: ScriptedSocket[] = [];
  const events: string[] = [];
  const closes: CloseInfo[] = [];
  let tokens = 0;
  const source = createWebSocketSource({
    ...settings,
    // The top of each jitter range: a wait shows the ceiling it was drawn under.
    random: () => 0.999,
    webSocket: (url, protocols) => {
      const socket = new ScriptedSocket(url, protocols);
      sockets.push(socket);
      return socket;
    },
  });
  source.start({
    url: "ws://engine.test/sync/stream",
    pollUrl: "http://engine.test/sync/poll",
    token: async () => `token-${++tokens}`,
    refresh: async () => {
      events.push("refresh");
    },
    onOpen: () => events.push("open"),
    onFrame: (frame) => events.push(`frame ${frame.type}`),
    onClose: (info) => {
      closes.push(info);
      events.push("close");
    },
    onFailure: (reason) => events.push(`failure ${reason}`),
  });
  /** How long until the next socket is created (up to `limit`). */
  const nextAttemptIn = async (limit = 60_000) => {
    const before = sockets.length;
    for (let waited = 0; waited <= limit; waited += 10) {
      if (sockets.length > before) return waited;
      await vi.advanceTimersByTimeAsync(10);
    }
    throw new Error("no new attempt");
  };
  return { source, sockets, events, closes, nextAttemptIn };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("createWebSocketSource", () => {
  test("every connection offers the subprotocol and sends a fresh token first", async () => {
    const { source, sockets, events, nextAttemptIn } = harness();
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets[0]!.protocols).toEqual(["engine.v1"]);
    sockets[0]!.open();
    expect(sockets[0]!.sent[0]).toEqual({ type: "auth", token: "token-1" });
    expect(source.connected).toBe(true);
    sockets[0]!.receive({ type: "ping", bucket: "own/a" });
    sockets[0]!.drop();
    await nextAttemptIn();
    sockets[1]!.open();
    expect(sockets[1]!.sent[0]).toEqual({ type: "auth", token: "token-2" });
    expect(events).toEqual(["open", "frame ping", "close", "open"]);
    source.stop();
  });

  test("a refused token is refreshed before the next attempt", async () => {
    const { source, sockets, events, closes, nextAttemptIn } = harness();
    await vi.advanceTimersByTimeAsync(0);
    sockets[0]!.open();
    sockets[0]!.receive({ type: "error", code: "unauthenticated", detail: "token refused" });
    sockets[0]!.drop(1008);
    expect(closes[0]).toMatchObject({ code: 1008, error: "unauthenticated" });
    await nextAttemptIn();
    expect(events.indexOf("refresh")).toBeGreaterThan(events.indexOf("close"));
    source.stop();
  });

  test("an attempt that does not open in time is abandoned, and waits grow", async () => {
    const { source, sockets, events, nextAttemptIn } = harness();
    await vi.advanceTimersByTimeAsync(0);
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) waits.push(await nextAttemptIn());
    expect(sockets.slice(0, 5).every((s) => s.closed)).toBe(true);
    expect(events.filter((e) => e.startsWith("failure")).length).toBe(5);
    expect(events[0]).toBe("failure the stream did not open in time");
    // The connect timeout, then the backoff drawn under 100, 200, 400, 800, 1,600 ms.
    const backoffs = waits.map((w) => w - settings.connectTimeoutMs);
    backoffs.forEach((b, n) => expect(b).toBeLessThanOrEqual(100 * 2 ** n + 10));
    expect(backoffs[4]).toBeGreaterThan(backoffs[0]! + 1_000);
    source.stop();
  });

  test("the backoff starts over only after a connection stayed up long enough", async () => {
    const { source, sockets, nextAttemptIn } = harness();
    await vi.advanceTimersByTimeAsync(0);
    // Two failures in a row: the next wait is drawn under 400 ms.
    for (let i = 0; i < 2; i++) {
      sockets.at(-1)!.drop();
      await nextAttemptIn();
    }
    // Up briefly, then down: not stable, so the backoff goes on growing.
    sockets.at(-1)!.open();
    await vi.advanceTimersByTimeAsync(1_000);
    sockets.at(-1)!.drop();
    expect(await nextAttemptIn()).toBeGreaterThan(300);
    // Up past the stability gate, then down: the wait starts over, under 100 ms.
    sockets.at(-1)!.open();
    await vi.advanceTimersByTimeAsync(settings.stableAfterMs);
    sockets.at(-1)!.drop();
    expect(await nextAttemptIn()).toBeLessThanOrEqual(110);
    source.stop();
  });

  test("a server restarting (1012) is left at once, whatever the backoff had grown to", async () => {
    const { source, sockets, closes, nextAttemptIn } = harness();
    await vi.advanceTimersByTimeAsync(0);
    // Failures grow the next wait to 800 ms.
    for (let i = 0; i < 3; i++) {
      sockets.at(-1)!.drop();
      await nextAttemptIn();
    }
    sockets.at(-1)!.open();
    sockets.at(-1)!.receive({ type: "error", code: "retry_later", detail: "the server is restarting: reconnect now" });
    sockets.at(-1)!.drop(1012);
    expect(closes.at(-1)).toMatchObject({ code: 1012, error: "retry_later" });
    expect(await nextAttemptIn()).toBeLessThanOrEqual(250);
    // And the backoff starts over: a failure now waits under 100 ms again.
    sockets.at(-1)!.drop();
    expect(await nextAttemptIn()).toBeLessThanOrEqual(110);
    source.stop();
  });

  test("heartbeats go out, and a socket whose frames stop leaving counts as lost", async () => {
    const { source, sockets, events, nextAttemptIn } = harness();
    await vi.advanceTimersByTimeAsync(0);
    const socket = sockets[0]!;
    socket.open();
    await vi.advanceTimersByTimeAsync(settings.heartbeatMs);
    expect(socket.sent.at(-1)).toEqual({ type: "heartbeat" });
    socket.bufferedAmount = 10;
    await vi.advanceTimersByTimeAsync(settings.heartbeatMs);
    expect(events).not.toContain("close");
    await vi.advanceTimersByTimeAsync(settings.heartbeatMs);
    expect(events).toContain("close");
    expect(socket.closed).toBe(true);
    await nextAttemptIn();
    expect(sockets).toHaveLength(2);
    source.stop();
  });

  test("a token that expires is replaced on the open connection", async () => {
    const exp = Math.floor(Date.now() / 1000) + 120;
    const jwt = (n: number) => `h.${btoa(JSON.stringify({ sub: "a", exp: exp + n * 3600 }))}.s`;
    let issued = 0;
    const socket = new ScriptedSocket("", []);
    const source = createWebSocketSource({ ...settings, webSocket: () => socket });
    source.start({
      url: "ws://engine.test/sync/stream",
      pollUrl: "http://engine.test/sync/poll",
      token: async () => jwt(issued++),
      refresh: async () => undefined,
      onOpen: () => undefined,
      onFrame: () => undefined,
      onClose: () => undefined,
      onFailure: () => undefined,
    });
    await vi.advanceTimersByTimeAsync(0);
    socket.open();
    expect(socket.sent).toEqual([{ type: "auth", token: jwt(0) }]);
    await vi.advanceTimersByTimeAsync(100_000);
    expect(socket.sent.filter((f) => (f as { type: string }).type === "auth")).toEqual([
      { type: "auth", token: jwt(0) },
      { type: "auth", token: jwt(1) },
    ]);
    source.stop();
  });
});
