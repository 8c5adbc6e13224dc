/**
 * The web app's store in headless Chromium against a real notes server: SQLite in WebAssembly on
 * the origin-private file system, in a worker (`webSqlitePersistence`). Writes made offline
 * survive a reload while still offline, from SQLite and not IndexedDB, and go out once when the
 * page is back online; a store an earlier version left in IndexedDB (made here by the app itself
 * with its worker refused, so that it falls back to IndexedDB) moves into SQLite with its queued
 * writes, which then go out once.
 */

import type { Page } from "playwright-core";
import { describe, expect, test } from "vitest";

import { notesClient } from "../../notes/test/support/clients.js";
import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";
import { controlled, newList, noteTitles, signedIn as signedInAt, stored, submit, useBrowser, waiting } from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();

/** What the page's origin keeps for `user`: SQLite's files on OPFS, and the IndexedDB store's outbox. */
async function kept(page: Page, user: string): Promise<{ sqlite: boolean; indexedDbOutbox: number | null }> {
  return page.evaluate(async (name) => {
    const root = await navigator.storage.getDirectory();
    let sqlite = false;
    try {
      const pools = await root.getDirectoryHandle(".engine-sqlite");
      await pools.getDirectoryHandle(name);
      sqlite = true;
    } catch {
      sqlite = false;
    }
    const names = (await indexedDB.databases()).map((d) => d.name);
    if (!names.includes(name)) return { sqlite, indexedDbOutbox: null };
    const indexedDbOutbox = await new Promise<number>((resolve, reject) => {
      const open = indexedDB.open(name);
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const db = open.result;
        if (!db.objectStoreNames.contains("outbox")) return resolve(0);
        const count = db.transaction("outbox").objectStore("outbox").count();
        count.onsuccess = () => {
          db.close();
          resolve(count.result);
        };
      };
    });
    return { sqlite, indexedDbOutbox };
  }, `engine-notes-${user}`);
}

/** The titles of the notes of the list titled `title`, as a fresh client of `user` pulls them. */
async function serverTitles(user: string, title: string): Promise<string[]> {
  const client = await notesClient(notes(), user);
  await client.pull();
  const list = client.rows("lists").find((l) => l.title === title);
  const titles = client.rows("notes").filter((n) => n.list_id === list?.id).map((n) => n.title);
  await client.close();
  return titles.sort();
}

describe("the web app's store", () => {
  test("writes made offline survive a reload offline, from SQLite, and go out once", { timeout: 180_000 }, async () => {
    const link = await Link.open(notes().port);
    const { context, page } = await signedInAt(browser(), notes(), "ulla", link.url);
    await controlled(page);
    await newList(page, "Offline");
    await expect.poll(() => waiting(page)).toBe("0 waiting");

    await context.setOffline(true);
    link.cut();
    await expect.poll(() => page.getByTestId("connection").textContent()).toBe("offline");
    await submit(page, "new-note", { title: "Umbrella" });
    await submit(page, "new-note", { title: "Boots" });
    await expect.poll(() => waiting(page)).toBe("2 waiting");
    await stored(page);
    await page.reload();
    await page.locator("[data-testid=list]", { hasText: "Offline" }).click();
    await expect.poll(() => noteTitles(page)).toEqual(["Boots", "Umbrella"]);
    await expect.poll(() => waiting(page)).toBe("2 waiting");
    expect(await kept(page, "ulla"), "in SQLite on OPFS, not in IndexedDB").toEqual({ sqlite: true, indexedDbOutbox: 0 });

    link.restore();
    await context.setOffline(false);
    await expect.poll(() => waiting(page), { timeout: 20_000 }).toBe("0 waiting");
    expect(await serverTitles("ulla", "Offline")).toEqual(["Boots", "Umbrella"]);
    await Promise.all([context.close(), link.close()]);
  });

  test("a store left in IndexedDB moves into SQLite with its queued writes", { timeout: 180_000 }, async () => {
    // No service worker: what the page loads goes through the routes below.
    const context = await browser().newContext({ serviceWorkers: "block" });
    const page = await context.newPage();
    // The store's worker refused: the app falls back to IndexedDB, as an earlier version kept it.
    await context.route("**/app-worker.js", (route) => route.abort());
    // Pushes refused: the writes stay queued.
    await context.route("**/sync/push", (route) => route.abort());
    await page.goto(`${notes().url}/#token=${notes().token("vito")}`);
    await expect.poll(() => page.getByTestId("user").textContent()).toBe("vito");
    await newList(page, "Moved");
    await submit(page, "new-note", { title: "Queued in IndexedDB" });
    await expect.poll(() => waiting(page)).toBe("2 waiting");
    await stored(page);
    expect(await kept(page, "vito")).toEqual({ sqlite: false, indexedDbOutbox: 2 });

    // The worker is back: the reload moves the store into SQLite, the writes still queued.
    await context.unroute("**/app-worker.js");
    await page.reload();
    await page.locator("[data-testid=list]", { hasText: "Moved" }).click();
    await expect.poll(() => noteTitles(page)).toEqual(["Queued in IndexedDB"]);
    await expect.poll(() => waiting(page)).toBe("2 waiting");
    expect(await kept(page, "vito")).toEqual({ sqlite: true, indexedDbOutbox: 0 });

    await context.unroute("**/sync/push");
    await expect.poll(() => waiting(page), { timeout: 30_000 }).toBe("0 waiting");
    expect(await serverTitles("vito", "Moved")).toEqual(["Queued in IndexedDB"]);
    // Reloaded once more, nothing is moved again and nothing waits.
    await page.reload();
    await page.locator("[data-testid=list]", { hasText: "Moved" }).click();
    await expect.poll(() => noteTitles(page)).toEqual(["Queued in IndexedDB"]);
    await expect.poll(() => waiting(page)).toBe("0 waiting");
    await context.close();
  });
});
