/**
 * The client: a durable local copy of the actor's buckets that takes writes offline and
 * converges when it reconnects, speaking only the wire protocol (`docs/protocol.md`).
 *
 * Writes: `mutate` runs the app's optimistic function for the mutator (if it registered one)
 * against the view and appends the mutation to the outbox; when it resolves, the mutation is
 * in the store. When the store fails that write it rejects, and the mutation stays queued and
 * goes to the store with the next write (`nextWrite`). The outbox drains in the background: a
 * rejection is quarantined and never blocks what follows, a `409` renumbers the queue from the
 * server's sequence, `429` and `503` wait for `Retry-After`. After every pull the pending
 * mutations run again on the server's rows (the rebase), so what the server decided always
 * shows; a mutation's optimistic effect stays until a pull reports `syncedMutationId` at or
 * above it.
 *
 * Realtime: a `RealtimeSource` (by default `createRealtimeSource`: the global WebSocket, and
 * long-poll when the upgrade is refused on the way; a runtime without a WebSocket must pass a
 * source or `false`) turns pings into pulls and carries presence.
 *
 * Tabs: the tabs of a browser that open one store for one user share one client (`tabs.ts`): one
 * leads and syncs; the others apply its store writes and send it their mutations.
 *
 * `Client` wires the parts in `client/`: the pull and the push (`pull.ts`, `push.ts`), the stream
 * (`stream.ts`), the status (`status.ts`) and the tabs (`tabs.ts`). It keeps the reads, the writes
 * and the store.
 */

import { authProvider, actorOfToken, type AuthProvider } from "./auth.js";
import type { EngineClient, EngineClientOptions, OptimisticMutators, SyncedBucket } from "./client/api.js";
import { browserOnlineSignal, type OnlineSignal } from "./client/online.js";
import { Puller } from "./client/pull.js";
import { Pusher } from "./client/push.js";
import { StatusBoard, type Status } from "./client/status.js";
import { Stream } from "./client/stream.js";
import { joinTabs, type Tabs, type TabsHost } from "./client/tabs.js";
import { ClosedError } from "./errors.js";
import { SyncLoop } from "./loop.js";
import type { PresenceEvent } from "./presence.js";
import { Remote, type Fetch } from "./remote.js";
import { Replica } from "./replica.js";
import type { RowChange } from "./replica/changes.js";
import type { Queued } from "./replica/outbox.js";
import { keyRow, keyText, type AnySchema, type EngineSchema, type KeyInput, type MutatorTypes, type TableTypes } from "./schema.js";
import { memoryStore } from "./store/memory.js";
import { upgradeStoredState } from "./store/migrate.js";
import { isEmptyWrite, type ClientStore, type StoreWrite } from "./store/types.js";
import { sortByKey, type Actor, type OptimisticMutator } from "./view.js";
import { createRealtimeSource } from "./fallback.js";
import type { RealtimeSource } from "./websocket.js";
import type { BlobDownloadRequest, BlobTicket, BlobUploadRequest, PresenceMeta, PresenceState, Row } from "./wire.js";

/** Open the store, and start syncing (in the background unless told otherwise). */
export async function createEngineClient<T extends TableTypes, M extends MutatorTypes>(
  options: EngineClientOptions<T, M>,
): Promise<EngineClient<T, M>> {
  const realtime = realtimeSource(options.realtime, options.fetch);
  const provider = authProvider(options.auth);
  const actor = options.actor ?? actorOfToken(await provider.token());
  if (!actor) throw new TypeError("no actor: the token is not a JWT with a `sub`; pass `actor`");
  const store = options.store ?? memoryStore();
  const tabs = await joinTabs(options.tabs, store, options.url, actor.userId);
  // A follower tab gets the state from the leader: only the leader opens the store.
  const loaded = tabs ? await tabs.load() : await store.load();
  const stored = loaded && upgradeStoredState(loaded);
  const replica = new Replica(options.schema as unknown as AnySchema, actor, stored);
  const client = new Client<T, M>(options, realtime, tabs ? tabs.auth(provider) : provider, store, replica, tabs);
  await client.persist();
  if (options.optimistic) client.registerOptimistic(options.optimistic);
  if (tabs) await tabs.attach(client, stored);
  else client.start();
  return client;
}

/**
 * The realtime source `realtime` asks for: by default a WebSocket source over the global
 * `WebSocket` that falls back to long-poll (`createRealtimeSource`). Not silently none where there is no such global (Node 20, React Native without
 * it): a client without realtime only hears of others' writes at its next interval pull.
 */
function realtimeSource(realtime: RealtimeSource | false | undefined, fetch: Fetch | undefined): RealtimeSource | undefined {
  if (realtime === false) return undefined;
  if (realtime) return realtime;
  if (!(globalThis as { WebSocket?: unknown }).WebSocket) {
    throw new TypeError(
      "no global `WebSocket` for realtime: pass `realtime: createWebSocketSource({ webSocket: (url, protocols) => new WebSocket(url, protocols) })` " +
        "with this runtime's WebSocket class (Node 20 has a global one with `--experimental-websocket`), or `realtime: false` for none",
    );
  }
  return createRealtimeSource({ longPoll: fetch ? { fetch } : {} });
}

const DEFAULT_PUSH_ROUNDS = 8;

class Client<T extends TableTypes, M extends MutatorTypes> implements EngineClient<T, M>, TabsHost {
  readonly schema: EngineSchema<T, M>;
  private readonly remote: Remote;
  private readonly settings: Required<
    Pick<EngineClientOptions<T, M>, "pullIntervalMs" | "pullPage" | "pushBatch" | "bucketTtlMs" | "background">
  > & { syncOpen: readonly string[] | undefined };
  /** The buckets open through `syncBucket`, with how many handles hold each. */
  private readonly open = new Map<string, number>();
  /** Leading tabs: the buckets the tabs together hold open (this tab's among them). */
  private tabsOpen: string[] = [];
  readonly statusBoard: StatusBoard;
  private readonly changeListeners = new Set<(changes: RowChange[]) => void>();
  private readonly bucketListeners = new Set<(buckets: string[]) => void>();
  /** Settles once the last store write asked for has; never rejects. */
  private writes: Promise<void> = Promise.resolve();
  /** The store write asked for that has not started yet: a persist until it starts joins it. */
  private queued: Promise<void> | undefined;
  private readonly puller: Puller;
  private readonly pusher: Pusher;
  private readonly stream: Stream;
  private closed = false;
  /** The replica's `rebases` at the last store write. */
  private rebasesWritten = 0;
  private readonly pushLoop: SyncLoop;
  private readonly pullLoop: SyncLoop;
  private readonly online: OnlineSignal | undefined;
  private unsubscribeOnline: (() => void) | undefined;

  constructor(
    options: EngineClientOptions<T, M>,
    private readonly source: RealtimeSource | undefined,
    private readonly auth: AuthProvider,
    private readonly store: ClientStore,
    readonly replica: Replica,
    private readonly tabs?: Tabs,
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
      syncOpen: options.syncOpen ? [...options.syncOpen] : undefined,
    };
    const timing = {
      idleMs: this.settings.pullIntervalMs,
      backoffBaseMs: options.retry?.backoffBaseMs ?? 500,
      backoffMaxMs: options.retry?.backoffMaxMs ?? 30_000,
    };
    this.pushLoop = new SyncLoop(
      async () => {
        // What a push applied, a pull confirms.
        if (await this.pusher.pushOnce()) this.pullLoop.wake(true);
      },
      timing,
      (retry) => this.statusBoard.setRetry("push", retry),
    );
    this.pullLoop = new SyncLoop(() => this.puller.pullOnce(), timing, (retry) => this.statusBoard.setRetry("pull", retry));
    this.online = options.online === false ? undefined : (options.online ?? browserOnlineSignal());
    this.statusBoard = new StatusBoard({
      connected: false,
      longPoll: false,
      syncing: false,
      ...replica.counts,
      progress: null,
      lastPullAt: null,
      presenceRefused: false,
      lastError: null,
      storeError: null,
      storing: false,
      retry: null,
    });
    const persist = () => this.persist();
    const followHeld = this.settings.syncOpen !== undefined;
    this.stream = new Stream(this.source, replica, this.statusBoard, this.pullLoop, this.pushLoop, followHeld);
    const openBuckets = () => this.openBuckets();
    this.puller = new Puller(this.remote, replica, this.settings, this.statusBoard, persist, this.pushLoop, () => this.heldChanged(), openBuckets);
    this.pusher = new Pusher(this.remote, replica, this.settings, this.statusBoard, persist);
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
    return this.statusBoard.now;
  }

  /** Whether this client syncs: alone, or as the tabs' leader. */
  private get leading(): boolean {
    return this.tabs?.leading ?? true;
  }

  heldChanged(): void {
    if (!this.stream.heldChanged()) return;
    const held = this.replica.heldBuckets();
    for (const listener of this.bucketListeners) listener(held);
  }

  lead(): void {
    this.start();
  }

  wakePush(): void {
    this.pushLoop.wake();
  }

  realtime(tracked: Map<string, PresenceMeta>, subscription: string[] | null): void {
    this.stream.want(tracked, subscription);
  }

  openByTabs(buckets: string[]): void {
    if (buckets.length === this.tabsOpen.length && buckets.every((b, i) => b === this.tabsOpen[i])) return;
    this.tabsOpen = buckets;
    if (this.settings.background && !this.closed && this.leading) this.pullLoop.wake(true);
  }

  start(): void {
    if (!this.settings.background || this.closed) return;
    this.pullLoop.wake();
    this.pushLoop.wake();
    const stream = this.stream;
    const streamBase = this.remote.url("sync/stream").replace(/^http/, "ws");
    this.source?.start({
      get url() {
        return stream.streamUrl(streamBase);
      },
      pollUrl: this.remote.url("sync/poll"),
      token: async () => this.auth.token(),
      refresh: async () => {
        await this.auth.refresh?.();
      },
      onOpen: () => this.stream.streamOpened(),
      onFrame: (frame) => this.stream.streamFrame(frame),
      onClose: (info) => this.stream.streamClosed(info),
      onFailure: (reason) => this.statusBoard.setStatus({ lastError: `stream: ${reason}` }),
    });
    this.unsubscribeOnline = this.online?.subscribe((online) => {
      if (!online || this.closed) return;
      this.pushLoop.wake(true);
      this.pullLoop.wake(true);
      this.source?.retryNow?.();
    });
  }

  // --- Status and notifications ------------------------------------------------------------

  onStatus(listener: (status: Status) => void): () => void {
    return this.statusBoard.onStatus(listener);
  }

  onChange(listener: (changes: RowChange[]) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onBuckets(listener: (buckets: string[]) => void): () => void {
    this.bucketListeners.add(listener);
    return () => this.bucketListeners.delete(listener);
  }

  onPresence(listener: (event: PresenceEvent) => void): () => void {
    const own = this.stream.onPresence((event) => {
      if (this.leading) listener(event);
    });
    const leaders = this.tabs?.onPresence(listener);
    return () => {
      own();
      leaders?.();
    };
  }

  /**
   * Announce the view's changes and show the counts, then write what changed. Resolves once the
   * store holds it, and rejects when the write holding it fails.
   */
  persist(): Promise<void> {
    const changes = this.replica.takeViewChanges();
    if (changes.length > 0) for (const listener of this.changeListeners) listener(changes);
    this.showCounts();
    if (this.leading) {
      if (this.replica.unflushed) this.statusBoard.setStatus({ storing: true });
      return (this.queued ??= this.nextWrite());
    }
    // A follower's changes reach the store through the leader.
    this.replica.flush();
    return this.writes;
  }

  /**
   * The status's counts, which rise at once and fall only once the store holds what made them
   * fall: one rule for every count (`replica/counts.ts`).
   */
  private showCounts(): void {
    this.statusBoard.setStatus(this.replica.counts);
  }

  /**
   * The store write after those asked for before: one at a time, in order, each taking what
   * changed until it starts (`flush`), so the changes made while the store is busy go as one. A
   * write the store fails is the status's `storeError` and rejects the operations waiting for it;
   * what it held goes with the next write, which is never skipped and flushes after the failure,
   * so the store never holds a later write without an earlier one (a pull page's cursor without
   * the page's rows).
   */
  private nextWrite(): Promise<void> {
    const write = this.writes.then(async () => {
      this.queued = undefined;
      try {
        await this.write(this.replica.flush());
      } finally {
        if (this.queued === undefined) this.statusBoard.setStatus({ storing: false });
      }
    });
    // Handled here, so that a failure no caller awaits (`void this.persist()`) is no unhandled
    // rejection, and the next write starts after it all the same.
    this.writes = write.catch(() => undefined);
    return write;
  }

  /** Write `change` to the store, and then to the other tabs. */
  private async write(change: StoreWrite): Promise<void> {
    if (isEmptyWrite(change)) return;
    const rebased = this.replica.rebases !== this.rebasesWritten;
    this.rebasesWritten = this.replica.rebases;
    try {
      await this.store.write(change);
    } catch (err) {
      this.replica.unwritten(change);
      // The other tabs hear of the rebase with the next write.
      if (rebased) this.rebasesWritten = -1;
      this.statusBoard.recordStoreError(err);
      throw err;
    }
    this.replica.written(change);
    this.statusBoard.setStatus({ storeError: null });
    this.showCounts();
    this.tabs?.published(change, rebased);
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

  isPending<K extends keyof T & string>(table: K, key: KeyInput): boolean {
    const schema = this.tableSchema(table);
    return this.replica.pendingOn(table, keyText(schema, keyRow(schema, table, key)));
  }

  canWrite<K extends keyof T & string>(table: K, row: T[K]): boolean | "unknown" {
    this.tableSchema(table);
    return this.replica.canWrite(table, row as Row);
  }

  private tableSchema(table: string) {
    const schema = this.replica.schema.tables[table];
    if (!schema) throw new TypeError(`the app has no table \`${table}\``);
    return schema;
  }

  buckets(): string[] {
    return this.replica.heldBuckets();
  }

  syncBucket(bucket: string): SyncedBucket {
    this.open.set(bucket, (this.open.get(bucket) ?? 0) + 1);
    this.tabs?.syncOpen([...this.open.keys()]);
    if (this.settings.background && !this.closed) this.pullLoop.wake(true);
    let released = false;
    return {
      bucket,
      release: () => {
        if (released) return;
        released = true;
        const count = (this.open.get(bucket) ?? 1) - 1;
        if (count > 0) {
          this.open.set(bucket, count);
          return;
        }
        this.open.delete(bucket);
        this.tabs?.syncOpen([...this.open.keys()]);
        // The pull releases it, and the stream stops following it.
        if (this.settings.background && !this.closed) this.pullLoop.wake(true);
      },
    };
  }

  openBuckets(): string[] {
    if (!this.tabs) return [...this.open.keys()].sort();
    // The leader syncs what any tab holds open; the tabs' wishes carry this tab's own too.
    return [...new Set([...this.open.keys(), ...this.tabsOpen])].sort();
  }

  // --- Writes ------------------------------------------------------------------------------

  registerOptimistic(mutators: OptimisticMutators<T, M>): void {
    this.replica.setOptimistic(mutators as Record<string, OptimisticMutator<never, never>>);
    void this.persist();
  }

  async mutate<K extends keyof M & string>(name: K, args: M[K]): Promise<Queued> {
    this.ensureOpen();
    const queued = this.replica.mutate(name, args, Date.now());
    if (!this.leading) {
      void this.persist();
      return this.tabs!.forward(queued, name, args);
    }
    return this.sendStored(queued);
  }

  /**
   * `queued` once the store holds it; the push is woken even when the store failed it, so that
   * a mutation that is in memory only reaches the server all the same.
   */
  private async sendStored(queued: Queued): Promise<Queued> {
    try {
      await this.persist();
    } finally {
      this.pushLoop.wake();
    }
    return queued;
  }

  async retryQuarantined(clientMutationId: string): Promise<Queued | undefined> {
    this.ensureOpen();
    if (!this.leading) return (await this.tabs!.ask({ op: "retry", clientMutationId })) as Queued | undefined;
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
    return this.sendStored(queued);
  }

  async discardQuarantined(clientMutationId: string): Promise<boolean> {
    if (!this.leading) return (await this.tabs!.ask({ op: "discard", clientMutationId })) as boolean;
    const found = this.replica.unquarantine(clientMutationId) !== undefined;
    await this.persist();
    return found;
  }

  private ensureOpen(): void {
    if (this.closed) throw new ClosedError();
  }

  // --- Sync --------------------------------------------------------------------------------

  async pull(): Promise<void> {
    this.ensureOpen();
    if (!this.leading) return void (await this.tabs!.ask({ op: "pull" }));
    await this.puller.pullOnce();
  }

  async push(): Promise<void> {
    this.ensureOpen();
    if (!this.leading) return void (await this.tabs!.ask({ op: "push" }));
    if (await this.pusher.pushOnce()) this.pullLoop.wake(true);
  }

  async sync(): Promise<void> {
    this.ensureOpen();
    if (!this.leading) return void (await this.tabs!.ask({ op: "sync" }));
    let wait = 10;
    for (let round = 0; round < DEFAULT_PUSH_ROUNDS; round++) {
      await this.pusher.pushOnce();
      await this.puller.pullOnce();
      if (this.replica.pendingCount === 0) return;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait *= 2;
    }
  }

  // --- Realtime ----------------------------------------------------------------------------

  subscribe(buckets: readonly string[] | null): void {
    if (this.tabs) this.tabs.subscribe(buckets);
    else this.stream.subscribe(buckets);
  }

  track(bucket: string, meta: PresenceMeta = {}): void {
    if (this.tabs) this.tabs.track(bucket, meta);
    else this.stream.track(bucket, meta);
  }

  untrack(bucket: string): void {
    if (this.tabs) this.tabs.untrack(bucket);
    else this.stream.untrack(bucket);
  }

  presenceState(bucket: string): PresenceState {
    return this.leading ? this.stream.presenceState(bucket) : this.tabs!.presenceState(bucket);
  }

  // --- Blobs -------------------------------------------------------------------------------

  blobTicket(route: "upload", request: BlobUploadRequest): Promise<BlobTicket>;
  blobTicket(route: "download", request: BlobDownloadRequest): Promise<BlobTicket>;
  async blobTicket(route: "upload" | "download", request: BlobUploadRequest | BlobDownloadRequest): Promise<BlobTicket> {
    this.ensureOpen();
    return route === "upload"
      ? this.remote.blobTicket(route, request as BlobUploadRequest)
      : this.remote.blobTicket(route, request);
  }

  transferBlob(ticket: BlobTicket, body?: Uint8Array): Promise<Uint8Array> {
    this.ensureOpen();
    return this.remote.transfer(ticket, body);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.tabs?.retire();
    this.pushLoop.stop();
    this.pullLoop.stop();
    this.source?.stop();
    this.unsubscribeOnline?.();
    this.statusBoard.setStatus({ connected: false });
    await Promise.allSettled([this.puller.idle(), this.pusher.idle()]);
    // Once more for what a failed write left in memory, in case the store takes it now.
    await this.persist().catch(() => undefined);
    // The lock goes to another tab once this one's writes are in the store and the store is
    // closed (a SQLite database on OPFS opens in one tab at a time).
    await this.store.close().finally(() => this.tabs?.close());
  }
}
