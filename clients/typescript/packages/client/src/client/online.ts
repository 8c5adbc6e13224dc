/**
 * The platform's connectivity, as the client's `online` option takes it. When the platform
 * comes online, the client's waiting retries and the stream's reconnection go at once instead of
 * when their backoff ends. `browserOnlineSignal` is the default where there is a browser.
 */

/** The platform's connectivity events (a browser's `online`, a mobile network listener). */
export interface OnlineSignal {
  /** Call `listener` with every change; returns the unsubscribe. */
  subscribe(listener: (online: boolean) => void): () => void;
}

/** A browser's `online` and `offline` events, where there are any. */
export function browserOnlineSignal(): OnlineSignal | undefined {
  const target = globalThis as { addEventListener?: unknown; removeEventListener?: unknown; navigator?: unknown };
  if (typeof target.addEventListener !== "function" || typeof target.navigator !== "object") return undefined;
  return {
    subscribe(listener) {
      const online = () => listener(true);
      const offline = () => listener(false);
      globalThis.addEventListener("online", online);
      globalThis.addEventListener("offline", offline);
      return () => {
        globalThis.removeEventListener("online", online);
        globalThis.removeEventListener("offline", offline);
      };
    },
  };
}
