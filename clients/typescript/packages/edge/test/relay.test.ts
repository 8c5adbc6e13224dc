/**
 * The bucket's Durable Object remembers a publish's nonce in its storage until the publish
 * expires: an object started again on the same storage (the runtime evicted the first) still
 * refuses the replay, and forgets the nonce once it has expired. The runtime is stood in for by
 * a storage map and no sockets; `edge.test.ts` runs the relay in workerd.
 */

import { afterEach, expect, test, vi } from "vitest";

import { BucketRelay, type Env } from "@engine/edge/worker";

import type { DurableObjectState } from "../src/workers.js";

// The runtime's global the object's constructor uses.
(globalThis as Record<string, unknown>).WebSocketRequestResponsePair ??= class {};

/** A Durable Object's state over `stored`, which outlives the objects made on it. */
function stateOver(stored: Map<string, unknown>) {
  const alarms: number[] = [];
  let started: Promise<unknown> = Promise.resolve();
  const state: DurableObjectState = {
    acceptWebSocket: () => undefined,
    getWebSockets: () => [],
    setWebSocketAutoResponse: () => undefined,
    blockConcurrencyWhile: <T>(work: () => Promise<T>) => {
      const done = work();
      started = done;
      return done;
    },
    storage: {
      list: async <T>({ prefix = "" }: { prefix?: string } = {}) =>
        new Map([...stored].filter(([key]) => key.startsWith(prefix))) as Map<string, T>,
      put: async (key, value) => void stored.set(key, value),
      delete: async (keys) => keys.filter((key) => stored.delete(key)).length,
      setAlarm: async (at) => void alarms.push(at),
    },
  };
  return { state, alarms, started: () => started };
}

/** A relay object on `stored`, once it has read what it keeps. */
async function relayOver(stored: Map<string, unknown>) {
  const { state, alarms, started } = stateOver(stored);
  const relay = new BucketRelay(state, {} as Env);
  await started();
  return { relay, alarms };
}

function ping(relay: BucketRelay, nonce: string, expires: number) {
  const body = JSON.stringify({ bucket: "shared/l1", nonce, expires });
  return relay.fetch(new Request("https://relay/ping", { method: "POST", body })).then((answer) => answer.status);
}

afterEach(() => {
  vi.useRealTimers();
});

test("a replayed publish is refused by an object started again on the same storage, until it expires", async () => {
  vi.useFakeTimers({ now: 1_900_000_000_000, toFake: ["Date"] });
  const stored = new Map<string, unknown>();
  const expires = Date.now() + 30_000;
  const first = await relayOver(stored);
  expect(await ping(first.relay, "n1", expires)).toBe(204);
  expect(await ping(first.relay, "n1", expires)).toBe(409);

  const restarted = await relayOver(stored);
  expect(await ping(restarted.relay, "n1", expires)).toBe(409);
  expect(await ping(restarted.relay, "n2", expires + 1)).toBe(204);
  expect(first.alarms).toEqual([expires]);

  // Past the first expiry: `n1` is forgotten, in storage too; the alarm prunes without a ping.
  vi.setSystemTime(expires);
  await restarted.relay.alarm();
  expect([...stored.keys()]).toEqual(["nonce:n2"]);
  expect(restarted.alarms).toEqual([expires + 1]);
  vi.setSystemTime(expires + 1);
  await restarted.relay.alarm();
  expect(stored.size).toBe(0);
  expect(restarted.alarms).toEqual([expires + 1]);
});
