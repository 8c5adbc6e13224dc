/**
 * The notes web app in headless Chromium (Debian's `chromium`, driven by `playwright-core`),
 * served by a real notes server: two users in two browser contexts; one goes offline (the
 * browser's offline switch, and its link to the server cut), writes, reloads the page (the app
 * opens from the service worker's cache, the queued writes from IndexedDB), comes back online;
 * the other sees the notes appear without a reload; a write the server refuses (its writer made a
 * viewer while offline) shows in the quarantine list. Screenshots go to `target/test-artifacts`.
 */

import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

import { repositoryRoot } from "../../notes/test/support/global-setup.js";
import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";

const notes = useNotesServer();
const CHROMIUM = process.env.ENGINE_CHROMIUM ?? "/usr/bin/chromium";
const artifacts = join(repositoryRoot, "target", "test-artifacts");

let browser: Browser;
beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // The machine's network is closed: no background connections of Chromium's own.
    args: [
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});
afterAll(async () => {
  await browser?.close();
});

/** A page of the app signed in as `user`, in a context of its own, reaching the server at `url`. */
async function signedIn(user: string, url = notes().url): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${url}/#token=${notes().token(user)}`);
  await expect.poll(() => page.getByTestId("user").textContent()).toBe(user);
  return { context, page };
}

async function submit(page: Page, form: string, values: Record<string, string>): Promise<void> {
  const element = page.getByTestId(form);
  for (const [name, value] of Object.entries(values)) await element.locator(`[name=${name}]`).fill(value);
  await element.locator("button[type=submit]").click();
}

const waiting = (page: Page) => page.getByTestId("pending").textContent();
const noteTitles = async (page: Page) => (await page.getByTestId("note").locator(".title").allTextContents()).sort();

describe("the notes web app", () => {
  test("offline writes survive a reload and reach another user's open page", { timeout: 180_000 }, async () => {
    mkdirSync(artifacts, { recursive: true });
    const link = await Link.open(notes().port);
    const alice = await signedIn("alice", link.url);
    // The service worker controls the page before it can open it offline.
    await alice.page.evaluate(async () => {
      await navigator.serviceWorker.ready;
      if (!navigator.serviceWorker.controller) {
        await new Promise((resolve) => navigator.serviceWorker.addEventListener("controllerchange", resolve));
      }
    });
    await submit(alice.page, "new-list", { title: "Trip" });
    await alice.page.locator("[data-testid=list].selected", { hasText: "Trip" }).waitFor();
    await submit(alice.page, "share", { user: "bob", role: "editor" });
    await expect.poll(() => waiting(alice.page)).toBe("0 waiting");

    const bob = await signedIn("bob");
    await bob.page.locator("[data-testid=list]", { hasText: "Trip" }).click();
    await expect.poll(() => bob.page.getByTestId("member").allTextContents()).toContain("bob (editor)");

    // Alice goes offline, writes, and reloads the page.
    await alice.context.setOffline(true);
    link.cut();
    await expect.poll(() => alice.page.getByTestId("connection").textContent()).toBe("offline");
    await submit(alice.page, "new-note", { title: "Passport" });
    await submit(alice.page, "new-note", { title: "Tickets" });
    await alice.page.getByTestId("note").filter({ hasText: "Passport" }).getByLabel("done").check();
    await expect.poll(() => noteTitles(alice.page)).toEqual(["Passport", "Tickets"]);
    await expect.poll(() => waiting(alice.page)).toBe("3 waiting");
    await alice.page.reload();
    await alice.page.locator("[data-testid=list]", { hasText: "Trip" }).click();
    await expect.poll(() => noteTitles(alice.page)).toEqual(["Passport", "Tickets"]);
    expect(await waiting(alice.page)).toBe("3 waiting");
    expect(await alice.page.getByTestId("note").filter({ hasText: "Passport" }).getByLabel("done").isChecked()).toBe(
      true,
    );
    expect(await noteTitles(bob.page), "nothing reached bob while alice was offline").toEqual([]);
    await alice.page.screenshot({ path: join(artifacts, "notes-web-offline.png") });

    // Bob is typing when they come: what he typed and his focus survive the render.
    const draft = bob.page.getByTestId("new-note").locator("[name=title]");
    await draft.fill("Half typed");

    // Back online: the writes go out, and bob's open page shows them.
    link.restore();
    await alice.context.setOffline(false);
    await expect.poll(() => waiting(alice.page), { timeout: 20_000 }).toBe("0 waiting");
    await expect.poll(() => alice.page.getByTestId("connection").textContent(), { timeout: 20_000 }).toBe("online");
    await expect.poll(() => noteTitles(bob.page), { timeout: 20_000 }).toEqual(["Passport", "Tickets"]);
    expect(await bob.page.getByTestId("note").filter({ hasText: "Passport" }).getByLabel("done").isChecked()).toBe(
      true,
    );
    expect(await draft.inputValue()).toBe("Half typed");
    expect(await draft.evaluate((input) => input === document.activeElement), "the field keeps the focus").toBe(true);
    await bob.page.screenshot({ path: join(artifacts, "notes-web-bob.png") });
    await Promise.all([alice.context.close(), bob.context.close(), link.close()]);
  });

  test("a write the server refuses shows in the quarantine list", { timeout: 120_000 }, async () => {
    const owner = await signedIn("olga");
    await submit(owner.page, "new-list", { title: "Rules" });
    await owner.page.locator("[data-testid=list].selected", { hasText: "Rules" }).waitFor();
    await submit(owner.page, "share", { user: "vera", role: "editor" });
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");

    const link = await Link.open(notes().port);
    const viewer = await signedIn("vera", link.url);
    await viewer.page.locator("[data-testid=list]", { hasText: "Rules" }).click();
    await expect.poll(() => viewer.page.getByTestId("member").allTextContents()).toContain("vera (editor)");
    // Made a viewer while offline: her client still lets her add a note, the server will not.
    await viewer.context.setOffline(true);
    link.cut();
    await submit(owner.page, "share", { user: "vera", role: "viewer" });
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    await submit(viewer.page, "new-note", { title: "Not mine to add" });
    await expect.poll(() => noteTitles(viewer.page)).toEqual(["Not mine to add"]);

    link.restore();
    await viewer.context.setOffline(false);
    await expect.poll(() => viewer.page.getByTestId("refused").allTextContents(), { timeout: 20_000 }).toEqual([
      expect.stringContaining("add_note refused"),
    ]);
    expect(await noteTitles(viewer.page), "the refused note is gone from the list").toEqual([]);
    await viewer.page.screenshot({ path: join(artifacts, "notes-web-quarantine.png") });
    await Promise.all([owner.context.close(), viewer.context.close(), link.close()]);
  });
});
