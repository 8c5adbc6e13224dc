/**
 * `@engine/mobile` with the platform's APIs stubbed at their boundary (NetInfo, AppState, a
 * fetch that ignores abort signals, a runtime without some globals) and a real notes server.
 */

import {
  createEngineNativeClient,
  installEngineNativePolyfills,
  mobileOnlineDetector,
  nativeFetch,
  type NetInfoState,
} from "@engine/mobile";
import { afterEach, describe, expect, test } from "vitest";

import { mutators, schema, type Mutators, type Tables } from "../src/contract.gen.js";
import { optimistic } from "../src/optimistic.js";
import { notesClient, waitFor } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** A stand-in for `NetInfo` and `AppState`: tests say when the network and the app change. */
class Platform {
  private net = new Set<(state: NetInfoState) => void>();
  private app = new Set<(state: string) => void>();
  readonly netInfo = {
    addEventListener: (listener: (state: NetInfoState) => void) => {
      this.net.add(listener);
      return () => this.net.delete(listener);
    },
  };
  readonly appState = {
    addEventListener: (_: "change", listener: (state: string) => void) => {
      this.app.add(listener);
      return { remove: () => this.app.delete(listener) };
    },
  };
  network(isConnected: boolean, isInternetReachable: boolean | null = isConnected): void {
    for (const listener of this.net) listener({ isConnected, isInternetReachable });
  }
  appBecomes(state: string): void {
    for (const listener of this.app) listener(state);
  }
  get listeners(): number {
    return this.net.size + this.app.size;
  }
}

const saved: Record<string, unknown> = {};
afterEach(() => {
  for (const [name, value] of Object.entries(saved)) (globalThis as Record<string, unknown>)[name] = value;
});

describe("@engine/mobile", () => {
  test("a write made offline goes out the moment the network is back, not after the backoff", async () => {
    const platform = new Platform();
    let offline = true;
    let attempts = 0;
    const radio = async (input: string, init: RequestInit) => {
      attempts += 1;
      if (offline) throw new TypeError("Network request failed");
      return fetch(input, init);
    };
    const phone = await createEngineNativeClient<Tables, Mutators>({
      url: notes().url,
      schema,
      auth: notes().token("mia"),
      optimistic,
      fetch: radio,
      realtime: false,
      netInfo: platform.netInfo,
      appState: platform.appState,
      // A first retry a minute away: only the platform's event can bring it sooner.
      retry: { backoffBaseMs: 60_000, backoffMaxMs: 60_000 },
    });
    await mutators(phone).createList({ id: "mia", title: "Mia's" });
    await waitFor("the first attempts fail", () => phone.status.retry !== null);
    const failed = attempts;

    offline = false;
    platform.network(true);
    await waitFor("the write reaches the server", () => phone.status.pending === 0, 10_000);
    expect(attempts).toBeGreaterThan(failed);
    const other = await notesClient(notes(), "mia");
    await other.pull();
    expect(other.get("lists", "mia")?.title).toBe("Mia's");

    await phone.close();
    expect(platform.listeners, "closing lets go of the platform's events").toBe(0);
    await other.close();
  });

  test("connectivity and foreground events become the client's online signal", () => {
    const platform = new Platform();
    const seen: boolean[] = [];
    const unsubscribe = mobileOnlineDetector(platform).subscribe((online) => seen.push(online));
    platform.network(true);
    platform.network(true, false); // connected to a network without the internet
    platform.network(false);
    platform.network(false);
    platform.appBecomes("active"); // still offline: nothing
    platform.network(true);
    platform.appBecomes("background");
    platform.appBecomes("active");
    expect(seen).toEqual([true, false, true, true]);
    unsubscribe();
    expect(platform.listeners).toBe(0);
  });

  test("a request the platform leaves hanging is abandoned when its signal aborts or it times out", async () => {
    // A platform fetch that ignores its signal and never answers.
    const hanging = () => new Promise<Response>(() => undefined);
    const controller = new AbortController();
    const request = nativeFetch(hanging)("http://example.invalid/", { signal: controller.signal });
    controller.abort(new Error("the app went to the background"));
    await expect(request).rejects.toThrow("the app went to the background");
    await expect(nativeFetch(hanging, { timeoutMs: 50 })("http://example.invalid/", {})).rejects.toThrow(/no answer in 50 ms/);
  });

  test("the polyfills stand in for the globals a runtime lacks, and refuse to invent randomness", () => {
    const g = globalThis as Record<string, unknown>;
    for (const name of ["TextEncoder", "atob", "btoa", "structuredClone"]) saved[name] = g[name];
    const [encoder, atob, btoa] = [new TextEncoder(), globalThis.atob, globalThis.btoa];
    for (const name of ["TextEncoder", "atob", "btoa", "structuredClone"]) delete g[name];

    expect(installEngineNativePolyfills()).toEqual(["structuredClone", "TextEncoder", "atob", "btoa"]);
    const text = "héllo ✓ 𝄞 \ud800";
    expect([...new TextEncoder().encode(text)]).toEqual([...encoder.encode(text)]);
    for (const binary of ["", "a", "ab", "abc", "\u0000\u00ff\u0080xyz"]) {
      expect(globalThis.btoa(binary)).toBe(btoa(binary));
      expect(globalThis.atob(btoa(binary))).toBe(binary);
    }
    expect(() => globalThis.btoa("✓")).toThrow(RangeError);
    const value = { a: [1, { b: "c" }], d: null };
    const copy = structuredClone(value);
    expect(copy).toEqual(value);
    expect(copy).not.toBe(value);
    expect(installEngineNativePolyfills(), "nothing twice").toEqual([]);
    expect(atob("AAA=")).toBe("\u0000\u0000");

    saved.crypto = g.crypto;
    Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true, writable: true });
    expect(() => installEngineNativePolyfills()).toThrow(/getRandomValues/);
    const random = <T extends ArrayBufferView | null>(array: T): T => array;
    expect(installEngineNativePolyfills({ getRandomValues: random })).toEqual(["crypto.getRandomValues"]);
  });
});
