/**
 * The client: a durable local copy of the actor's buckets that takes writes offline and
 * converges when it reconnects, speaking only the wire protocol (`docs/protocol.md`).
 *
 * Writes: `mutate` runs the app's optimistic function for the mutator (if it registered one)
 * against the view and appends the mutation to the outbox; when it resolves, the mutation is
 * in the store. The outbox drains in the background: a rejection is quarantined and never
 * blocks what follows, a `409` renumbers the queue from the server's sequence, `429` and `503`
 * wait for `Retry-After`. After every pull the pending mutations run again on the server's
 * rows (the rebase), so what the server decided always shows; a mutation's optimistic effect
 * stays until a pull reports `syncedMutationId` at or above it.
 *
 * Realtime: a `RealtimeSource` (by default `createWebSocketSource` over the global WebSocket)
 * turns pings into pulls and carries presence.
 */

import { authProvider, actorOfToken, type AuthInput, type AuthProvider } from "./auth.js";
import { ClosedError, ServerError } from "./errors.js";
import { SyncLoop, type Retry } from "./loop.js";
import { PresenceStates, type PresenceEvent } from "./presence.js";
import { plan, Told } from "./realtime.js";
import { Remote, type Fetch } from "./remote.js";
import { Replica } from "./replica.js";
import type { RowChange } from "./replica/changes.js";
import type { Queued } from "./replica/outbox.js";
import { keyRow, keyText, type AnySchema, type EngineSchema, type KeyInput, type MutatorTypes, type TableTypes } from "./schema.js";
import { memoryStore } from "./store/memory.js";
import { migrateClientStore } from "./store/migrate.js";
import { isEmptyWrite, type ClientStore, type QuarantinedEntry } from "./store/types.js";
import { sortByKey, type Actor, type OptimisticMutator } from "./view.js";
import { createWebSocketSource, type CloseInfo, type RealtimeSource } from "./websocket.js";
import type { PresenceMeta, PresenceState, ServerFrame } from "./wire.js";

/** What the client is doing, for a UI. */
export interface Status {
  /** Whether the realtime stream is connected. */
  connected: boolean;
  /** Whether a pull or a push is running. */
  syncing: boolean;
  /** Mutations made locally that a pull has not yet shown applied. */
  pending: number;
  /** Mutations the server rejected, with its errors, until retried or discarded. */
  quarantined: readonly QuarantinedEntry[];
  /** When the last pull finished (ms since the Unix epoch). */
  lastPullAt: number | null;
  /** The last failure of a pull, a push or the stream, cleared by the next success. */
  lastError: string | null;
  /** The wait before a failed push or pull is tried again, while one is under way. */
  retry: ({ operation: "push" | "pull" } & Retry) | null;
}

/** Optimistic functions by mutator name, typed by the app's rows and arguments. */
export type OptimisticMutators<T extends TableTypes, M extends MutatorTypes> = {
  [K in keyof M & string]?: OptimisticMutator<T, M[K]>;
};

/** How to build a client. */
export interface EngineClientOptions<T extends TableTypes, M extends MutatorTypes> {
  /** The server (`http://host:port`, or with the prefix the engine is mounted under). */
  url: string;
  /** The app's schema, as `engine gen` writes it. */
  schema: EngineSchema<T, M>;
  /** A bearer token, or a provider asked afresh for every request and connection. */
  auth: AuthInput;
  /** Who mutations run for locally; read from the token when it is a JWT. */
  actor?: Actor;
  /** Where the client's state lives (memory by default). */
  store?: ClientStore;
  /** Optimistic functions; `createEngineMutators` registers more. */
  optimistic?: OptimisticMutators<T, M>;
  /** The `fetch` to use (the global one by default). */
  fetch?: Fetch;
  /** Realtime: a source, or `false` for none (default: a WebSocket source when a global WebSocket exists). */
  realtime?: RealtimeSource | false;
  /** Sync in the background (default); without it only explicit `pull`, `push` and `sync` talk to the server. */
  background?: boolean;
  /** Pull this often when nothing else asks for it (30,000 ms). */
  pullIntervalMs?: number;
  /** Entries per pull page (1,000). */
  pullPage?: number;
  /** Mutations per push (100). */
  pushBatch?: number;
  /** How long rows of buckets the actor lost stay (0: they go at once). */
  bucketTtlMs?: number;
  /** How long one request may take before it counts as lost (30,000 ms). */
  requestTimeoutMs?: number;
  /** Retries of pushes and pulls: backoff from `backoffBaseMs` (500) to `backoffMaxMs` (30,000). */
  retry?: { backoffBaseMs?: number; backoffMaxMs?: number };
  /**
   * The platform's connectivity: when it comes online, waiting retries and the stream's
   * reconnection go at once. Browsers' `online` events by default; `false` for none.
   */
  online?: OnlineSignal | false;
}

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

/** A client of an engine server. */
export interface EngineClient<T extends TableTypes = TableTypes, M extends MutatorTypes = MutatorTypes> {
  readonly clientId: string;
  readonly actor: Actor;
  readonly schema: EngineSchema<T, M>;
  /** Run mutator `name` locally (its optimistic function, if any) and queue it for the server. */
  mutate<K extends keyof M & string>(name: K, args: M[K]): Promise<Queued>;
  /** Add optimistic functions; the view is rebased with them. */
  registerOptimistic(mutators: OptimisticMutators<T, M>): void;
  /** Pull until caught up. */
  pull(): Promise<void>;
  /** Push the outbox until it is drained or a failure stops it. */
  push(): Promise<void>;
  /** Push and pull until the outbox is empty (or a few rounds pass). */
  sync(): Promise<void>;
  /** The live rows of `table` in the view, in key order. */
  rows<K extends keyof T & string>(table: K): T[K][];
  /** The live row of `table` with `key`. */
  get<K extends keyof T & string>(table: K, key: KeyInput): T[K] | undefined;
  /** The buckets holding the confirmed row of `table` with `key`: none when only pending writes
   * made it (or there is no such row). */
  bucketsOf<K extends keyof T & string>(table: K, key: KeyInput): string[];
  /** Call `listener` with every change of the view's rows; returns the unsubscribe. */
  onChange(listener: (changes: RowChange[]) => void): () => void;
  /** The buckets the client holds, in key order. */
  buckets(): string[];
  /** The cursor of the last pull (opaque; `null` before the first). */
  readonly cursor: string | null;
  readonly status: Status;
  onStatus(listener: (status: Status) => void): () => void;
  /** Queue a rejected mutation again, as a new mutation; `undefined` when it is not quarantined. */
  retryQuarantined(clientMutationId: string): Promise<Queued | undefined>;
  /** Drop a rejected mutation; whether it was quarantined. */
  discardQuarantined(clientMutationId: string): Promise<boolean>;
  /** Follow only `buckets` in realtime (`null`: every bucket held, the default). */
  subscribe(buckets: readonly string[] | null): void;
  /** Be present in `bucket` with `meta` (kept across reconnections). */
  track(bucket: string, meta?: PresenceMeta): void;
  untrack(bucket: string): void;
  /** Who is present in `bucket`, as the stream last said. */
  presenceState(bucket: string): PresenceState;
  /** Call `listener` with every presence change; returns the unsubscribe. */
  onPresence(listener: (event: PresenceEvent) => void): () => void;
  /** Stop syncing and let go of the store. */
  close(): Promise<void>;
}

/** Open the store, and start syncing (in the background unless told otherwise). */
export async function createEngineClient<T extends TableTypes, M extends MutatorTypes>(
  options: EngineClientOptions<T, M>,
): Promise<EngineClient<T, M>> {
  const auth = authProvider(options.auth);
  const actor = options.actor ?? actorOfToken(await auth.token());
  if (!actor) throw new TypeError("no actor: the token is not a JWT with a `sub`; pass `actor`");
  const store = options.store ?? memoryStore();
  const loaded = await store.load();
  const replica = new Replica(options.schema as unknown as AnySchema, actor, loaded && migrateClientStore(loaded));
  const client = new Client<T, M>(options, auth, store, replica);
  await client.persist();
  if (options.optimistic) client.registerOptimistic(options.optimistic);
  client.start();
  return client;
}

const DEFAULT_PUSH_ROUNDS = 8;

/** Runs of one kind, one at a time, in the order they were asked for. */
class Serial<T> {
  private last: Promise<unknown> = Promise.resolve();

  run(work: () => Promise<T>): Promise<T> {
    const next = this.last.catch(() => undefined).then(work);
    this.last = next;
    return next;
  }

  /** Settles once every run asked for so far has. */
  idle(): Promise<unknown> {
    return this.last.catch(() => undefined);
  }
}

class Client<T extends TableTypes, M extends MutatorTypes> implements EngineClient<T, M> {
  readonly schema: EngineSchema<T, M>;
  private readonly remote: Remote;
  private readonly settings: Required<
    Pick<EngineClientOptions<T, M>, "pullIntervalMs" | "pullPage" | "pushBatch" | "bucketTtlMs" | "background">
  >;
  private statusNow: Status;
  private readonly statusListeners = new Set<(status: Status) => void>();
  private readonly changeListeners = new Set<(changes: RowChange[]) => void>();
  private readonly presenceListeners = new Set<(event: PresenceEvent) => void>();
  private readonly presence = new PresenceStates();
  private readonly tracked = new Map<string, PresenceMeta>();
  private subscription: string[] | undefined;
  private strict = false;
  private told = new Told();
  private held: Set<string>;
  private writes: Promise<void> = Promise.resolve();
  private readonly pulls = new Serial<void>();
  private readonly pushes = new Serial<boolean>();
  private running = 0;
  private closed = false;
  private readonly source: RealtimeSource | undefined;
  private readonly pushLoop: SyncLoop;
  private readonly pullLoop: SyncLoop;
  private readonly online: OnlineSignal | undefined;
  private unsubscribeOnline: (() => void) | undefined;

  constructor(
    options: EngineClientOptions<T, M>,
    private readonly auth: AuthProvider,
    private readonly store: ClientStore,
    private readonly replica: Replica,
  ) {
    this.schema = options.schema;
    const fetcher = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.remote = new Remote(options.url, auth, fetcher, options.requestTimeoutMs ?? 30_000);
    this.settings = {
      pullIntervalMs: options.pullIntervalMs ?? 30_000,
      pullPage: Math.max(1, options.pullPage ?? 1_000),
      pushBatch: Math.max(1, options.pushBatch ?? 100),
      bucketTtlMs: options.bucketTtlMs ?? 0,
      background: options.background ?? true,
    };
    const timing = {
      idleMs: this.settings.pullIntervalMs,
      backoffBaseMs: options.retry?.backoffBaseMs ?? 500,
      backoffMaxMs: options.retry?.backoffMaxMs ?? 30_000,
    };
    this.pushLoop = new SyncLoop(
      async () => {
        // What a push applied, a pull confirms.
        if (await this.pushOnce()) this.pullLoop.wake(true);
      },
      timing,
      (retry) => this.setRetry("push", retry),
    );
    this.pullLoop = new SyncLoop(() => this.pullOnce(), timing, (retry) => this.setRetry("pull", retry));
    const realtime =
      options.realtime ?? ((globalThis as { WebSocket?: unknown }).WebSocket ? createWebSocketSource() : false);
    this.source = realtime === false ? undefined : realtime;
    this.online = options.online === false ? undefined : (options.online ?? browserOnlineSignal());
    this.held = new Set(replica.heldBuckets());
    this.statusNow = {
      connected: false,
      syncing: false,
      pending: replica.pendingCount,
      quarantined: [...replica.quarantined],
      lastPullAt: null,
      lastError: null,
      retry: null,
    };
  }

  get clientId(): string {
    return this.replica.clientId;
  }

  get actor(): Actor {
    return this.replica.actor;
  }

  get cursor(): string | null {
    return this.replica.meta.cursor;
  }

  get status(): Status {
    return this.statusNow;
  }

  start(): void {
    if (!this.settings.background) return;
    this.pullLoop.wake();
    this.pushLoop.wake();
    this.source?.start({
      url: this.remote.url("sync/stream").replace(/^http/, "ws"),
      token: async () => this.auth.token(),
      refresh: async () => {
        await this.auth.refresh?.();
      },
      onOpen: () => this.streamOpened(),
      onFrame: (frame) => this.streamFrame(frame),
      onClose: (info) => this.streamClosed(info),
      onFailure: (reason) => this.setStatus({ lastError: `stream: ${reason}` }),
    });
    this.unsubscribeOnline = this.online?.subscribe((online) => {
      if (!online || this.closed) return;
      this.pushLoop.wake(true);
      this.pullLoop.wake(true);
      this.source?.retryNow?.();
    });
  }

  // --- Status and notifications ------------------------------------------------------------

  private setStatus(change: Partial<Status>): void {
    const next = { ...this.statusNow, ...change };
    const changed = (Object.keys(change) as (keyof Status)[]).some(
      (key) => JSON.stringify(next[key]) !== JSON.stringify(this.statusNow[key]),
    );
    if (!changed) return;
    this.statusNow = next;
    for (const listener of this.statusListeners) listener(next);
  }

  private setRetry(operation: "push" | "pull", retry: Retry | null): void {
    if (retry) this.setStatus({ retry: { operation, ...retry } });
    else if (this.statusNow.retry?.operation === operation) this.setStatus({ retry: null });
  }

  onStatus(listener: (status: Status) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  onChange(listener: (changes: RowChange[]) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onPresence(listener: (event: PresenceEvent) => void): () => void {
    this.presenceListeners.add(listener);
    return () => this.presenceListeners.delete(listener);
  }

  private emitPresence(events: PresenceEvent[]): void {
    for (const event of events) for (const listener of this.presenceListeners) listener(event);
  }

  /** Announce the view's changes and refresh the counts, then write what changed. */
  persist(): Promise<void> {
    const changes = this.replica.takeViewChanges();
    if (changes.length > 0) for (const listener of this.changeListeners) listener(changes);
    this.setStatus({ pending: this.replica.pendingCount, quarantined: [...this.replica.quarantined] });
    const change = this.replica.flush();
    if (isEmptyWrite(change)) return this.writes;
    // Writes go to the store in the order they were made.
    this.writes = this.writes.then(() => this.store.write(change));
    return this.writes;
  }

  // --- Reads -------------------------------------------------------------------------------

  rows<K extends keyof T & string>(table: K): T[K][] {
    const rows = [...this.replica.viewRows(table)].map(([, row]) => row);
    return sortByKey(this.tableSchema(table), rows) as T[K][];
  }

  get<K extends keyof T & string>(table: K, key: KeyInput): T[K] | undefined {
    const schema = this.tableSchema(table);
    return this.replica.viewRow(table, keyText(schema, keyRow(schema, table, key))) as T[K] | undefined;
  }

  bucketsOf<K extends keyof T & string>(table: K, key: KeyInput): string[] {
    const schema = this.tableSchema(table);
    return [...this.replica.rowBuckets(table, keyText(schema, keyRow(schema, table, key)))];
  }

  private tableSchema(table: string) {
    const schema = this.replica.schema.tables[table];
    if (!schema) throw new TypeError(`the app has no table \`${table}\``);
    return schema;
  }

  buckets(): string[] {
    return this.replica.heldBuckets();
  }

  // --- Writes ------------------------------------------------------------------------------

  registerOptimistic(mutators: OptimisticMutators<T, M>): void {
    this.replica.setOptimistic(mutators as Record<string, OptimisticMutator<never, never>>);
    void this.persist();
  }

  async mutate<K extends keyof M & string>(name: K, args: M[K]): Promise<Queued> {
    this.ensureOpen();
    const queued = this.replica.mutate(name, args, Date.now());
    await this.persist();
    this.pushLoop.wake();
    return queued;
  }

  async retryQuarantined(clientMutationId: string): Promise<Queued | undefined> {
    this.ensureOpen();
    const entry = this.replica.unquarantine(clientMutationId);
    if (!entry) return undefined;
    let queued: Queued;
    try {
      queued = this.replica.mutate(entry.name, entry.args, Date.now());
    } catch (err) {
      // Refused by its local run: it stays in the quarantine.
      this.replica.renewQuarantine(entry);
      throw err;
    }
    await this.persist();
    this.pushLoop.wake();
    return queued;
  }

  async discardQuarantined(clientMutationId: string): Promise<boolean> {
    const found = this.replica.unquarantine(clientMutationId) !== undefined;
    await this.persist();
    return found;
  }

  private ensureOpen(): void {
    if (this.closed) throw new ClosedError();
  }

  // --- Sync --------------------------------------------------------------------------------

  private setSyncing(starts: boolean): void {
    this.running += starts ? 1 : -1;
    this.setStatus({ syncing: this.running > 0 });
  }

  private recordError(err: unknown): void {
    this.setStatus({ lastError: err instanceof Error ? err.message : String(err) });
  }

  async pull(): Promise<void> {
    this.ensureOpen();
    await this.pullOnce();
  }

  async push(): Promise<void> {
    this.ensureOpen();
    if (await this.pushOnce()) this.pullLoop.wake(true);
  }

  async sync(): Promise<void> {
    this.ensureOpen();
    let wait = 10;
    for (let round = 0; round < DEFAULT_PUSH_ROUNDS; round++) {
      await this.pushOnce();
      await this.pullOnce();
      if (this.replica.pendingCount === 0) return;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait *= 2;
    }
  }

  /** One pull at a time: a caller arriving while one runs waits for it and pulls again. */
  private pullOnce(): Promise<void> {
    return this.pulls.run(() => this.pullPages());
  }

  private async pullPages(): Promise<void> {
    this.setSyncing(true);
    try {
      let cursor = this.replica.meta.cursor;
      for (;;) {
        const page = await this.remote.pull({ clientId: this.clientId, cursor, limit: this.settings.pullPage });
        const applied = this.replica.applyPage(page, Date.now(), this.settings.bucketTtlMs);
        await this.persist();
        if (applied.requeued > 0) this.pushLoop.wake(true);
        if (!page.hasMore) break;
        cursor = page.cursor;
      }
      this.setStatus({ lastError: null, lastPullAt: Date.now() });
      this.heldChanged();
    } catch (err) {
      this.recordError(err);
      this.heldChanged();
      throw err;
    } finally {
      this.setSyncing(false);
    }
  }

  /** One push at a time. Returns whether something was applied. */
  private pushOnce(): Promise<boolean> {
    return this.pushes.run(() => this.pushBatches());
  }

  private async pushBatches(): Promise<boolean> {
    this.setSyncing(true);
    let batchSize = this.settings.pushBatch;
    let appliedAny = false;
    let renumberedAt: number | undefined;
    try {
      for (;;) {
        const batch = this.replica.unpushed(batchSize);
        if (batch.length === 0) break;
        try {
          const response = await this.remote.push({
            clientId: this.clientId,
            mutations: batch.map(({ mutationId, clientMutationId, name, args, hlc }) => ({
              mutationId,
              clientMutationId,
              name,
              args,
              hlc,
            })),
          });
          appliedAny = this.replica.recordResults(response.results, Date.now()) || appliedAny;
          await this.persist();
          // The server stopped early without an error: the rest goes later.
          if (response.results.length < batch.length) break;
        } catch (err) {
          if (!(err instanceof ServerError)) throw err;
          const last = err.problem.lastMutationId;
          if (err.code === "mutation_out_of_order" && last !== undefined && renumberedAt !== last) {
            // The server's sequence is not where the outbox's is: number on from there, once.
            renumberedAt = last;
            this.replica.renumber(last);
            await this.persist();
            continue;
          }
          if (err.code === "malformed_request" || err.code === "payload_too_large") {
            if (batch.length > 1) {
              // Find the mutation the server cannot take by pushing fewer at a time.
              batchSize = Math.max(1, Math.floor(batch.length / 2));
              continue;
            }
            batchSize = this.settings.pushBatch;
            this.replica.refuse(batch[0]!, err.problem, Date.now());
            await this.persist();
            continue;
          }
          throw err;
        }
      }
      this.setStatus({ lastError: null });
      return appliedAny;
    } catch (err) {
      this.recordError(err);
      throw err;
    } finally {
      this.setSyncing(false);
    }
  }

  // --- Realtime ----------------------------------------------------------------------------

  subscribe(buckets: readonly string[] | null): void {
    this.subscription = buckets === null ? undefined : [...buckets];
    this.reconcile();
  }

  track(bucket: string, meta: PresenceMeta = {}): void {
    this.tracked.set(bucket, { ...meta });
    this.reconcile();
  }

  untrack(bucket: string): void {
    this.tracked.delete(bucket);
    this.reconcile();
  }

  presenceState(bucket: string): PresenceState {
    return this.presence.get(bucket);
  }

  /** After a pull: buckets lost leave the subscription and the presence, as they left the server's. */
  private heldChanged(): void {
    const held = new Set(this.replica.heldBuckets());
    const lost = [...this.held].filter((b) => !held.has(b));
    const changed = lost.length > 0 || [...held].some((b) => !this.held.has(b));
    this.held = held;
    if (lost.length > 0) {
      if (this.subscription) this.subscription = this.subscription.filter((b) => !lost.includes(b));
      for (const bucket of lost) this.tracked.delete(bucket);
      this.emitPresence(this.presence.forget((b) => !lost.includes(b)));
    }
    if (changed) this.reconcile();
  }

  /** Tell the server what changed in the subscription and presence. */
  private reconcile(): void {
    if (!this.source?.connected) return;
    const step = plan(this.subscription, this.tracked, this.held, this.strict, this.told);
    if (step === "reconnect") {
      this.source.reconnect();
      return;
    }
    for (const frame of step.frames) this.source.send(frame);
    const subscription = this.told.subscription;
    if (subscription) this.emitPresence(this.presence.forget((b) => subscription.has(b)));
  }

  private streamOpened(): void {
    this.told = new Told();
    this.setStatus({ connected: true });
    // Nothing is pinged for what happened while away: catch up.
    this.pullLoop.wake(true);
    this.pushLoop.wake(true);
    this.reconcile();
  }

  private streamClosed(info: CloseInfo): void {
    this.setStatus({ connected: false, ...(info.error ? { lastError: `stream: ${info.error}` } : {}) });
    // Who is present comes afresh with the next connection.
    this.emitPresence(this.presence.forget());
  }

  private streamFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case "ping":
      case "buckets_changed":
        this.pullLoop.wake(true);
        return;
      case "presence_state":
        // Presence of buckets not followed (sent before a narrowing reached the server) is left out.
        if (this.told.follows(frame.bucket)) this.emitPresence([this.presence.replace(frame.bucket, frame.state)]);
        return;
      case "presence_diff": {
        if (!this.told.follows(frame.bucket)) return;
        const event = this.presence.diff(frame.bucket, frame.joins, frame.leaves);
        if (event) this.emitPresence([event]);
        return;
      }
      case "error":
        if (frame.code === "forbidden") {
          // A bucket refused: ask only for buckets held from now on, and pull to learn them.
          this.strict = true;
          this.pullLoop.wake(true);
        } else if (frame.code === "meta_too_large") {
          // The largest meta announced goes; the app hears of it in the status.
          const largest = [...this.told.tracks].sort((a, b) => JSON.stringify(b[1]).length - JSON.stringify(a[1]).length)[0];
          if (largest) this.tracked.delete(largest[0]);
        }
        this.setStatus({ lastError: `stream: ${frame.code}: ${frame.detail}` });
        return;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pushLoop.stop();
    this.pullLoop.stop();
    this.source?.stop();
    this.unsubscribeOnline?.();
    this.setStatus({ connected: false });
    await Promise.allSettled([this.pulls.idle(), this.pushes.idle()]);
    await this.writes.catch(() => undefined);
    await this.store.close();
  }
}

