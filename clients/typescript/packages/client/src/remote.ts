/**
 * The server over HTTP: `POST /sync/pull`, `POST /sync/push` and the blob tickets with a fresh
 * token each time, one refresh and retry after a 401, and every answer read as
 * `docs/protocol.md` says: a body of the protocol, a problem document, or a failure that says
 * nothing about the mutations. And the requests of blob tickets, to their signed URLs, which
 * carry no token: the signature is their credential.
 */

import type { AuthProvider } from "./auth.js";
import { NetworkError, ServerError } from "./errors.js";
import {
  isProblem,
  type BlobDownloadRequest,
  type BlobTicket,
  type BlobUploadRequest,
  type PullRequest,
  type PullResponse,
  type PushRequest,
  type PushResponse,
} from "./wire.js";

/** A `fetch` as WHATWG defines it (the global one by default). */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export class Remote {
  readonly base: string;

  constructor(
    baseUrl: string,
    private readonly auth: AuthProvider,
    private readonly fetcher: Fetch,
    private readonly timeoutMs: number,
  ) {
    this.base = baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`;
  }

  /** The URL of `path` (relative, `sync/pull`) on the server. */
  url(path: string): string {
    return new URL(path, this.base).toString();
  }

  pull(request: PullRequest): Promise<PullResponse> {
    return this.post("sync/pull", request);
  }

  push(request: PushRequest): Promise<PushResponse> {
    return this.post("sync/push", request);
  }

  /** A ticket to upload (`blobs/upload`) or download (`blobs/download`) a blob. */
  blobTicket(route: "upload", request: BlobUploadRequest): Promise<BlobTicket>;
  blobTicket(route: "download", request: BlobDownloadRequest): Promise<BlobTicket>;
  blobTicket(route: "upload" | "download", request: BlobUploadRequest | BlobDownloadRequest): Promise<BlobTicket> {
    return this.post(`blobs/${route}`, request);
  }

  /**
   * Send `ticket`'s request: `PUT` with `body`, or `GET`, whose bytes it returns. Its time
   * bound grows with the bytes (the request timeout, and a millisecond per KiB sent), since a
   * large blob on a slow link is no lost request.
   */
  async transfer(ticket: BlobTicket, body?: Uint8Array): Promise<Uint8Array> {
    // Relative to the base URL, prefix included, as `/sync/pull` is.
    const url = ticket.url.startsWith("/") ? this.url(ticket.url.slice(1)) : ticket.url;
    const what = `${ticket.method} of blob ${ticket.key}`;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.timeoutMs + (body?.byteLength ?? 0) / 1024);
    let response: Response;
    let bytes: Uint8Array;
    try {
      response = await this.fetcher(url, {
        method: ticket.method,
        headers: ticket.headers ?? {},
        ...(body === undefined ? {} : { body: body as BodyInit }),
        signal: abort.signal,
      });
      bytes = new Uint8Array(await response.arrayBuffer());
    } catch (err) {
      throw new NetworkError(`${what}: ${describe(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    if (response.ok) return bytes;
    const json = readJson(new TextDecoder().decode(bytes));
    if (!isProblem(json)) throw new NetworkError(`HTTP ${response.status} from the ${what} without a problem document`);
    throw new ServerError(response.status, json, retryAfterMs(response.headers.get("retry-after")));
  }

  private async post<R>(path: string, body: unknown): Promise<R> {
    const text = JSON.stringify(body);
    try {
      return await this.send<R>(path, text);
    } catch (err) {
      if (!(err instanceof ServerError) || err.status !== 401 || !this.auth.refresh) throw err;
      await this.auth.refresh();
      return this.send<R>(path, text);
    }
  }

  private async send<R>(path: string, body: string): Promise<R> {
    const token = await this.auth.token();
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await this.fetcher(this.url(path), {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body,
        signal: abort.signal,
      });
      text = await response.text();
    } catch (err) {
      throw new NetworkError(`${path}: ${describe(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    const json = readJson(text);
    if (response.ok) {
      if (json === undefined) throw new NetworkError(`the server's answer to ${path} is not JSON`);
      return json as R;
    }
    // Not a problem document: a proxy or a load balancer answered, not the engine. Try again
    // later; never conclude anything about the mutations from it.
    if (!isProblem(json)) throw new NetworkError(`HTTP ${response.status} from ${path} without a problem document`);
    throw new ServerError(response.status, json, retryAfterMs(response.headers.get("retry-after")));
  }
}

/** `Retry-After` in milliseconds: whole seconds, or an HTTP date. */
export function retryAfterMs(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The JSON in `text`, or `undefined` when it is none. */
export function readJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** What went wrong, with its cause. */
export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    return `${err.message}${cause}`;
  }
  return String(err);
}
