/**
 * Three tabs of one user in one browser context share one client (`docs/design.md` §9, "One
 * client across tabs"), in headless Chromium against a real notes server: one WebSocket is open
 * to the server (counted by the server, `/engine/stats`, and by the pages' own sockets); each
 * tab's notes are applied once on the server (its count of applied mutations) and show in every
 * tab. Offline, each tab queues notes; the leading tab is closed with them queued; another tab
 * takes the lead and, back online, pushes every queued note once.
 */

import type { BrowserContext, Page, WebSocket } from "playwright-core";
import { describe, expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";
import { newList, noteTitles, openList, signedIn, submit, useBrowser, waiting } from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();

/**
 * The pages' WebSockets open, by page: those that sent a frame (their token, once connected)
 * and have not closed. A socket a tab closes while it is still connecting may report no
 * `close` (at most a `socketerror`), and it never sent a frame: it is not counted.
 */
class Sockets {
  private readonly open = new Map<Page, Set<WebSocket>>();

  watch(page: Page): void {
    const open = new Set<WebSocket>();
    this.open.set(page, open);
    page.on("websocket", (socket) => {
      socket.once("framesent", () => {
        if (!socket.isClosed()) open.add(socket);
      });
      socket.on("close", () => open.delete(socket));
      socket.on("socketerror", () => open.delete(socket));
    });
  }

  /** How many are open, over every page. */
  total(): number {
    return [...this.open.values()].reduce((a, open) => a + open.size, 0);
  }

  /** The one page with a socket open: the leading tab. */
  leader(): Page | undefined {
    const open = [...this.open].filter(([, sockets]) => sockets.size > 0);
    return open.length === 1 ? open[0]![0] : undefined;
  }
}

/** Another tab of `context` at `url`, signed in by the token the first tab stored. */
async function anotherTab(context: BrowserContext, url: string, sockets: Sockets): Promise<Page> {
  const page = await context.newPage();
  sockets.watch(page);
  await page.goto(url);
  await expect.poll(() => page.getByTestId("user").textContent()).toBe("tess");
  return page;
}

const applied = async () => (await notes().stats()).appliedMutations;
const serverSockets = async () => (await notes().stats()).sockets;

describe("tabs", () => {
  test("three tabs share one client, one socket, and hand the lead over with writes queued", { timeout: 240_000 }, async () => {
    const link = await Link.open(notes().port);
    const sockets = new Sockets();
    const { context, page: first } = await signedIn(browser(), notes(), "tess", link.url);
    sockets.watch(first);
    await first.reload();
    await expect.poll(() => first.getByTestId("connection").textContent()).toBe("online");
    const tabs = [first, await anotherTab(context, link.url, sockets), await anotherTab(context, link.url, sockets)];
    for (const page of tabs) await expect.poll(() => page.getByTestId("connection").textContent()).toBe("online");
    // Tabs that start together settle on one leader; a socket a tab opened before it saw the
    // leader closes then (a second client would keep its socket and fail this).
    await expect.poll(() => sockets.total(), { message: "one socket among the pages", timeout: 20_000 }).toBe(1);
    await expect.poll(serverSockets, { message: "one socket on the server", timeout: 20_000 }).toBe(1);

    // Each tab writes; every write is applied once, and shows in every tab.
    const before = await applied();
    await newList(first, "Shared");
    for (const page of tabs.slice(1)) await openList(page, "Shared");
    const titles: string[] = [];
    for (const [i, page] of [...tabs, ...tabs].entries()) {
      const title = `Note ${i + 1}`;
      titles.push(title);
      await submit(page, "new-note", { title });
      await expect.poll(() => noteTitles(page), { message: "the tab's own note shows at once" }).toContain(title);
    }
    for (const page of tabs) {
      await expect.poll(() => noteTitles(page), { timeout: 20_000 }).toEqual([...titles].sort());
      await expect.poll(() => waiting(page), { timeout: 20_000 }).toBe("0 waiting");
    }
    expect(await applied(), "the list and six notes, each once").toBe(before + 7);
    expect(sockets.total()).toBe(1);
    expect(await serverSockets()).toBe(1);

    // Offline, each tab queues a note; the leading tab closes with them queued.
    const leader = sockets.leader();
    expect(leader, "one tab holds the socket").toBeDefined();
    await context.setOffline(true);
    link.cut();
    for (const page of tabs) await expect.poll(() => page.getByTestId("connection").textContent()).toBe("offline");
    const offline: string[] = [];
    for (const [i, page] of tabs.entries()) {
      const title = `Offline ${i + 1}`;
      offline.push(title);
      await submit(page, "new-note", { title });
      await expect.poll(() => noteTitles(page)).toContain(title);
    }
    for (const page of tabs) await expect.poll(() => waiting(page)).toBe("3 waiting");
    const queuedBefore = await applied();
    await leader!.close();
    const rest = tabs.filter((page) => page !== leader);

    // Back online: the tab that took the lead pushes the three notes, once each.
    link.restore();
    await context.setOffline(false);
    for (const page of rest) {
      await expect.poll(() => waiting(page), { timeout: 30_000 }).toBe("0 waiting");
      await expect.poll(() => noteTitles(page), { timeout: 20_000 }).toEqual([...titles, ...offline].sort());
    }
    expect(await applied(), "each queued note applied once").toBe(queuedBefore + 3);
    await expect.poll(() => sockets.total(), { timeout: 20_000 }).toBe(1);
    await expect.poll(serverSockets, { timeout: 20_000 }).toBe(1);
    expect(rest).toContain(sockets.leader());
    await Promise.all([context.close(), link.close()]);
  });
});
