/**
 * The web app syncs only what is open (`docs/design.md` §3, "Sync what is open"), in headless
 * Chromium against a real notes server: a user with several lists, one of them shared with them,
 * sees every list in the sidebar from the index (`own`, `memberships`, `invitations`), and the
 * pulls the page sends ask for the selected list's bucket and no other list's. A note another
 * member adds to a list that is not selected reaches none of the page's pulls; selecting the list
 * brings it.
 */

import type { Page } from "playwright-core";
import { describe, expect, test } from "vitest";

import { buckets } from "../../notes/src/contract.gen.js";
import { accept } from "../../notes/test/support/clients.js";
import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { noteTitles, openList, pushAs, seedList, submit, useBrowser, waiting } from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();

/** What a pull request names: the always-synced rules and the buckets open. */
interface PullAsked {
  rules?: string[];
  open?: string[];
}

/** The pull requests `page` sends and the text of their answers, from the time it is watched. */
function watchPulls(page: Page): { asked: PullAsked[]; answers: string[] } {
  const watched = { asked: [] as PullAsked[], answers: [] as string[] };
  page.on("request", (request) => {
    if (new URL(request.url()).pathname === "/sync/pull") watched.asked.push(request.postDataJSON() as PullAsked);
  });
  page.on("response", (response) => {
    if (new URL(response.url()).pathname !== "/sync/pull") return;
    response.text().then(
      (text) => watched.answers.push(text),
      () => undefined,
    );
  });
  return watched;
}

const sidebar = (page: Page) => page.getByTestId("list").allTextContents();

describe("sync what is open", () => {
  test("the page pulls the selected list's bucket and the index, and another list once it is selected", { timeout: 120_000 }, async () => {
    await seedList(notes(), "nadia", "nadia-a", "Alpha", 2);
    await seedList(notes(), "nadia", "nadia-b", "Beta", 2);
    await seedList(notes(), "omar", "omar-c", "Gamma", 1);
    const shared = await pushAs(notes(), "omar", [{ name: "share_list", args: { list_id: "omar-c", user_id: "nadia", role: "editor" } }]);
    expect(shared.map((r) => r.status)).toEqual(["applied"]);
    await accept(notes(), "nadia", "omar-c");

    const context = await browser().newContext();
    const page = await context.newPage();
    const pulls = watchPulls(page);
    await page.goto(`${notes().url}/#token=${notes().token("nadia")}`);
    await expect.poll(() => page.getByTestId("user").textContent()).toBe("nadia");
    // Every list is in the sidebar, a shared one too, before any list's bucket is pulled.
    await expect.poll(() => sidebar(page)).toEqual(["Alpha", "Beta", "Gamma"]);
    expect(pulls.asked.flatMap((asked) => asked.open ?? ["every bucket"])).toEqual([]);

    await openList(page, "Alpha");
    await expect.poll(() => noteTitles(page)).toEqual(["Note 1", "Note 2"]);
    const alpha = buckets.shared({ list_id: "nadia-a" });
    expect(pulls.asked.at(-1)).toEqual(expect.objectContaining({ rules: ["own", "memberships", "invitations"], open: [alpha] }));

    // Another member adds a note to a list that is not selected; the page pulls again (its own
    // note goes out and comes back), and no pull brings the other list's note.
    const added = await pushAs(notes(), "omar", [{ name: "add_note", args: { id: "omar-c-later", list_id: "omar-c", title: "Added meanwhile" } }]);
    expect(added.map((r) => r.status)).toEqual(["applied"]);
    const before = pulls.answers.length;
    await submit(page, "new-note", { title: "Note 3" });
    await expect.poll(() => waiting(page)).toBe("0 waiting");
    await expect.poll(() => pulls.answers.length).toBeGreaterThan(before);
    expect(pulls.answers.filter((text) => text.includes("Added meanwhile"))).toEqual([]);
    expect(pulls.answers.filter((text) => text.includes("nadia-b-0"))).toEqual([]);
    const opened = new Set(pulls.asked.flatMap((asked) => asked.open ?? ["every bucket"]));
    expect([...opened]).toEqual([alpha]);

    // Selected, the list comes with the note; the list before is let go.
    await openList(page, "Gamma");
    await expect.poll(() => noteTitles(page), { timeout: 20_000 }).toEqual(["Added meanwhile", "Note 1"]);
    expect(pulls.answers.some((text) => text.includes("Added meanwhile"))).toBe(true);
    expect(pulls.asked.at(-1)?.open).toEqual([buckets.shared({ list_id: "omar-c" })]);
    await context.close();
  });
});
