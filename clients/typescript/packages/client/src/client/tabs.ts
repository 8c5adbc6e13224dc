/**
 * One client across the tabs of a browser (`docs/design.md` §9, "One client across tabs"). The
 * tabs of one origin that open the same store for the same user elect a leader with a Web Lock:
 * the leader runs the pull, the push, the stream and writes the store, as a lone client does.
 * The others follow, over a `BroadcastChannel`:
 *
 *   follower ──request (a mutation, a pull…)──► leader ──store write, then reply──► follower
 *   every tab ◄──write, status, presence──────── leader
 *
 * A follower runs a mutation's optimistic function at once and sends the mutation, with its
 * `clientMutationId` and clock reading, to the leader, which alone numbers mutations: it queues
 * it, writes the store, sends the write to every tab and only then replies, so a mutation whose
 * `mutate` resolved is durable. Each follower applies the leader's writes to its replica
 * (`replica/mirror.ts`) and rebases where the leader did.
 *
 *   follower ──lock granted──► taking the lead: load the store, queue own waiting mutations
 *            ──► leader: start syncing, announce ──► every follower asks it for the state and
 *                sends its waiting requests again
 *
 * Only the leader opens the store: a store may be open in one tab at a time (SQLite on OPFS).
 * The leader keeps a copy of what it has written there (`durable`), and a follower gets that
 * state from it over the channel when it joins and when another tab takes the lead; the channel
 * keeps one sender's order, so the state answers for every write sent before it, and the writes
 * after it follow.
 *
 * When the leader's tab closes or dies, the browser gives the lock to a waiting tab. What the old
 * leader wrote is in the store, which the new one reads and every follower gets from it, so no
 * message lost with the old leader loses a write. A request sent again is not queued twice: the
 * leader answers a `clientMutationId` it has queued or found in the store with the number it has.
 *
 * Each tab also holds a lock of its own for its lifetime, so the leader learns when a follower's
 * tab is gone (it is granted that lock) and drops its presence.
 */

import type { AuthProvider } from "../auth.js";
import { ClosedError, ForbiddenError, ServerError } from "../errors.js";
import { newUuid } from "../ids.js";
import type { PresenceEvent } from "../presence.js";
import type { Replica } from "../replica.js";
import type { Queued } from "../replica/outbox.js";
import { UnknownMutatorError } from "../replica/outbox.js";
import { withWrite } from "../store/memory.js";
import { upgradeStoredState } from "../store/migrate.js";
import type { ClientStore, StoredState, StoreWrite } from "../store/types.js";
import type { PresenceMeta, PresenceState, Problem } from "../wire.js";
import type { Status, StatusBoard } from "./status.js";

/** The part of the Web Locks API (`navigator.locks`) the tabs use. */
export interface TabLocks {
  request(name: string, options: { signal?: AbortSignal }, callback: (lock: unknown) => Promise<unknown>): Promise<unknown>;
}

/** The part of a `BroadcastChannel` the tabs use. */
export interface TabChannel {
  postMessage(message: unknown): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  close(): void;
}

/** How the tabs of one user share a client; the client's `tabs` option. */
export interface TabsOptions {
  /** Names the lock and the channel: tabs with the same name share one client (by default the server's URL, the user and the store's `sharedName`). */
  name?: string;
  /** The Web Locks API (`navigator.locks` by default). */
  locks?: TabLocks;
  /** Opens a channel to the other tabs (`new BroadcastChannel(name)` by default). */
  channel?: (name: string) => TabChannel;
}

/** What the tabs need of the client they share. */
export interface TabsHost {
  readonly replica: Replica;
  readonly statusBoard: StatusBoard;
  /** Announce the view's changes; a leader also writes them to the store. */
  persist(): Promise<void>;
  /** Start syncing: the loops and the stream. */
  lead(): void;
  wakePush(): void;
  /** After a write from the leader: tell the app if the buckets held changed. */
  heldChanged(): void;
  /** Follow and be present as every tab together asks. */
  realtime(tracked: Map<string, PresenceMeta>, subscription: string[] | null): void;
  /** Sync the buckets every tab together holds open (`syncBucket`), besides the leader's own. */
  openByTabs(buckets: string[]): void;
  onPresence(listener: (event: PresenceEvent) => void): () => void;
  pull(): Promise<void>;
  push(): Promise<void>;
  sync(): Promise<void>;
  retryQuarantined(clientMutationId: string): Promise<Queued | undefined>;
  discardQuarantined(clientMutationId: string): Promise<boolean>;
}

/** What a follower asks the leader to do. */
type Request =
  | { op: "mutate"; name: string; args: unknown; clientMutationId: string; hlc: string; createdAt: number }
  | { op: "pull" | "push" | "sync" }
  | { op: "retry" | "discard"; clientMutationId: string }
  | { op: "state" };

/**
 * A tab's wishes: presence by bucket (with when it was set), the subscription, and the buckets it
 * holds open (`syncBucket`) on a client that syncs only what is open.
 */
interface Wishes {
  tracked: [string, PresenceMeta, number][];
  subscription: string[] | null;
  open: string[];
}

type Message =
  | { type: "hello"; from: string }
  | { type: "leader"; leader: string; epoch: number }
  | { type: "write"; leader: string; write: StoreWrite; rebased: boolean; clock: string }
  | { type: "status"; leader: string; status: Partial<Status> }
  | { type: "presence"; leader: string; event: PresenceEvent }
  | { type: "refused"; leader: string }
  | { type: "request"; from: string; id: number; request: Request }
  | { type: "reply"; to: string; id: number; value?: unknown; error?: SentError }
  | { type: "wishes"; from: string; wishes: Wishes }
  | { type: "bye"; from: string };

/** An error as it crosses to another tab: a `ServerError`'s problem with it. */
interface SentError {
  name: string;
  message: string;
  status?: number;
  problem?: Problem;
  retryAfterMs?: number;
}

/** A request waiting for a leader's reply. */
interface Waiting {
  request: Request;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  /** The number a leader's write gave the mutation, once one did. */
  numbered?: number;
}

/** The status fields the leader's work sets; `pending` and `quarantined` each tab counts. */
const LEADERS_FIELDS = ["connected", "longPoll", "syncing", "lastPullAt", "lastError", "storeError", "storing", "retry"] as const;

/** The tabs' name for `store` of `userId` at `url`, or `undefined` when they cannot share it. */
function tabsName(options: TabsOptions, store: ClientStore, url: string, userId: string): string | undefined {
  if (options.name) return options.name;
  if (!store.sharedName) return undefined;
  return `engine-client ${url} ${userId} ${store.sharedName}`;
}

/**
 * The tabs' coordination for a client of `userId` over `store`, or `undefined` where tabs do not
 * share one: `tabs: false`, a store no other tab can open (memory), or a runtime without Web Locks
 * or `BroadcastChannel` (Node, React Native). It resolves once this tab leads or knows who does.
 */
export async function joinTabs(
  option: TabsOptions | false | undefined,
  store: ClientStore,
  url: string,
  userId: string,
): Promise<Tabs | undefined> {
  if (option === false) return undefined;
  const options = option ?? {};
  const name = tabsName(options, store, url, userId);
  const global = globalThis as { navigator?: { locks?: TabLocks }; BroadcastChannel?: new (name: string) => TabChannel };
  const locks = options.locks ?? global.navigator?.locks;
  const Channel = global.BroadcastChannel;
  const channel = options.channel ?? (Channel ? (n: string) => new Channel(n) : undefined);
  if (name === undefined || !locks || !channel) return undefined;
  const tabs = new Tabs(name, locks, channel(name), store);
  await tabs.elect();
  return tabs;
}

export class Tabs {
  readonly tab = newUuid();
  private host: TabsHost | undefined;
  /** The leader this tab follows, and when it took the lead. */
  private leader: { id: string; epoch: number } | undefined;
  leading = false;
  /** Leader: when it took the lead, past its predecessor's, which followers compare. */
  private epoch = 0;
  private closed = false;
  private readonly stop = new AbortController();
  private release!: () => void;
  private readonly released = new Promise<void>((resolve) => (this.release = resolve));
  /** Writes held while the store is being read, applied after. */
  private held: Message[] | undefined = [];
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 0;
  /** This tab's mutations no leader has queued yet, by `clientMutationId`. */
  private readonly local = new Set<string>();
  /** Leader: what the store holds, as it read and wrote it, for the followers. */
  private durable: StoredState | undefined;
  /** Leader: every mutation it queued for a tab or found in the store, with its number. */
  private readonly known = new Map<string, number>();
  /** Leader: each tab's realtime wishes (this tab's too). */
  private readonly wishes = new Map<string, Wishes>();
  private readonly presence = new Map<string, PresenceState>();
  private readonly presenceListeners = new Set<(event: PresenceEvent) => void>();
  private elected!: () => void;

  constructor(
    readonly name: string,
    private readonly locks: TabLocks,
    private readonly channel: TabChannel,
    private readonly store: ClientStore,
  ) {
    this.wishes.set(this.tab, { tracked: [], subscription: null, open: [] });
    channel.addEventListener("message", (event) => void this.receive(event.data as Message));
  }

  /** Resolves once this tab holds the lock or has heard who does. */
  async elect(): Promise<void> {
    // Held for the tab's lifetime: the leader is granted it when the tab is gone.
    await new Promise<void>((held) => {
      this.locks
        .request(`${this.name} tab ${this.tab}`, { signal: this.stop.signal }, () => (held(), this.released))
        .catch(() => held());
    });
    const decided = new Promise<void>((resolve) => (this.elected = resolve));
    this.locks
      .request(this.name, { signal: this.stop.signal }, async () => {
        if (this.closed) return;
        if (this.host) await this.takeLead();
        else this.leadBeforeAttach();
        this.elected();
        await this.released;
      })
      .catch(() => undefined);
    this.post({ type: "hello", from: this.tab });
    await decided;
  }

  /**
   * Start serving as leader or follower for `host`, whose replica holds `loaded`, read from the
   * store after `elect`.
   */
  async attach(host: TabsHost, loaded: StoredState | undefined): Promise<void> {
    this.host = host;
    host.statusBoard.onStatus((status) => {
      if (this.leading) this.postStatus(status);
    });
    host.onPresence((event) => {
      if (!this.leading) return;
      this.presence.set(event.bucket, event.state);
      this.post({ type: "presence", leader: this.tab, event });
    });
    if (this.leading) {
      this.held = undefined;
      // Granted the lock after following another tab, perhaps after the store was read.
      if (this.leader) {
        loaded = await this.loadStore();
        if (loaded) host.replica.replaceWith(loaded, new Set());
      }
      await this.startLeading(loaded);
      return;
    }
    const held = this.held ?? [];
    this.held = undefined;
    for (const message of held) await this.receive(message);
    this.sendWishes();
  }

  // --- Both ----------------------------------------------------------------------------------

  /**
   * The state the client starts from, in this client's layout: a leader reads the store, a
   * follower gets it from the leader (it does not open the store).
   */
  load(): Promise<StoredState | undefined> {
    return this.leading ? this.loadStore() : this.stateOfLeader();
  }

  /** Leader: what the store holds now, in this client's layout, kept as `durable`. */
  private async loadStore(): Promise<StoredState | undefined> {
    const loaded = await this.store.load();
    const stored = loaded && upgradeStoredState(loaded);
    this.durable = stored && structuredClone(stored);
    return stored;
  }

  /** Follower: the state the leader has in the store, with every write it sent before. */
  private async stateOfLeader(): Promise<StoredState | undefined> {
    return (await this.ask({ op: "state" })) as StoredState | undefined;
  }

  private post(message: Message): void {
    if (!this.closed) this.channel.postMessage(message);
  }

  private async receive(message: Message): Promise<void> {
    if (this.closed) return;
    if (this.leading) {
      // Before `attach`, the tab does not serve yet: it announces itself once it does.
      if (this.host && !this.retiring) await this.serve(message);
      return;
    }
    if (message.type === "leader") return this.follow(message);
    if (message.type === "reply") return this.replied(message);
    if (this.held) {
      this.held.push(message);
      return;
    }
    if (!("leader" in message) || message.leader !== this.leader?.id) return;
    const host = this.host!;
    switch (message.type) {
      case "write":
        for (const entry of [...message.write.putOutbox, ...message.write.putQuarantine]) this.numbered(entry.clientMutationId, entry.mutationId);
        host.replica.clock.observe(message.clock);
        host.replica.applyWrite(message.write, message.rebased, this.local);
        void host.persist();
        host.heldChanged();
        return;
      case "status":
        host.statusBoard.setStatus(message.status);
        return;
      case "presence":
        this.presence.set(message.event.bucket, message.event.state);
        for (const listener of this.presenceListeners) listener(message.event);
        return;
      case "refused":
        void this.appAuth?.refresh?.();
        return;
    }
  }

  /** The app's auth provider, told when the leader's token is refused. */
  private appAuth: AuthProvider | undefined;

  /** `provider` as the client uses it: when the leader's token is refused, every tab's provider hears of it. */
  auth(provider: AuthProvider): AuthProvider {
    this.appAuth = provider;
    return {
      token: () => provider.token(),
      refresh: async () => {
        if (this.leading) this.post({ type: "refused", leader: this.tab });
        await provider.refresh?.();
      },
    };
  }

  /** Whether the client is closing: a leader no longer serves (the next one will). */
  private retiring = false;

  /** The client is closing: stop serving the other tabs; they ask the next leader. */
  retire(): void {
    this.retiring = true;
  }

  /** Close this tab's part: a leader lets the lock go to another tab. */
  close(): void {
    if (this.closed) return;
    if (!this.leading) this.post({ type: "bye", from: this.tab });
    this.closed = true;
    this.stop.abort();
    this.release();
    this.channel.close();
    for (const waiting of this.waiting.values()) waiting.reject(new ClosedError());
    this.waiting.clear();
  }

  // --- Realtime wishes ---------------------------------------------------------------------

  track(bucket: string, meta: PresenceMeta): void {
    const own = this.wishes.get(this.tab)!;
    own.tracked = [...own.tracked.filter(([b]) => b !== bucket), [bucket, { ...meta }, Date.now()]];
    this.sendWishes();
  }

  untrack(bucket: string): void {
    const own = this.wishes.get(this.tab)!;
    own.tracked = own.tracked.filter(([b]) => b !== bucket);
    this.sendWishes();
  }

  subscribe(buckets: readonly string[] | null): void {
    this.wishes.get(this.tab)!.subscription = buckets === null ? null : [...buckets];
    this.sendWishes();
  }

  /** The buckets this tab holds open. */
  syncOpen(buckets: readonly string[]): void {
    this.wishes.get(this.tab)!.open = [...buckets];
    this.sendWishes();
  }

  private sendWishes(): void {
    if (this.leading) this.applyWishes();
    else this.post({ type: "wishes", from: this.tab, wishes: this.wishes.get(this.tab)! });
  }

  /** Leader: be present in every bucket some tab is present in (with the latest meta set), and follow what any tab follows. */
  private applyWishes(): void {
    const tracked = new Map<string, [PresenceMeta, number]>();
    let subscription: Set<string> | null = new Set();
    const open = new Set<string>();
    for (const wishes of this.wishes.values()) {
      for (const bucket of wishes.open) open.add(bucket);
      for (const [bucket, meta, at] of wishes.tracked) {
        const known = tracked.get(bucket);
        if (!known || known[1] < at) tracked.set(bucket, [meta, at]);
      }
      if (wishes.subscription === null) subscription = null;
      else for (const bucket of wishes.subscription) subscription?.add(bucket);
    }
    this.host?.realtime(new Map([...tracked].map(([bucket, [meta]]) => [bucket, meta])), subscription && [...subscription]);
    this.host?.openByTabs([...open].sort());
  }

  /** Leader: drop the wishes of tab `tab` once its tab is gone. */
  private watch(tab: string): void {
    if (this.wishes.has(tab)) return;
    this.wishes.set(tab, { tracked: [], subscription: [], open: [] });
    this.locks
      .request(`${this.name} tab ${tab}`, { signal: this.stop.signal }, async () => {
        if (this.wishes.delete(tab) && this.leading) this.applyWishes();
      })
      .catch(() => undefined);
  }

  presenceState(bucket: string): PresenceState {
    return structuredClone(this.presence.get(bucket) ?? {});
  }

  onPresence(listener: (event: PresenceEvent) => void): () => void {
    this.presenceListeners.add(listener);
    return () => this.presenceListeners.delete(listener);
  }

  private forgetPresence(): void {
    for (const [bucket, state] of [...this.presence]) {
      this.presence.delete(bucket);
      const event = { bucket, state: {}, joins: {}, leaves: state };
      for (const listener of this.presenceListeners) listener(event);
    }
  }

  // --- Follower ------------------------------------------------------------------------------

  /** A leader announced itself: follow it, from what the store holds now. */
  private async follow(message: Extract<Message, { type: "leader" }>): Promise<void> {
    if (this.leader && this.leader.epoch >= message.epoch) return;
    const first = this.leader === undefined;
    this.leader = { id: message.leader, epoch: message.epoch };
    if (first && !this.host) {
      // Creating the client: it reads the store next; writes of this leader wait for it.
      this.held = this.held?.filter((m) => "leader" in m && m.leader === message.leader);
      this.elected();
      return;
    }
    if (!this.host) {
      // Creating the client: the state it asked the old leader for comes from this one.
      this.resend((request) => request.op === "state");
      return;
    }
    this.forgetPresence();
    // The old leader may have written what no message said.
    this.held = [];
    const stored = await this.stateOfLeader();
    if (this.closed || this.leading || this.leader.id !== message.leader) return;
    if (stored) this.reloaded(stored);
    const held = this.held;
    this.held = undefined;
    for (const m of held) await this.receive(m);
    for (const [id, waiting] of [...this.waiting]) {
      if (waiting.numbered === undefined) continue;
      // Queued by the old leader, which could not reply: not sent again.
      this.waiting.delete(id);
      waiting.resolve({ mutationId: waiting.numbered });
    }
    this.resend((request) => request.op !== "state");
    this.sendWishes();
  }

  /** Send the waiting requests `which` picks to the leader again. */
  private resend(which: (request: Request) => boolean): void {
    for (const [id, waiting] of this.waiting) {
      if (which(waiting.request)) this.post({ type: "request", from: this.tab, id, request: waiting.request });
    }
  }

  /** The replica is what the store holds, with this tab's mutations no leader queued. */
  private reloaded(stored: StoredState): void {
    for (const entry of [...stored.outbox, ...stored.quarantine]) this.numbered(entry.clientMutationId, entry.mutationId);
    const host = this.host!;
    host.replica.replaceWith(stored, this.local);
    void host.persist();
    host.heldChanged();
  }

  /** A leader's write or the store numbered this tab's mutation `clientMutationId`. */
  private numbered(clientMutationId: string, mutationId: number): void {
    if (!this.local.delete(clientMutationId)) return;
    for (const waiting of this.waiting.values()) {
      if (waiting.request.op === "mutate" && waiting.request.clientMutationId === clientMutationId) waiting.numbered = mutationId;
    }
  }

  /** Ask the leader for `request`; the answer comes once it is done (and durable). */
  ask(request: Request): Promise<unknown> {
    if (this.closed) return Promise.reject(new ClosedError());
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { request, resolve, reject });
      if (request.op === "mutate") this.local.add(request.clientMutationId);
      // The state is asked for while writes are held: they wait for it.
      if (this.leader && (!this.held || request.op === "state")) this.post({ type: "request", from: this.tab, id, request });
    });
  }

  private replied(message: Extract<Message, { type: "reply" }>): void {
    if (message.to !== this.tab) return;
    const waiting = this.waiting.get(message.id);
    if (!waiting) return;
    this.waiting.delete(message.id);
    if (waiting.request.op === "mutate") this.local.delete(waiting.request.clientMutationId);
    // The state answers for the writes sent before it.
    if (waiting.request.op === "state") this.held = this.held?.filter((m) => m.type !== "write");
    if (message.error) waiting.reject(revive(message.error));
    else waiting.resolve(message.value);
  }

  /**
   * A mutation this tab made: queued by the leader. Resolves with its number once it is durable;
   * a mutation the leader refuses leaves the outbox and rejects.
   */
  async forward(queued: Queued, name: string, args: unknown): Promise<Queued> {
    const host = this.host!;
    const entry = host.replica.outboxEntry(queued.clientMutationId)!;
    const request: Request = { op: "mutate", name, args, clientMutationId: entry.clientMutationId, hlc: entry.hlc, createdAt: entry.createdAt };
    try {
      const value = (await this.ask(request)) as { mutationId: number; result?: unknown; restamped?: boolean };
      return { mutationId: value.mutationId, clientMutationId: queued.clientMutationId, result: value.restamped ? value.result : queued.result };
    } catch (error) {
      if (!(error instanceof ClosedError)) {
        host.replica.dropLocal(queued.clientMutationId);
        void host.persist();
      }
      throw error;
    }
  }

  // --- Leader --------------------------------------------------------------------------------

  /** This tab was granted the lock while following: it leads from what the store holds. */
  private async takeLead(): Promise<void> {
    this.held = [];
    const stored = await this.loadStore();
    if (this.closed) return;
    this.held = undefined;
    const host = this.host!;
    this.forgetPresence();
    // What the old leader was doing is not what this tab is doing.
    host.statusBoard.setStatus({ connected: false, longPoll: false, syncing: false, storeError: null, storing: false, retry: null });
    // Own mutations go into the outbox again below, numbered by this tab.
    if (stored) host.replica.replaceWith(stored, new Set());
    this.leading = true;
    const own = [...this.waiting];
    this.waiting.clear();
    this.local.clear();
    await this.startLeading(stored);
    for (const [, waiting] of own) {
      if (waiting.numbered !== undefined) waiting.resolve({ mutationId: waiting.numbered });
      else this.run(waiting.request).then(waiting.resolve, waiting.reject);
    }
  }

  /**
   * Granted the lock while the client is being made: a state asked of the old leader comes from
   * the store instead.
   */
  private leadBeforeAttach(): void {
    this.leading = true;
    for (const [id, waiting] of [...this.waiting]) {
      if (waiting.request.op !== "state") continue;
      this.waiting.delete(id);
      this.loadStore().then(waiting.resolve, waiting.reject);
    }
  }

  private async startLeading(stored: StoredState | undefined): Promise<void> {
    this.epoch = Math.max(Date.now(), (this.leader?.epoch ?? 0) + 1);
    for (const entry of [...(stored?.outbox ?? []), ...(stored?.quarantine ?? [])]) this.known.set(entry.clientMutationId, entry.mutationId);
    const host = this.host!;
    await host.persist();
    host.heldChanged();
    host.lead();
    this.applyWishes();
    this.announce();
  }

  private announce(): void {
    this.post({ type: "leader", leader: this.tab, epoch: this.epoch });
    this.postStatus(this.host!.statusBoard.now);
    for (const [bucket, state] of this.presence) {
      this.post({ type: "presence", leader: this.tab, event: { bucket, state, joins: state, leaves: {} } });
    }
  }

  private postStatus(status: Status): void {
    const fields: Partial<Status> = {};
    for (const field of LEADERS_FIELDS) (fields as Record<string, unknown>)[field] = status[field];
    this.post({ type: "status", leader: this.tab, status: fields });
  }

  /**
   * Leader: `write` is in the store; every other tab applies it. Before `attach` there is no
   * other tab to tell: they read the store once this one announces itself.
   */
  published(write: StoreWrite, rebased: boolean): void {
    if (!this.leading) return;
    if (this.durable || write.meta) this.durable = withWrite(this.durable, structuredClone(write));
    if (this.host) this.post({ type: "write", leader: this.tab, write, rebased, clock: this.host!.replica.clock.last });
  }

  private async serve(message: Message): Promise<void> {
    switch (message.type) {
      case "hello":
        this.watch(message.from);
        this.announce();
        return;
      case "wishes":
        this.watch(message.from);
        this.wishes.set(message.from, message.wishes);
        this.applyWishes();
        return;
      case "bye":
        if (this.wishes.delete(message.from)) this.applyWishes();
        return;
      case "request": {
        this.watch(message.from);
        if (message.request.op === "state") {
          // Sent at once, after every write already sent and before any later one.
          this.post({ type: "reply", to: message.from, id: message.id, value: this.durable });
          return;
        }
        let reply: Message;
        try {
          reply = { type: "reply", to: message.from, id: message.id, value: await this.run(message.request) };
        } catch (error) {
          reply = { type: "reply", to: message.from, id: message.id, error: sent(error) };
        }
        this.post(reply);
        return;
      }
      default:
        return;
    }
  }

  /** Leader: do what a tab asked, for it. */
  private async run(request: Request): Promise<unknown> {
    const host = this.host!;
    switch (request.op) {
      case "mutate": {
        const known = this.known.get(request.clientMutationId);
        if (known !== undefined) {
          await host.persist();
          return { mutationId: known };
        }
        const made = { clientMutationId: request.clientMutationId, hlc: request.hlc };
        const queued = host.replica.mutate(request.name, request.args, request.createdAt, made);
        this.known.set(request.clientMutationId, queued.mutationId);
        const restamped = host.replica.outboxEntry(request.clientMutationId)?.hlc !== request.hlc;
        await host.persist();
        host.wakePush();
        return { mutationId: queued.mutationId, ...(restamped ? { restamped, result: cloneable(queued.result) } : {}) };
      }
      case "pull":
        return host.pull();
      case "push":
        return host.push();
      case "sync":
        return host.sync();
      case "retry": {
        const queued = await host.retryQuarantined(request.clientMutationId);
        return queued && { ...queued, result: cloneable(queued.result) };
      }
      case "discard":
        return host.discardQuarantined(request.clientMutationId);
      case "state":
        return structuredClone(this.durable);
    }
  }
}

/** `value` if it can cross to another tab, else `undefined`. */
function cloneable(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    return undefined;
  }
}

/** `error` as it can cross to another tab. */
function sent(error: unknown): SentError {
  if (error instanceof ServerError) {
    return { name: error.name, message: error.message, status: error.status, problem: error.problem, retryAfterMs: error.retryAfterMs };
  }
  const { name, message } = error instanceof Error ? error : new Error(String(error));
  return { name, message };
}

/** The error another tab's leader raised, as the client's own error class where it has one. */
function revive(error: SentError): Error {
  let revived: Error;
  if (error.name === "ServerError" && error.problem) revived = new ServerError(error.status ?? 0, error.problem, error.retryAfterMs);
  else if (error.name === "ForbiddenError") revived = new ForbiddenError(error.message.replace(/^forbidden: /, ""));
  else if (error.name === "UnknownMutatorError") revived = new UnknownMutatorError(/`(.*)`/.exec(error.message)?.[1] ?? "");
  else {
    revived = new Error(error.message);
    revived.name = error.name;
  }
  return revived;
}
