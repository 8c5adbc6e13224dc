/**
 * The part of the Workers runtime's API the relay uses, declared here rather than through the
 * runtime's type package, whose globals clash with the DOM's that the rest of the workspace
 * type-checks against.
 */

/** A Durable Object's handle on its own state: its hibernatable sockets and its storage. */
export interface DurableObjectState {
  acceptWebSocket(socket: WebSocket, tags?: string[]): void;
  getWebSockets(tag?: string): WorkerWebSocket[];
  setWebSocketAutoResponse(pair?: unknown): void;
  /** Runs `work` before any event reaches the object. */
  blockConcurrencyWhile<T>(work: () => Promise<T>): Promise<T>;
  storage: DurableObjectStorage;
}

/** The object's own key-value storage, which outlives its time in memory. */
export interface DurableObjectStorage {
  list<T = unknown>(options?: { prefix?: string }): Promise<Map<string, T>>;
  put(key: string, value: unknown): Promise<void>;
  /** At most 128 keys at once. */
  delete(keys: string[]): Promise<number>;
  setAlarm(at: number): Promise<void>;
}

/** A server-side socket of the Workers runtime, with what survives hibernation. */
export interface WorkerWebSocket extends WebSocket {
  serializeAttachment(value: unknown): void;
  deserializeAttachment(): unknown;
}

/** The binding of a Durable Object class. */
export interface DurableObjectNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
}

/** What the runtime gives the relay: its Durable Objects and the secret it shares with the server. */
export interface Env {
  BUCKETS: DurableObjectNamespace;
  EDGE_SECRET: string;
}

/** The runtime's globals the relay uses. */
export const runtime = globalThis as unknown as {
  WebSocketPair: new () => { 0: WebSocket; 1: WorkerWebSocket };
  WebSocketRequestResponsePair: new (request: string, response: string) => unknown;
};

/** A `101` answer handing `client` to the caller (`ResponseInit.webSocket` of the runtime). */
export function upgraded(client: WebSocket): Response {
  return new Response(null, { status: 101, webSocket: client } as ResponseInit);
}
