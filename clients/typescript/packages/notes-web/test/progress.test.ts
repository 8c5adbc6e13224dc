/**
 * The first sync of a large account shows how far it has got: a progress bar beside the status
 * line, filled from the `progress` the server sends with each pull page that has more, and gone
 * once the sync is done. The app syncs only what is open, so the first sync that takes pages is
 * a large list's, opened from its link. Pulls are held back a moment on the way, so the bar stays
 * long enough to be seen and photographed.
 */

import { join } from "node:path";

import { expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { artifacts, seedList, useBrowser } from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();
const LISTS = 2;
const NOTES_PER_LIST = 2_500;

test("a first sync of a large account shows a progress bar until it is done", { timeout: 300_000 }, async () => {
  for (let list = 0; list < LISTS; list++) {
    await seedList(notes(), "rio", `rio-${list}`, `List ${list}`, NOTES_PER_LIST);
  }
  const context = await browser().newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  // Each pull waits a moment on the way: the first sync takes a few seconds.
  await page.route("**/sync/pull", async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 600));
    await route.continue();
  });
  await page.goto(`${notes().url}/?list=rio-0#token=${notes().token("rio")}`);
  const bar = page.getByTestId("sync-progress");
  const shown = async () => {
    if (!(await bar.isVisible())) return null;
    return bar.evaluate((el) => ({ value: (el as HTMLProgressElement).value, max: (el as HTMLProgressElement).max }));
  };
  await expect.poll(async () => {
    const now = await shown();
    return now !== null && now.value > 0 && now.value < now.max;
  }, { timeout: 60_000, interval: 50 }).toBe(true);
  await page.screenshot({ path: join(artifacts, "notes-web-first-sync-progress.png") });
  await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 120_000 }).toMatch(/^Synced at /);
  expect(await bar.isVisible(), "the bar goes once the sync is done").toBe(false);
  await context.close();
});
