/**
 * The server over HTTP: `POST /sync/pull` and `POST /sync/push` with a fresh token each time,
 * one refresh and retry after a 401, and every answer read as `docs/protocol.md` says: a body
 * of the protocol, a problem document, or a failure that says nothing about the mutations.
 */

import type { AuthProvider } from "./auth.js";
import { NetworkError, ServerError } from "./errors.js";
import { isProblem, type PullRequest, type PullResponse, type PushRequest, type PushResponse } from "./wire.js";

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
