/**
 * A small HTTP proxy in front of a real server, for what a server cannot be asked to do on
 * cue: answer `429` or `503` with `Retry-After`, lose a response after the server acted on its
 * request, or report a pull's `syncedMutationId` lagging as a long transaction would make it;
 * or refuse every WebSocket upgrade with `403`, as some corporate proxies do (`refuseUpgrades`).
 * Everything it does not intercept reaches the server unchanged.
 */

import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";

/** What to do with one request. */
export type Plan =
  | { forward: true; rewrite?: (body: Record<string, unknown>) => Record<string, unknown>; loseResponse?: boolean }
  | { status: number; headers?: Record<string, string>; body: string };

/** A request the proxy saw. */
export interface Seen {
  path: string;
  body: unknown;
  /** What the proxy answered. */
  status: number;
}

/** How a proxy starts. */
export interface ProxyOptions {
  /** Answer every WebSocket upgrade `403`; plain HTTP still passes. */
  refuseUpgrades?: boolean;
}

export class Proxy {
  readonly seen: Seen[] = [];
  /** Upgrades refused so far. */
  refusedUpgrades = 0;
  private planner: (path: string, body: unknown) => Plan = () => ({ forward: true });

  private constructor(
    private readonly server: Server,
    private readonly target: string,
  ) {}

  static async start(target: string, options: ProxyOptions = {}): Promise<Proxy> {
    let proxy: Proxy | undefined;
    // A client that goes away mid-request (an aborted long-poll) ends its exchange, nothing more.
    const server = createServer((req, res) => void proxy!.handle(req, res).catch(() => res.destroy()));
    if (options.refuseUpgrades) {
      server.on("upgrade", (_req, socket: Duplex) => {
        proxy!.refusedUpgrades += 1;
        // The client may reset the connection once it has read the refusal.
        socket.on("error", () => undefined);
        const body = "WebSocket upgrades are not allowed here";
        socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
      });
    }
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    proxy = new Proxy(server, target);
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Decide each request from now on with `planner`. */
  plan(planner: (path: string, body: unknown) => Plan): void {
    this.planner = planner;
  }

  private async handle(req: IncomingMessage, res: import("node:http").ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    let body: unknown;
    try {
      body = JSON.parse(raw.toString() || "null");
    } catch {
      body = undefined;
    }
    const path = req.url ?? "/";
    const plan = this.planner(path, body);
    if (!("forward" in plan)) {
      this.seen.push({ path, body, status: plan.status });
      res.writeHead(plan.status, plan.headers ?? {}).end(plan.body);
      return;
    }
    const upstream = await forward(this.target, req, raw);
    this.seen.push({ path, body, status: upstream.status });
    if (plan.loseResponse) {
      // The server acted; the client never hears of it.
      res.destroy();
      return;
    }
    let text = upstream.body;
    if (plan.rewrite && upstream.status === 200) text = JSON.stringify(plan.rewrite(JSON.parse(text)));
    res.writeHead(upstream.status, { "content-type": upstream.contentType }).end(text);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function forward(target: string, req: IncomingMessage, body: Buffer): Promise<{ status: number; contentType: string; body: string }> {
  const url = new URL(req.url ?? "/", target);
  return new Promise((resolve, reject) => {
    const upstream = httpRequest(
      url,
      // Bodies are passed on as text: asked for without compression.
      { method: req.method, headers: { ...req.headers, host: url.host, "content-length": String(body.length), "accept-encoding": "identity" } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 502,
            contentType: response.headers["content-type"] ?? "application/json",
            body: Buffer.concat(chunks).toString(),
          }),
        );
        response.on("error", reject);
      },
    );
    upstream.on("error", reject);
    upstream.end(body);
  });
}

/** A problem document as the engine writes one. */
export function problem(status: number, code: string, detail: string): string {
  return JSON.stringify({ type: `urn:engine:problem:${code}`, title: code, status, code, detail });
}
