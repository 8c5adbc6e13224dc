/**
 * `@engine/mobile`: `@engine/client` on React Native and other mobile runtimes.
 *
 * A phone loses the network often and suspends apps in the background: the client must retry
 * the moment connectivity or the app comes back, not when its backoff says so, and a request the
 * platform leaves hanging across a suspension must be abandoned. The platform's APIs are passed
 * in (React Native's `WebSocket`, `@react-native-community/netinfo`'s `NetInfo`, `AppState`), so
 * this package depends on none of them.
 *
 * - `installEngineNativePolyfills`: the globals the client uses that some runtimes lack.
 * - `nativeWebSocketSource`: the reconnecting realtime source over the platform's WebSocket.
 * - `nativeFetch` / `installNativeFetch`: a fetch that honours abort signals and timeouts even
 *   where the platform's does not.
 * - `mobileOnlineDetector`: connectivity and foreground events as the client's `online` signal.
 * - `mobileSqlitePersistence`: the client's store in the app's SQLite database (`op-sqlite`,
 *   `expo-sqlite`, through `SqlExecutor`), so queued writes survive the app being killed.
 * - `createEngineNativeClient`: a client with all of the above.
 */

import {
  createEngineClient,
  createWebSocketSource,
  type EngineClient,
  type EngineClientOptions,
  type Fetch,
  type MutatorTypes,
  type OnlineSignal,
  type RealtimeSource,
  sqliteStore,
  type ClientStore,
  type SqlExecutor,
  type TableTypes,
  type WebSocketLike,
  type WebSocketSourceOptions,
} from "@engine/client";

// --- Globals ---------------------------------------------------------------------------------

/** What `installEngineNativePolyfills` needs from the platform. */
export interface NativePolyfillOptions {
  /**
   * A cryptographically secure `getRandomValues` (such as `react-native-get-random-values`'s),
   * for the client's ids, when the runtime has no `crypto.getRandomValues`.
   */
  getRandomValues?: <T extends ArrayBufferView | null>(array: T) => T;
}

/**
 * Install the globals the client uses and the runtime lacks: `crypto.getRandomValues` (from
 * `options`), `structuredClone` (the client clones JSON data only), `TextEncoder` (UTF-8),
 * `atob` and `btoa`. Returns the names installed. Throws when no secure random source exists.
 */
export function installEngineNativePolyfills(options: NativePolyfillOptions = {}): string[] {
  const g = globalThis as Record<string, unknown> & { crypto?: { getRandomValues?: unknown } };
  const installed: string[] = [];
  if (typeof g.crypto?.getRandomValues !== "function") {
    if (!options.getRandomValues) {
      throw new TypeError(
        "this runtime has no crypto.getRandomValues: pass `getRandomValues` (e.g. from react-native-get-random-values)",
      );
    }
    g.crypto = { ...(g.crypto ?? {}), getRandomValues: options.getRandomValues };
    installed.push("crypto.getRandomValues");
  }
  if (typeof g.structuredClone !== "function") {
    g.structuredClone = <T>(value: T): T => (value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T));
    installed.push("structuredClone");
  }
  if (typeof g.TextEncoder !== "function") {
    g.TextEncoder = Utf8Encoder;
    installed.push("TextEncoder");
  }
  if (typeof g.atob !== "function" || typeof g.btoa !== "function") {
    g.atob = decodeBase64;
    g.btoa = encodeBase64;
    installed.push("atob", "btoa");
  }
  return installed;
}

/** A UTF-8 `TextEncoder` for runtimes without one. */
class Utf8Encoder {
  readonly encoding = "utf-8";

  encode(text = ""): Uint8Array {
    const bytes: number[] = [];
    for (const char of text) {
      let code = char.codePointAt(0)!;
      // A lone surrogate is encoded as U+FFFD, as the standard encoder does.
      if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
      if (code < 0x80) bytes.push(code);
      else if (code < 0x800) bytes.push(0xc0 | (code >> 6), 0x80 | (code & 63));
      else if (code < 0x10000) bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
      else
        bytes.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 63), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
    }
    return Uint8Array.from(bytes);
  }
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** `btoa`: base64 of a string of byte-valued characters. */
function encodeBase64(binary: string): string {
  let out = "";
  for (let i = 0; i < binary.length; i += 3) {
    const [a, b, c] = [binary.charCodeAt(i), binary.charCodeAt(i + 1), binary.charCodeAt(i + 2)];
    if (a > 255 || b > 255 || c > 255) throw new RangeError("btoa: a character outside Latin-1");
    const n = (a << 16) | ((b || 0) << 8) | (c || 0);
    out += BASE64[n >> 18]! + BASE64[(n >> 12) & 63]!;
    out += i + 1 < binary.length ? BASE64[(n >> 6) & 63]! : "=";
    out += i + 2 < binary.length ? BASE64[n & 63]! : "=";
  }
  return out;
}

/** `atob`: the byte-valued characters of base64 `text`. */
function decodeBase64(text: string): string {
  const clean = text.replace(/[\s=]/g, "");
  let out = "";
  let bits = 0;
  let value = 0;
  for (const char of clean) {
    const digit = BASE64.indexOf(char);
    if (digit < 0) throw new TypeError("atob: not base64");
    value = (value << 6) | digit;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += String.fromCharCode((value >> bits) & 255);
    }
  }
  return out;
}

// --- Transport -------------------------------------------------------------------------------

/** A WebSocket class as the platform has it (React Native's global `WebSocket`). */
export type NativeWebSocketClass = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** The reconnecting realtime source over the platform's WebSocket class. */
export function nativeWebSocketSource(
  WebSocket: NativeWebSocketClass,
  options: Omit<WebSocketSourceOptions, "webSocket"> = {},
): RealtimeSource {
  return createWebSocketSource({ ...options, webSocket: (url, protocols) => new WebSocket(url, protocols) });
}

/**
 * A fetch over the platform's `base` that gives up when the request's signal aborts even if the
 * platform ignores the signal (a request left hanging across a suspension), and after
 * `timeoutMs` when given.
 */
export function nativeFetch(base: Fetch, options: { timeoutMs?: number } = {}): Fetch {
  return (input, init = {}) => {
    const signals = [init.signal, options.timeoutMs ? timeoutSignal(options.timeoutMs) : undefined].filter(
      (s): s is AbortSignal => s != null,
    );
    if (signals.length === 0) return base(input, init);
    return new Promise<Response>((resolve, reject) => {
      const abandon = (signal: AbortSignal) => reject(signal.reason ?? new DOMException("aborted", "AbortError"));
      for (const signal of signals) {
        if (signal.aborted) return abandon(signal);
        signal.addEventListener("abort", () => abandon(signal), { once: true });
      }
      base(input, { ...init, signal: signals[0] }).then(resolve, reject);
    });
  };
}

function timeoutSignal(ms: number): AbortSignal {
  const controller = new AbortController();
  setTimeout(() => controller.abort(new DOMException(`no answer in ${ms} ms`, "TimeoutError")), ms);
  return controller.signal;
}

/** Replace the global `fetch` by `nativeFetch` over it. Returns the one it replaced. */
export function installNativeFetch(options: { timeoutMs?: number } = {}): Fetch {
  const original = globalThis.fetch.bind(globalThis) as Fetch;
  globalThis.fetch = nativeFetch(original, options) as typeof globalThis.fetch;
  return original;
}

// --- Connectivity ----------------------------------------------------------------------------

/** A connectivity state as `@react-native-community/netinfo` reports it. */
export interface NetInfoState {
  isConnected: boolean | null;
  isInternetReachable?: boolean | null;
}

/** What `mobileOnlineDetector` listens to. */
export interface MobilePlatform {
  /** `NetInfo`: `addEventListener(listener)` returns the unsubscribe. */
  netInfo?: { addEventListener(listener: (state: NetInfoState) => void): () => void };
  /** `AppState`: `addEventListener("change", listener)` returns a subscription. */
  appState?: { addEventListener(type: "change", listener: (state: string) => void): { remove(): void } };
}

/**
 * The client's `online` signal from the platform: online when the network connects (and the
 * internet is not known to be unreachable), offline when it drops, and online again when the
 * app comes to the foreground, since a suspended app's connections are usually gone.
 */
export function mobileOnlineDetector(platform: MobilePlatform): OnlineSignal {
  return {
    subscribe(listener) {
      let last: boolean | undefined;
      const report = (online: boolean) => {
        if (online === last && !online) return;
        last = online;
        listener(online);
      };
      const unsubscribeNet = platform.netInfo?.addEventListener((state) => {
        if (state.isConnected === null) return;
        report(state.isConnected && state.isInternetReachable !== false);
      });
      const foreground = platform.appState?.addEventListener("change", (state) => {
        if (state === "active" && last !== false) report(true);
      });
      return () => {
        unsubscribeNet?.();
        foreground?.remove();
      };
    },
  };
}

// --- Storage -------------------------------------------------------------------------------

/**
 * The client's store in the app's SQLite database `db`, reached through `SqlExecutor` (its
 * documentation shows the few lines for `op-sqlite` and `expo-sqlite`). A mutation is in the
 * database when `mutate` resolves, so a write queued offline survives the app being killed.
 * Use one database per user: the client refuses a store that holds another user's data.
 */
export function mobileSqlitePersistence(db: SqlExecutor): ClientStore {
  return sqliteStore(db);
}

// --- The client ------------------------------------------------------------------------------

/** Options of `createEngineNativeClient`: the client's, and the platform's APIs. */
export interface EngineNativeClientOptions<T extends TableTypes, M extends MutatorTypes>
  extends EngineClientOptions<T, M>, MobilePlatform {
  /** The platform's WebSocket class (the global one by default; none: no realtime). */
  WebSocket?: NativeWebSocketClass;
  /** Options of the realtime source. */
  reconnect?: Omit<WebSocketSourceOptions, "webSocket">;
  /** The app's SQLite database: the store is `mobileSqlitePersistence(database)` (unless `store` is given). */
  database?: SqlExecutor;
}

/**
 * A client for a mobile app: realtime over the platform's WebSocket, requests through
 * `nativeFetch`, retries at once when the network or the app comes back, and its store in
 * `database` when given (in memory otherwise: queued writes then end with the app).
 */
export function createEngineNativeClient<T extends TableTypes, M extends MutatorTypes>(
  options: EngineNativeClientOptions<T, M>,
): Promise<EngineClient<T, M>> {
  const { WebSocket, reconnect, netInfo, appState, database, ...client } = options;
  const socketClass = WebSocket ?? (globalThis as { WebSocket?: NativeWebSocketClass }).WebSocket;
  const fetcher = client.fetch ?? ((input, init) => globalThis.fetch(input, init));
  return createEngineClient({
    ...client,
    fetch: nativeFetch(fetcher),
    realtime: client.realtime ?? (socketClass ? nativeWebSocketSource(socketClass, reconnect) : false),
    online: client.online ?? mobileOnlineDetector({ netInfo, appState }),
    store: client.store ?? (database ? mobileSqlitePersistence(database) : undefined),
  });
}
