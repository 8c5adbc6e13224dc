/**
 * The notes web app in headless Chromium (Debian's `chromium`, driven by `playwright-core`),
 * served by a real notes server: two users in two browser contexts; one goes offline (the
 * browser's offline switch, and its link to the server cut), writes, reloads the page (the app
 * opens from the service worker's cache, the queued writes from IndexedDB), comes back online;
 * the other sees the notes appear without a reload; a write the server refuses (its writer made a
 * viewer while offline) shows in the quarantine list. A viewer's controls are disabled with a hint,
 * as `canWrite` says, and enable when a pull brings the new role; a write the client refuses
 * locally shows an alert; axe-core finds nothing to fix on the viewer's page. Screenshots go to
 * `target/test-artifacts` (or `ENGINE_SCREENSHOTS`).
 */

import { join } from "node:path";

import type { Page } from "playwright-core";
import { describe, expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";
import {
  artifacts,
  axeViolations,
  controlled,
  noteTitles,
  screenshots,
  signedIn as signedInAt,
  stored,
  submit,
  useBrowser,
  waiting,
  shareAccepted,
} from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();
const signedIn = (user: string, url?: string) => signedInAt(browser(), notes(), user, url);

/** Whether each of the note controls of `page` (adding, done, delete) is disabled. */
async function noteControls(page: Page): Promise<{ add: boolean; done: boolean; remove: boolean }> {
  const note = page.getByTestId("note").first();
  return {
    add: await page.getByTestId("new-note").locator("button[type=submit]").isDisabled(),
    done: await note.getByLabel("done").isDisabled(),
    remove: await note.getByLabel("delete").isDisabled(),
  };
}
const ENABLED = { add: false, done: false, remove: false };
const DISABLED = { add: true, done: true, remove: true };

describe("the notes web app", () => {
  test("offline writes survive a reload and reach another user's open page", { timeout: 180_000 }, async () => {
    const link = await Link.open(notes().port);
    const alice = await signedIn("alice", link.url);
    // The service worker controls the page before it can open it offline.
    await controlled(alice.page);
    await submit(alice.page, "new-list", { title: "Trip" });
    await alice.page.locator("[data-testid=list].selected", { hasText: "Trip" }).waitFor();
    await shareAccepted(notes(), alice.page, "bob", "editor");
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
    await stored(alice.page);
    await alice.page.reload();
    await alice.page.locator("[data-testid=list]", { hasText: "Trip" }).click();
    await expect.poll(() => noteTitles(alice.page)).toEqual(["Passport", "Tickets"]);
    await expect.poll(() => waiting(alice.page)).toBe("3 waiting");
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
    await shareAccepted(notes(), owner.page, "vera", "editor");
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
      expect.stringContaining("Your note “Not mine to add” was not added: you can only view “Rules”"),
    ]);
    expect(await noteTitles(viewer.page), "the refused note is gone from the list").toEqual([]);
    await viewer.page.screenshot({ path: join(artifacts, "notes-web-quarantine.png") });
    await Promise.all([owner.context.close(), viewer.context.close(), link.close()]);
  });

  test("a viewer's controls are read-only until a pull makes her an editor", { timeout: 180_000 }, async () => {
    const owner = await signedIn("oscar");
    await submit(owner.page, "new-list", { title: "Picnic" });
    await owner.page.locator("[data-testid=list].selected", { hasText: "Picnic" }).waitFor();
    await submit(owner.page, "new-note", { title: "Blanket" });
    await shareAccepted(notes(), owner.page, "vic", "viewer");
    await shareAccepted(notes(), owner.page, "ed", "editor");
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    expect(await noteControls(owner.page)).toEqual(ENABLED);
    expect(await owner.page.getByTestId("share").locator("button").isDisabled()).toBe(false);

    // The editor changes notes; sharing is the owner's.
    const editor = await signedIn("ed");
    await editor.page.locator("[data-testid=list]", { hasText: "Picnic" }).click();
    await expect.poll(() => editor.page.getByTestId("member").allTextContents()).toContain("ed (editor)");
    await expect.poll(() => noteControls(editor.page)).toEqual(ENABLED);
    expect(await editor.page.getByTestId("view-only").isVisible()).toBe(false);
    expect(await editor.page.getByTestId("share").locator("button").isDisabled()).toBe(true);
    expect(await editor.page.getByTestId("owner-only").textContent()).toBe("Only the list's owner can share it.");
    await editor.page.getByTestId("note").getByLabel("done").check();
    await expect.poll(() => waiting(editor.page)).toBe("0 waiting");
    await screenshots(editor.page, "editor");

    // The viewer sees every control disabled, and a hint saying why, tied to each control.
    const viewer = await signedIn("vic");
    await viewer.page.locator("[data-testid=list]", { hasText: "Picnic" }).click();
    await expect.poll(() => viewer.page.getByTestId("member").allTextContents()).toContain("vic (viewer)");
    await expect.poll(() => noteControls(viewer.page)).toEqual(DISABLED);
    expect(await viewer.page.getByTestId("new-note").locator("[name=title]").isDisabled()).toBe(true);
    expect(await viewer.page.getByTestId("share").locator("button").isDisabled()).toBe(true);
    const hint = viewer.page.getByTestId("view-only");
    expect(await hint.isVisible()).toBe(true);
    expect(await hint.textContent()).toContain("You can view this list");
    expect(await viewer.page.getByTestId("note").getByLabel("done").getAttribute("aria-describedby")).toBe(
      await hint.getAttribute("id"),
    );
    await expect.poll(() => viewer.page.getByTestId("note").getByLabel("done").isChecked()).toBe(true);
    await screenshots(viewer.page, "viewer-disabled");
    expect(await axeViolations(viewer.page), "axe-core on the viewer's page").toEqual([]);

    // A write the client refuses locally (the form forced open) is announced, not dropped silently.
    await viewer.page.getByTestId("new-note").evaluate((form) => {
      (form as HTMLElement).hidden = false;
      for (const control of form.querySelectorAll("input, button")) control.removeAttribute("disabled");
    });
    await submit(viewer.page, "new-note", { title: "Not mine to add" });
    const alert = viewer.page.getByTestId("refusal");
    await expect.poll(() => alert.textContent()).toContain("Not saved: you can only view “Picnic”.");
    expect(await noteTitles(viewer.page)).toEqual(["Blanket"]);
    expect(await waiting(viewer.page), "nothing was queued").toBe("0 waiting");
    expect(await viewer.page.getByTestId("new-note").locator("[name=title]").inputValue(), "the title is kept").toBe(
      "Not mine to add",
    );
    await screenshots(viewer.page, "viewer-refused");
    expect(await axeViolations(viewer.page), "axe-core with the alert shown").toEqual([]);
    await alert.getByRole("button", { name: "Dismiss" }).click();
    expect(await alert.textContent()).toBe("");

    // The owner makes her an editor: the pull that brings the role enables her controls.
    await submit(owner.page, "share", { user: "vic", role: "editor" });
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    await expect.poll(() => viewer.page.getByTestId("member").allTextContents(), { timeout: 20_000 }).toContain(
      "vic (editor)",
    );
    await expect.poll(() => noteControls(viewer.page)).toEqual(ENABLED);
    expect(await viewer.page.getByTestId("new-note").locator("[name=title]").isDisabled()).toBe(false);
    expect(await hint.isVisible()).toBe(false);
    expect(await viewer.page.getByTestId("note").getByLabel("done").getAttribute("aria-describedby")).toBe(null);
    await submit(viewer.page, "new-note", { title: "Lemonade" });
    await expect.poll(() => waiting(viewer.page), { timeout: 20_000 }).toBe("0 waiting");
    await expect.poll(() => noteTitles(owner.page), { timeout: 20_000 }).toEqual(["Blanket", "Lemonade"]);
    await Promise.all([owner.context.close(), editor.context.close(), viewer.context.close()]);
  });
});
