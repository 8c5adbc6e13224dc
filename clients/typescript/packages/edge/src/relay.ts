/**
 * `BucketRelay`: the Durable Object of one bucket. It holds the bucket's client sockets through
 * the hibernation API (`acceptWebSocket`; the object may leave memory while they stay open,
 * each socket's ticket expiry kept in its attachment) and the long-polls waiting on the bucket.
 *
 * A ping (`/ping`, from the Worker's checked publish) goes to every socket whose ticket still
 * holds; a socket whose ticket has expired gets an `unauthenticated` error and a 1008 close
 * instead, so a member whose membership was revoked, and who was refused a fresh ticket, stops
 * hearing the bucket at the first ping after its ticket's expiry. (The local runtime does not
 * deliver a close asked for outside the socket's own handlers: the error frame is what a
 * client acts on, and the socket hears no ping either way.) A client extends its socket
 * with an `auth` frame carrying a fresh ticket. The runtime answers `heartbeat` frames itself,
 * without waking the object.
 *
 * Long-polls hold a position, `<epoch>.<pings seen>`: a poll whose position is behind, or of
 * another epoch (the object left memory meanwhile), is answered at once as pinged.
 *
 * The nonces of the publishes seen are kept in the object's storage until their publish expires,
 * not only in its memory: an object evicted and started again would otherwise take a captured
 * publish replayed before its expiry. They are read once when the object starts, and pruned as
 * pings come and by an alarm when none do.
 */

import { checkTicket } from "./signing.js";
import { runtime, upgraded, type DurableObjectState, type Env, type WorkerWebSocket } from "./workers.js";

/** What a socket keeps across hibernation. */
interface Attachment {
  bucket: string;
  /** Its ticket's expiry, Unix seconds. */
  expires: number;
}

/** The heartbeat frame, which the runtime answers with itself. */
const HEARTBEAT = JSON.stringify({ type: "heartbeat" });

/** The storage key of a seen nonce is this followed by the nonce; its value the publish's expiry (ms). */
const NONCE = "nonce:";
/** The most keys one storage `delete` takes. */
const DELETE_AT_ONCE = 128;

export class BucketRelay {
  /** Set when the object comes into memory: positions of an earlier life are reset. */
  private readonly epoch = crypto.randomUUID().replace(/-/g, "").slice(0, 16);
  private pings = 0;
  private readonly waiters = new Set<() => void>();
  /** Nonces of publishes seen, until their expiry (ms): what the storage holds under `NONCE`. */
  private readonly nonces = new Map<string, number>();

  constructor(
    private readonly state: DurableObjectState,
    private readonly env: Env,
  ) {
    state.setWebSocketAutoResponse(new runtime.WebSocketRequestResponsePair(HEARTBEAT, HEARTBEAT));
    void state.blockConcurrencyWhile(async () => {
      for (const [key, expires] of await state.storage.list<number>({ prefix: NONCE })) {
        this.nonces.set(key.slice(NONCE.length), expires);
      }
    });
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    switch (url.pathname) {
      case "/socket":
        return this.accept(url);
      case "/ping":
        return this.ping((await request.json()) as { bucket: string; nonce: string; expires: number });
      case "/poll":
        return this.poll((await request.json()) as { position?: string; wait: number });
      default:
        return new Response(null, { status: 404 });
    }
  }

  private accept(url: URL): Response {
    const pair = new runtime.WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.state.acceptWebSocket(server);
    const attachment: Attachment = { bucket: url.searchParams.get("bucket") ?? "", expires: Number(url.searchParams.get("expires")) };
    server.serializeAttachment(attachment);
    return upgraded(client);
  }

  private ping({ bucket, nonce, expires }: { bucket: string; nonce: string; expires: number }): Response {
    const now = Date.now();
    this.prune(now);
    if (this.nonces.has(nonce)) return new Response(null, { status: 409 });
    // The first nonce kept arms the alarm that prunes them; until the map is empty again, each
    // alarm arms the next. (The answer leaves once the write is stored: the runtime's output gate.)
    if (this.nonces.size === 0) void this.state.storage.setAlarm(expires);
    this.nonces.set(nonce, expires);
    void this.state.storage.put(NONCE + nonce, expires);
    this.pings += 1;
    const frame = JSON.stringify({ type: "ping", bucket });
    for (const socket of this.state.getWebSockets()) {
      const attachment = socket.deserializeAttachment() as Attachment;
      if (attachment.expires * 1000 <= now) refuse(socket, "the ticket has expired: ask the server for a new one");
      else send(socket, frame);
    }
    for (const wake of this.waiters) wake();
    return new Response(null, { status: 204 });
  }

  /** Forget the nonces whose publish has expired by `now`, in memory and in storage. */
  private prune(now: number): void {
    const expired: string[] = [];
    for (const [seen, until] of this.nonces) {
      if (until > now) continue;
      this.nonces.delete(seen);
      expired.push(NONCE + seen);
    }
    for (let at = 0; at < expired.length; at += DELETE_AT_ONCE) {
      void this.state.storage.delete(expired.slice(at, at + DELETE_AT_ONCE));
    }
  }

  /** Prune the nonces of a bucket that is pinged no more; again at the latest expiry while some remain. */
  async alarm(): Promise<void> {
    this.prune(Date.now());
    let latest = 0;
    for (const until of this.nonces.values()) latest = Math.max(latest, until);
    if (latest > 0) await this.state.storage.setAlarm(latest);
  }

  private position(): string {
    return `${this.epoch}.${this.pings}`;
  }

  private async poll({ position, wait }: { position?: string; wait: number }): Promise<Response> {
    if (position !== this.position()) return Response.json({ position: this.position(), pinged: true });
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, wait * 1000);
      this.waiters.add(done);
    });
    return Response.json({ position: this.position(), pinged: position !== this.position() });
  }

  async webSocketMessage(socket: WorkerWebSocket, message: string | ArrayBuffer): Promise<void> {
    let frame: { type?: unknown; token?: unknown } | undefined;
    try {
      frame = typeof message === "string" ? (JSON.parse(message) as typeof frame) : undefined;
    } catch {
      frame = undefined;
    }
    if (frame?.type !== "auth") return;
    const attachment = socket.deserializeAttachment() as Attachment;
    const checked = await checkTicket(this.env.EDGE_SECRET, attachment.bucket, String(frame.token));
    if ("refused" in checked) {
      refuse(socket, checked.refused);
      return;
    }
    socket.serializeAttachment({ ...attachment, expires: Math.max(attachment.expires, checked.expires) });
  }

  async webSocketClose(socket: WorkerWebSocket, code: number): Promise<void> {
    try {
      socket.close(code === 1005 || code === 1006 ? 1000 : code, "closing");
    } catch {
      // Closed already.
    }
  }
}

function send(socket: WebSocket, frame: string): void {
  try {
    socket.send(frame);
  } catch {
    // A socket closing meanwhile: its close comes to `webSocketClose`.
  }
}

/** Tell `socket` why it is closed, and close it, as the server closes a refused token's stream. */
function refuse(socket: WebSocket, detail: string): void {
  send(socket, JSON.stringify({ type: "error", code: "unauthenticated", detail }));
  try {
    socket.close(1008, "unauthenticated");
  } catch {
    // Closed already.
  }
}
