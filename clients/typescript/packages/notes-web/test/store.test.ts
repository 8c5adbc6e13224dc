/**
 * The web app's store in headless Chromium against a real notes server: SQLite in WebAssembly on
 * the origin-private file system, in a worker (`webSqlitePersistence`). Writes made offline
 * survive a reload while still offline, from SQLite and not IndexedDB, and go out once when the
 * page is back online; a store an earlier version left in IndexedDB (made here by the app itself
 * with its worker refused, so that it falls back to IndexedDB) moves into SQLite with its queued
 * writes, which then go out once. A write the store refuses (the origin's storage quota cut to
 * what it uses, through the DevTools protocol) is said on the status line until one succeeds.
 */

import type { Page } from "playwright-core";
import { describe, expect, test } from "vitest";

import { notesClient } from "../../notes/test/support/clients.js";
import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";
import {
  axeViolations,
  controlled,
  newList,
  noteTitles,
  screenshots,
  signedIn as signedInAt,
  stored,
  submit,
  useBrowser,
  waiting,
} from "./support/browser.js";

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

  test("a write the store refuses is said on the status line until one succeeds", { timeout: 120_000 }, async () => {
    const { context, page } = await signedInAt(browser(), notes(), "wren");
    await newList(page, "Full disk");
    await expect.poll(() => waiting(page)).toBe("0 waiting");
    await stored(page);
    const storeError = page.getByTestId("store-error");
    expect(await storeError.isVisible()).toBe(false);

    // The origin may keep no more than it keeps now: the next write that needs room fails.
    const devtools = await context.newCDPSession(page);
    const origin = new URL(notes().url).origin;
    const { usage } = await page.evaluate(() => navigator.storage.estimate());
    await devtools.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: usage ?? 0 });
    await submit(page, "new-note", { title: "Pack the tent" });
    await expect.poll(() => storeError.textContent(), { timeout: 20_000 }).toMatch(/^Not saved on this device: ./);
    expect(await storeError.isVisible()).toBe(true);
    // The note is queued all the same (it waits until the store holds it too): the line is the
    // only word of the failure.
    expect(await noteTitles(page)).toEqual(["Pack the tent"]);
    expect(await page.getByTestId("refusal").textContent()).toBe("");
    expect(await page.locator("#new-note-title").inputValue(), "the title is not typed back").toBe("");
    await screenshots(page, "store-error");
    expect(await axeViolations(page)).toEqual([]);

    // Room again: the next write succeeds, and the line goes.
    await devtools.send("Storage.overrideQuotaForOrigin", { origin });
    await submit(page, "new-note", { title: "Room again" });
    await expect.poll(() => storeError.isVisible(), { timeout: 20_000 }).toBe(false);
    await expect.poll(() => waiting(page), { timeout: 20_000 }).toBe("0 waiting");
    await stored(page);
    expect(await serverTitles("wren", "Full disk")).toEqual(["Pack the tent", "Room again"]);
    await context.close();
  });
});
