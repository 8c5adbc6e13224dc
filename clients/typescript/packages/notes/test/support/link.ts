/**
 * A TCP link to a real server that can be cut, as a network can: while cut, its connections
 * are gone and new ones are refused, HTTP and WebSocket alike. A browser's own offline switch
 * is not enough, because requests a service worker passes on to the network escape it. A link
 * can also stall, as a network that went away without a word: its connections stay open and
 * carry nothing, so each end learns of it only by silence. Chromium's offline switch stops what
 * a page sends on a WebSocket but not the pongs its network stack answers the server's pings
 * with, so only a stalled link shows the server a client that is gone.
 */

import { createServer, connect, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export class Link {
  /** Each open socket and the one it carries to. */
  private readonly sockets = new Map<Socket, Socket>();
  private up = true;
  private stalled = false;

  private constructor(
    private readonly server: Server,
    private readonly port: number,
  ) {}

  /** A link to the server listening on `port` of 127.0.0.1. */
  static async open(port: number): Promise<Link> {
    let link: Link | undefined;
    const server = createServer((socket) => link!.carry(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    link = new Link(server, port);
    return link;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private carry(client: Socket): void {
    if (!this.up) {
      client.destroy();
      return;
    }
    const upstream = connect(this.port, "127.0.0.1");
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.set(from, to);
      from.pipe(to);
      from.on("error", () => to.destroy());
      from.on("close", () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }

  /** Drop every connection and refuse new ones. */
  cut(): void {
    this.up = false;
    for (const socket of this.sockets.keys()) socket.destroy();
  }

  /** Carry nothing on the open connections, keeping them open, and refuse new ones. */
  stall(): void {
    this.up = false;
    this.stalled = true;
    for (const [from, to] of this.sockets) {
      from.unpipe(to);
      from.pause();
    }
  }

  /** Carry connections again. */
  restore(): void {
    this.up = true;
    if (!this.stalled) return;
    this.stalled = false;
    for (const [from, to] of this.sockets) from.pipe(to);
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
