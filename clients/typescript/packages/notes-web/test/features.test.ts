/**
 * What the notes web app offers beyond issue 33's defects, in headless Chromium against a real
 * notes server: a note's body that two people type in at once; notes and lists renamed in place
 * (Enter saves, Escape cancels); done notes struck through, filtered and cleared, reordered from
 * the keyboard and by touch on a phone; the selected list in the address (Back works, a link
 * opens the list); the owner changing a member's role and removing them, and a member leaving;
 * an honest status line (offline, reconnecting, synced), with notes not yet on the server marked,
 * a body edit included; the `l` and `n` shortcuts; the script and style sent gzipped; and signing
 * out, which says how many writes would be lost before deleting the local copy.
 */

import { describe, expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";
import {
  axeViolations,
  PHONE,
  newList,
  noteTitles,
  openList,
  pushAs,
  screenshots,
  signedIn,
  submit,
  useBrowser,
  waiting,
  shareAccepted,
} from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();
const signIn = (user: string, url?: string) => signedIn(browser(), notes(), user, url);

/**
 * `user` signed in through a link that can be cut, with a new list `list` holding a note `note`,
 * both on the server; `row` is the note's row.
 */
async function throughLink(user: string, list: string, note: string) {
  const link = await Link.open(notes().port);
  const { context, page } = await signIn(user, link.url);
  await newList(page, list);
  await submit(page, "new-note", { title: note });
  await expect.poll(() => waiting(page)).toBe("0 waiting");
  const row = page.locator("[data-testid=note]", { hasText: note });
  expect(await row.getAttribute("class")).not.toContain("unsent");
  return { link, context, page, row };
}

/** The titles of the notes shown, in the order shown. */
const shown = (page: Awaited<ReturnType<typeof signIn>>["page"]) =>
  page.locator("[data-testid=note]:visible .title").allTextContents();

describe("the notes web app's features", () => {
  test("notes are renamed in place, struck through when done, filtered, cleared and reordered", async () => {
    const { context, page } = await signIn("edith");
    await newList(page, "Errands");
    for (const title of ["Bread", "Stamps", "Keys"]) await submit(page, "new-note", { title });
    await expect.poll(() => shown(page)).toEqual(["Bread", "Stamps", "Keys"]);

    // Rename: Escape cancels, Enter saves.
    const bread = page.locator("[data-testid=note]", { hasText: "Bread" });
    await bread.getByRole("button", { name: "Rename Bread" }).click();
    await page.getByTestId("rename").fill("Rye bread");
    await page.getByTestId("rename").press("Escape");
    await expect.poll(() => shown(page)).toEqual(["Bread", "Stamps", "Keys"]);
    await bread.getByRole("button", { name: "Rename Bread" }).click();
    await page.getByTestId("rename").fill("Rye bread");
    await page.getByTestId("rename").press("Enter");
    await expect.poll(() => shown(page)).toEqual(["Rye bread", "Stamps", "Keys"]);
    expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "the focus stays on the note").toBe(
      "Rename Rye bread",
    );

    // Done: struck through, counted, filtered.
    await page.getByRole("checkbox", { name: "Done: Stamps" }).check();
    const stamps = page.locator("[data-testid=note]", { hasText: "Stamps" }).locator(".title");
    await expect.poll(() => stamps.evaluate((title) => getComputedStyle(title).textDecorationLine)).toBe("line-through");
    await expect.poll(() => page.getByTestId("counts").textContent()).toBe("2 to do, 1 done");
    await page.getByTestId("filter-active").click();
    await expect.poll(() => shown(page)).toEqual(["Rye bread", "Keys"]);
    await page.getByTestId("filter-done").click();
    await expect.poll(() => shown(page)).toEqual(["Stamps"]);
    await page.getByTestId("filter-all").click();

    // Reorder from the keyboard: Alt+Up moves the focused note up, and the focus stays on it.
    await page.getByRole("checkbox", { name: "Done: Keys" }).focus();
    await page.keyboard.press("Alt+ArrowUp");
    await expect.poll(() => shown(page)).toEqual(["Rye bread", "Keys", "Stamps"]);
    await page.keyboard.press("Alt+ArrowUp");
    await expect.poll(() => shown(page)).toEqual(["Keys", "Rye bread", "Stamps"]);
    expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Done: Keys");

    // Keyboard: `n` goes to the new-note field; deleting a note moves the focus to the next
    // note's delete, and the deletion is announced.
    await page.locator("body").click({ position: { x: 5, y: 300 } });
    await page.keyboard.press("n");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("new-note-title");
    await submit(page, "new-note", { title: "Spare" });
    await expect.poll(() => shown(page)).toEqual(["Keys", "Rye bread", "Stamps", "Spare"]);
    await page.getByRole("button", { name: "Delete Rye bread" }).click();
    await expect.poll(() => shown(page)).toEqual(["Keys", "Stamps", "Spare"]);
    expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Delete Stamps");
    expect(await page.getByTestId("announce").textContent()).toBe("Deleted “Rye bread”.");

    // Clear done.
    await page.getByTestId("clear-done").click();
    await expect.poll(() => shown(page)).toEqual(["Keys", "Spare"]);
    await expect.poll(() => waiting(page)).toBe("0 waiting");
    // What the server kept is what shows after a reload.
    await page.reload();
    await expect.poll(() => shown(page)).toEqual(["Keys", "Spare"]);
    await screenshots(page, "errands");
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });

  test("two people typing in one note's body converge, live", { timeout: 90_000 }, async () => {
    const alice = await signIn("ava");
    await newList(alice.page, "Plans");
    await submit(alice.page, "new-note", { title: "Trip" });
    await shareAccepted(notes(), alice.page, "bea", "editor");
    await expect.poll(() => waiting(alice.page)).toBe("0 waiting");
    await alice.page.getByRole("link", { name: "Trip" }).click();
    const mine = alice.page.getByTestId("body");
    await mine.fill("Day one");
    await expect.poll(() => waiting(alice.page), { timeout: 20_000 }).toBe("0 waiting");

    // Bob opens the note by its address, as a shared link would.
    const bob = await signIn("bea");
    await bob.page.goto(alice.page.url());
    const theirs = bob.page.getByTestId("body");
    await expect.poll(() => theirs.inputValue(), { timeout: 20_000 }).toBe("Day one");

    // Both type at once: alice at the start, bob at the end.
    await mine.focus();
    await alice.page.keyboard.press("Home");
    await theirs.focus();
    await bob.page.keyboard.press("End");
    await Promise.all([
      alice.page.keyboard.type("Plan: ", { delay: 30 }),
      bob.page.keyboard.type(", then the coast", { delay: 30 }),
    ]);
    const converged = "Plan: Day one, then the coast";
    await expect.poll(() => mine.inputValue(), { timeout: 20_000 }).toBe(converged);
    await expect.poll(() => theirs.inputValue(), { timeout: 20_000 }).toBe(converged);
    // Each caret stayed where its typist left it.
    expect(await mine.evaluate((area) => (area as HTMLTextAreaElement).selectionStart)).toBe("Plan: ".length);
    await screenshots(bob.page, "note-body");
    expect(await axeViolations(bob.page)).toEqual([]);
    await Promise.all([alice.context.close(), bob.context.close()]);
  });

  test("the owner renames a list in place, members see the new name, and no one else may", async () => {
    const owner = await signIn("lena");
    await newList(owner.page, "Garden");
    await shareAccepted(notes(), owner.page, "max", "editor");
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    const member = await signIn("max");
    await openList(member.page, "Garden");
    expect(await member.page.getByTestId("rename-list").isVisible(), "only the owner renames").toBe(false);

    const field = owner.page.getByTestId("list-title-field");
    await owner.page.getByTestId("rename-list").click();
    await field.fill("Plot");
    await field.press("Escape");
    expect(await owner.page.locator("#list-heading .list-title").textContent()).toBe("Garden");
    await owner.page.getByTestId("rename-list").click();
    await field.fill("Allotment");
    await field.press("Enter");
    await expect.poll(() => owner.page.locator("#list-heading .list-title").textContent()).toBe("Allotment");
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    await expect.poll(() => member.page.locator("[data-testid=list].selected").textContent(), { timeout: 20_000 }).toBe(
      "Allotment",
    );

    // Over HTTP, as any client could: the editor's rename is refused.
    const listId = (await owner.page.locator("[data-testid=list].selected").getAttribute("data-list"))!;
    const [refused] = await pushAs(notes(), "max", [{ name: "rename_list", args: { id: listId, title: "Mine now" } }]);
    expect(refused!.status).toBe("rejected");
    await Promise.all([owner.context.close(), member.context.close()]);
  });

  test("the script and the style go gzipped to a browser that takes gzip", async () => {
    for (const asset of ["app.js", "app.css"]) {
      const zipped = await fetch(`${notes().url}/${asset}`, { headers: { "accept-encoding": "gzip" } });
      const plain = await fetch(`${notes().url}/${asset}`, { headers: { "accept-encoding": "identity" } });
      expect(zipped.headers.get("content-encoding"), asset).toBe("gzip");
      expect(plain.headers.get("content-encoding"), asset).toBeNull();
      expect(zipped.headers.get("vary"), asset).toBe("accept-encoding");
      expect(Number(zipped.headers.get("content-length")), asset).toBeLessThan(Number(plain.headers.get("content-length")) / 2);
      expect(await zipped.text(), asset).toBe(await plain.text());
    }
  });

  test("the selected list is in the address: Back goes to the previous one, a link opens it", async () => {
    const { context, page } = await signIn("ida");
    await newList(page, "First");
    await newList(page, "Second");
    expect(new URL(page.url()).searchParams.get("list")).not.toBeNull();
    const second = page.url();
    await openList(page, "First");
    await page.goBack();
    await page.locator("[data-testid=list].selected", { hasText: "Second" }).waitFor();
    expect(await page.locator("#list-heading").textContent()).toContain("Second");
    const tab = await context.newPage();
    await tab.goto(second);
    await tab.locator("#list-heading", { hasText: "Second" }).waitFor();
    expect(await tab.title()).toBe("Second · Notes");
    await context.close();
  });

  test("the owner changes a member's role and removes them, and the member's page follows", async () => {
    const owner = await signIn("olive");
    await newList(owner.page, "Garden");
    await submit(owner.page, "new-note", { title: "Seeds" });
    await shareAccepted(notes(), owner.page, "paul", "editor");
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    const member = await signIn("paul");
    await openList(member.page, "Garden");
    await expect.poll(() => member.page.getByTestId("new-note").isVisible()).toBe(true);
    expect(await member.page.getByRole("combobox", { name: "Role of olive" }).count(), "no role to change for the owner").toBe(0);

    // The role is said once: by the menu where the owner may change it, in words elsewhere.
    expect(await owner.page.getByTestId("member").allTextContents()).toEqual(["olive (owner)", "paul"]);
    expect(await member.page.getByTestId("member").allTextContents()).toEqual(["olive (owner)", "paul (editor)"]);
    const role = owner.page.getByRole("combobox", { name: "Role of paul" });
    expect(await role.inputValue()).toBe("editor");
    await role.selectOption("viewer");
    await expect.poll(() => member.page.getByTestId("member").allTextContents(), { timeout: 20_000 }).toContain(
      "paul (viewer)",
    );
    expect(await role.locator("option:checked").textContent()).toBe("can view");
    await expect.poll(() => member.page.getByTestId("view-only-badge").isVisible(), { timeout: 20_000 }).toBe(true);
    expect(await member.page.getByTestId("new-note").isVisible()).toBe(false);
    expect(await member.page.getByRole("combobox", { name: "Role of paul" }).isVisible(), "only the owner changes roles").toBe(false);

    // Removed, the member loses the list.
    await owner.page.getByRole("button", { name: "Remove paul" }).click();
    await expect.poll(() => owner.page.getByTestId("member").allTextContents()).toEqual(["olive (owner)"]);
    await expect.poll(() => member.page.locator("[data-testid=list]", { hasText: "Garden" }).count(), { timeout: 20_000 }).toBe(0);
    await Promise.all([owner.context.close(), member.context.close()]);
  });

  test("a shared list is an invitation: the invitee accepts one and declines another", async () => {
    const owner = await signIn("uma");
    await newList(owner.page, "Hiking");
    await submit(owner.page, "new-note", { title: "Boots" });
    await submit(owner.page, "share", { user: "vik", role: "editor" });
    await newList(owner.page, "Chores");
    await submit(owner.page, "share", { user: "vik", role: "viewer" });
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    // The owner sees who has not accepted yet.
    await expect.poll(() => owner.page.getByTestId("member").allTextContents()).toContain("vik (invited)");

    // The invitee sees both invitations, and neither list, until it answers.
    const member = await signIn("vik");
    const invitations = member.page.getByTestId("invitation");
    await expect.poll(() => invitations.allTextContents(), { timeout: 20_000 }).toEqual(["Chores from umaAcceptDecline", "Hiking from umaAcceptDecline"]);
    expect(await member.page.locator("[data-testid=list]").count()).toBe(0);
    await screenshots(member.page, "invitations");
    expect(await axeViolations(member.page)).toEqual([]);

    await member.page.getByRole("button", { name: "Accept “Hiking”" }).click();
    await openList(member.page, "Hiking");
    await expect.poll(() => noteTitles(member.page), { timeout: 20_000 }).toEqual(["Boots"]);
    expect(await member.page.getByTestId("announce").textContent()).toBe("You joined “Hiking”.");
    await member.page.getByRole("button", { name: "Decline “Chores”" }).click();
    await expect.poll(() => member.page.getByTestId("invitations").isVisible(), { timeout: 20_000 }).toBe(false);
    expect(await member.page.locator("[data-testid=list]", { hasText: "Chores" }).count()).toBe(0);
    await expect.poll(() => waiting(member.page)).toBe("0 waiting");
    expect(await axeViolations(member.page)).toEqual([]);

    // The owner's member lists follow: an editor of one list, gone from the other.
    await openList(owner.page, "Hiking");
    await expect.poll(() => owner.page.getByTestId("member").allTextContents(), { timeout: 20_000 }).toContain("vik");
    await openList(owner.page, "Chores");
    await expect.poll(() => owner.page.getByTestId("member").allTextContents(), { timeout: 20_000 }).toEqual(["uma (owner)"]);
    await Promise.all([owner.context.close(), member.context.close()]);
  });

  test("a member leaves a list: it leaves their page, and the owner's member list", async () => {
    const owner = await signIn("quinn");
    await newList(owner.page, "Book club");
    await submit(owner.page, "new-note", { title: "Chapter 3" });
    await shareAccepted(notes(), owner.page, "rosa", "viewer");
    await expect.poll(() => waiting(owner.page)).toBe("0 waiting");
    expect(await owner.page.getByTestId("leave-list").isVisible(), "the owner cannot leave their own list").toBe(false);
    const member = await signIn("rosa");
    await openList(member.page, "Book club");
    await expect.poll(() => noteTitles(member.page)).toEqual(["Chapter 3"]);
    const leave = member.page.getByTestId("leave-list");
    expect(await leave.isVisible()).toBe(true);
    expect(await axeViolations(member.page)).toEqual([]);

    // Asked first; staying changes nothing.
    await leave.click();
    expect(await member.page.getByTestId("ask").textContent()).toContain("only quinn can share it with you again");
    await screenshots(member.page, "leave-list");
    expect(await axeViolations(member.page)).toEqual([]);
    await member.page.getByTestId("ask-no").click();
    expect(await member.page.locator("[data-testid=list]", { hasText: "Book club" }).count()).toBe(1);

    await leave.click();
    await member.page.getByTestId("ask-yes").click();
    await expect.poll(() => member.page.locator("[data-testid=list]", { hasText: "Book club" }).count(), { timeout: 20_000 }).toBe(0);
    await expect.poll(() => member.page.getByTestId("announce").textContent()).toBe("You left “Book club”.");
    await expect.poll(() => owner.page.getByTestId("member").allTextContents(), { timeout: 20_000 }).toEqual([
      "quinn (owner)",
    ]);
    await expect.poll(() => waiting(member.page)).toBe("0 waiting");
    await member.page.reload();
    await expect.poll(() => member.page.getByTestId("user").textContent()).toBe("rosa");
    expect(await member.page.locator("[data-testid=list]", { hasText: "Book club" }).count()).toBe(0);
    await Promise.all([owner.context.close(), member.context.close()]);
  });

  test("on a phone, notes are reordered by touch with move buttons of 44 px", async () => {
    const context = await browser().newContext({ viewport: PHONE, hasTouch: true, isMobile: true });
    const page = await context.newPage();
    await page.goto(`${notes().url}/#token=${notes().token("tess")}`);
    await expect.poll(() => page.getByTestId("user").textContent()).toBe("tess");
    await newList(page, "Packing");
    for (const title of ["Tent", "Stove", "Map"]) await submit(page, "new-note", { title });
    await expect.poll(() => shown(page)).toEqual(["Tent", "Stove", "Map"]);
    expect(await page.getByTestId("move-up").first().isVisible(), "no move buttons until asked").toBe(false);

    await page.getByTestId("reorder").tap();
    const up = page.getByRole("button", { name: "Move Map up" });
    for (const control of [up, page.getByRole("button", { name: "Move Tent down" })]) {
      const box = (await control.boundingBox())!;
      expect(box.width).toBeGreaterThanOrEqual(44);
      expect(box.height).toBeGreaterThanOrEqual(44);
    }
    expect(await page.getByRole("button", { name: "Move Tent up" }).isVisible(), "the first note goes no higher").toBe(false);
    await up.tap();
    await expect.poll(() => shown(page)).toEqual(["Tent", "Map", "Stove"]);
    await up.tap();
    await expect.poll(() => shown(page)).toEqual(["Map", "Tent", "Stove"]);
    expect(await page.getByTestId("announce").textContent()).toBe("Moved “Map” up.");
    await page.getByRole("button", { name: "Move Tent down" }).tap();
    await expect.poll(() => shown(page)).toEqual(["Map", "Stove", "Tent"]);
    // At the end, its down button is gone, and the focus is on the way back up.
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Move Tent up");
    expect(await page.evaluate(() => document.documentElement.scrollWidth), "nothing off-screen").toBeLessThanOrEqual(PHONE.width);
    await screenshots(page, "reorder");
    expect(await axeViolations(page)).toEqual([]);

    await page.getByTestId("reorder").tap();
    expect(await page.getByRole("button", { name: "Delete Map" }).isVisible()).toBe(true);
    await expect.poll(() => waiting(page)).toBe("0 waiting");
    await page.reload();
    await expect.poll(() => shown(page)).toEqual(["Map", "Stove", "Tent"]);
    await context.close();
  });

  test("the status line says offline, waiting, synced; sign-out says what would be lost", { timeout: 90_000 }, async () => {
    const { link, context, page, row: sent } = await throughLink("sue", "Status", "Posted");
    const status = page.getByTestId("status");
    await expect.poll(() => status.textContent()).toMatch(/^Synced at \d/);

    await context.setOffline(true);
    link.cut();
    await expect.poll(() => status.textContent()).toBe("Offline: changes are kept on this device");
    await submit(page, "new-note", { title: "Unsent" });
    await expect.poll(() => waiting(page)).toBe("1 waiting");
    expect(await page.getByTestId("pending").getAttribute("class")).toContain("some");
    // The note that has not reached the server is marked.
    const unsent = page.locator("[data-testid=note]", { hasText: "Unsent" });
    await expect.poll(() => unsent.getAttribute("class")).toContain("unsent");
    // So is a change to a note the server has.
    await page.getByRole("checkbox", { name: "Done: Posted" }).check();
    await expect.poll(() => sent.getAttribute("class")).toContain("unsent");
    await expect.poll(() => waiting(page)).toBe("2 waiting");
    await screenshots(page, "offline");

    // Signing out with a write that never reached the server asks first; staying keeps it.
    await page.getByTestId("sign-out").click();
    const ask = page.getByTestId("ask");
    await expect.poll(() => ask.textContent()).toContain("2 changes have not reached the server yet");
    await page.getByTestId("ask-no").click();
    await expect.poll(() => waiting(page)).toBe("2 waiting");
    expect(await page.getByTestId("user").textContent()).toBe("sue");

    // Back online it goes out, and the status says when it synced.
    link.restore();
    await context.setOffline(false);
    await expect.poll(() => waiting(page), { timeout: 20_000 }).toBe("0 waiting");
    await expect.poll(() => status.textContent(), { timeout: 20_000 }).toMatch(/^Synced at \d/);
    await expect.poll(() => unsent.getAttribute("class")).not.toContain("unsent");
    await expect.poll(() => sent.getAttribute("class")).not.toContain("unsent");

    // Signed out, the local copy is gone.
    await page.getByTestId("sign-out").click();
    await page.getByTestId("sign-in").waitFor();
    const databases = await page.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
    expect(databases).not.toContain("engine-notes-sue");
    expect(await page.evaluate(() => localStorage.getItem("engine-notes-token"))).toBeNull();
    expect(await noteTitles(page)).toEqual([]);
    await Promise.all([context.close(), link.close()]);
  });

  test("the status line says reconnecting while the server is out of reach, and recovers", { timeout: 60_000 }, async () => {
    const { link, context, page } = await throughLink("rex", "Errands", "Post office");
    const status = page.getByTestId("status");
    await expect.poll(() => status.textContent()).toMatch(/^Synced at \d/);

    // The network is up (`navigator.onLine`) but the server cannot be reached: not "offline".
    link.cut();
    await expect.poll(() => status.textContent(), { timeout: 20_000 }).toBe("Reconnecting…");
    expect(await status.getAttribute("data-state")).toBe("reconnecting");
    expect(await page.getByTestId("connection").textContent()).toBe("reconnecting");
    await screenshots(page, "reconnecting");
    expect(await axeViolations(page)).toEqual([]);

    // What is written meanwhile waits, and goes out once the server is back.
    await submit(page, "new-note", { title: "Bank" });
    await expect.poll(() => waiting(page)).toBe("1 waiting");
    link.restore();
    await expect.poll(() => status.textContent(), { timeout: 40_000 }).toMatch(/^Synced at \d/);
    await expect.poll(() => waiting(page)).toBe("0 waiting");
    await expect.poll(() => page.getByTestId("connection").textContent(), { timeout: 20_000 }).toBe("online");
    await Promise.all([context.close(), link.close()]);
  });

  test("a note whose body edit has not reached the server is marked pending", { timeout: 60_000 }, async () => {
    const { link, context, page, row: note } = await throughLink("bo", "Pending", "Recipe");

    await context.setOffline(true);
    link.cut();
    await page.getByRole("link", { name: "Recipe" }).click();
    await page.getByTestId("body").fill("Flour, water, salt");
    await expect.poll(() => waiting(page)).toBe("1 waiting");
    await expect.poll(() => note.getAttribute("class")).toContain("unsent");
    await screenshots(page, "body-pending");
    expect(await axeViolations(page)).toEqual([]);

    link.restore();
    await context.setOffline(false);
    await expect.poll(() => waiting(page), { timeout: 20_000 }).toBe("0 waiting");
    await expect.poll(() => note.getAttribute("class")).not.toContain("unsent");
    expect(await page.getByTestId("body").inputValue()).toBe("Flour, water, salt");
    await Promise.all([context.close(), link.close()]);
  });

  test("`l` goes to the new-list field and `n` to the new-note field, but not from a field", async () => {
    const { context, page } = await signIn("kit");
    /** The `data-testid` of the form holding the focus. */
    const focusedForm = () => page.evaluate(() => document.activeElement?.closest("form")?.getAttribute("data-testid") ?? null);
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.keyboard.press("l");
    expect(await focusedForm()).toBe("new-list");
    // In the field the key is typed, not taken as a shortcut.
    await page.keyboard.type("Tools");
    expect(await page.getByTestId("new-list").locator("input").inputValue()).toBe("Tools");
    await page.keyboard.press("Enter");
    await page.locator("[data-testid=list].selected", { hasText: "Tools" }).waitFor();

    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.keyboard.press("n");
    expect(await focusedForm()).toBe("new-note");
    await page.keyboard.type("Hammer");
    await page.keyboard.press("Enter");
    await expect.poll(() => noteTitles(page)).toEqual(["Hammer"]);
    // `l` from the note field types an `l`.
    await page.keyboard.type("l");
    expect(await page.getByTestId("new-note").locator("input").inputValue()).toBe("l");
    expect(await focusedForm()).toBe("new-note");
    await context.close();
  });
});
