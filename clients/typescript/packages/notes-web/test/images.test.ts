/**
 * Images attached to notes, in headless Chromium against a real notes server: the owner attaches
 * an image offline, sees it at once marked uploading, and still after a reload; back online, the
 * note reaches a viewer before the bytes do (the upload held up on the way), and the viewer sees
 * an "Uploading…" placeholder, then the image once it is uploaded, byte for byte. A viewer
 * removed from the list loses the note, the server refuses them the image, and their page's copy
 * of it is gone. Screenshots at a phone's and a desktop's width; axe-core finds nothing serious.
 */

import type { Page } from "playwright-core";
import { describe, expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { Link } from "../../notes/test/support/link.js";
import {
  axeViolations,
  controlled,
  newList,
  noteTitles,
  openList,
  PHONE,
  screenshots,
  signedIn,
  stored,
  submit,
  useBrowser,
  waiting,
  shareAccepted,
} from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();
const signIn = (user: string, url?: string) => signedIn(browser(), notes(), user, url);

/** A PNG of a sunset, 160 by 120, drawn by the page's canvas. */
async function picture(page: Page): Promise<Buffer> {
  const bytes = await page.evaluate(async () => {
    const canvas = document.createElement("canvas");
    canvas.width = 160;
    canvas.height = 120;
    const context = canvas.getContext("2d")!;
    const sky = context.createLinearGradient(0, 0, 0, 120);
    sky.addColorStop(0, "#1d3b8f");
    sky.addColorStop(1, "#f49b3f");
    context.fillStyle = sky;
    context.fillRect(0, 0, 160, 120);
    context.fillStyle = "#ffd23f";
    context.beginPath();
    context.arc(80, 90, 26, 0, 2 * Math.PI);
    context.fill();
    context.fillStyle = "#173042";
    context.fillRect(0, 96, 160, 24);
    const blob = await new Promise<Blob>((resolve) => canvas.toBlob((b) => resolve(b!), "image/png"));
    return [...new Uint8Array(await blob.arrayBuffer())];
  });
  return Buffer.from(bytes);
}

/** The image in the row of note `title`. */
const thumbnail = (page: Page, title: string) =>
  page.locator("[data-testid=note]", { hasText: title }).getByTestId("thumbnail");

/** The share of its row's width that the title of note `title` takes, at a phone's width. */
async function titleShareOnAPhone(page: Page, title: string): Promise<number> {
  const before = page.viewportSize();
  await page.setViewportSize(PHONE);
  const share = await page
    .locator("[data-testid=note]", { hasText: title })
    .evaluate((row) => row.querySelector(".title")!.getBoundingClientRect().width / row.getBoundingClientRect().width);
  if (before) await page.setViewportSize(before);
  return share;
}

/**
 * The bytes of the image in the row of note `title`, as `user`'s page keeps them (the image is
 * an object URL of them; the page's policy lets it fetch no `blob:` URL), once it is drawn.
 */
async function shownBytes(page: Page, user: string, title: string): Promise<Buffer> {
  const image = thumbnail(page, title).locator("img");
  await expect.poll(() => image.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(160);
  const key = await thumbnail(page, title).getAttribute("data-blob");
  const bytes = await page.evaluate(
    ([name, key]) =>
      new Promise<number[]>((resolve, reject) => {
        const open = indexedDB.open(name!);
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const get = open.result.transaction("blobs").objectStore("blobs").get(key!);
          get.onsuccess = () => {
            resolve([...(get.result as { bytes: Uint8Array }).bytes]);
            open.result.close();
          };
        };
      }),
    [`engine-notes-blobs-${user}`, key],
  );
  return Buffer.from(bytes);
}

/** The blob keys kept in IndexedDB database `name` of the page. */
const keptBlobs = (page: Page, name: string) =>
  page.evaluate(
    (name) =>
      new Promise<string[]>((resolve, reject) => {
        const open = indexedDB.open(name);
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const keys = open.result.transaction("blobs").objectStore("blobs").getAllKeys();
          keys.onsuccess = () => {
            resolve(keys.result as string[]);
            open.result.close();
          };
        };
      }),
    name,
  );

describe("images of notes", () => {
  test("an image attached offline reaches a viewer once uploaded; a removed viewer loses it", { timeout: 240_000 }, async () => {
    const link = await Link.open(notes().port);
    const alice = await signIn("alice", link.url);
    await controlled(alice.page);
    await newList(alice.page, "Trip");
    await shareAccepted(notes(), alice.page, "bob", "viewer");
    await submit(alice.page, "new-note", { title: "Passport" });
    await expect.poll(() => waiting(alice.page)).toBe("0 waiting");
    const bob = await signIn("bob");
    await openList(bob.page, "Trip");
    await expect.poll(() => noteTitles(bob.page)).toEqual(["Passport"]);
    expect(await thumbnail(bob.page, "Passport").isHidden(), "no image yet").toBe(true);

    // Offline, alice attaches an image: it shows at once, marked as uploading, also after a reload.
    await alice.context.setOffline(true);
    link.cut();
    await expect.poll(() => alice.page.getByTestId("connection").textContent()).toBe("offline");
    const png = await picture(alice.page);
    await alice.page.locator("[data-testid=note] .title", { hasText: "Passport" }).click();
    await alice.page.getByTestId("attach-image").setInputFiles({ name: "sunset.png", mimeType: "image/png", buffer: png });
    await expect.poll(() => thumbnail(alice.page, "Passport").getAttribute("data-state")).toBe("uploading");
    await expect.poll(() => thumbnail(alice.page, "Passport").locator("img").count()).toBe(1);
    await expect.poll(() => alice.page.getByTestId("note-image").locator("img").count()).toBe(1);
    // Announced once the write is queued, which may be after the optimistic thumbnail shows.
    await expect.poll(() => alice.page.getByTestId("announce").textContent()).toBe("Attached “sunset.png”.");
    await stored(alice.page);
    await alice.page.reload();
    await openList(alice.page, "Trip");
    await expect.poll(() => thumbnail(alice.page, "Passport").getAttribute("data-state")).toBe("uploading");
    await expect.poll(() => thumbnail(alice.page, "Passport").locator("img").count()).toBe(1);
    expect((await shownBytes(alice.page, "alice", "Passport")).equals(png)).toBe(true);
    await expect.poll(() => waiting(alice.page)).toBe("1 waiting");
    await screenshots(alice.page, "image-offline");
    // On a phone the image and its state go under the title, which keeps its column (before: a letter wide).
    expect(await titleShareOnAPhone(alice.page, "Passport")).toBeGreaterThan(0.25);

    // Online, with the upload held up on the way: the note reaches bob before the bytes.
    await alice.context.route("**/blobs/upload", (route) => route.abort("internetdisconnected"));
    link.restore();
    await alice.context.setOffline(false);
    await expect.poll(() => waiting(alice.page), { timeout: 20_000 }).toBe("0 waiting");
    // Bob's page asks for the bytes again and again meanwhile, its state going from downloading
    // to uploading each time: the state, the caption and the image are read together.
    const placeholder = () =>
      thumbnail(bob.page, "Passport").evaluate((e) => [e.dataset.state, e.textContent, e.querySelectorAll("img").length]);
    await expect.poll(placeholder, { timeout: 20_000 }).toEqual(["uploading", "Uploading…", 0]);
    await expect.poll(() => thumbnail(alice.page, "Passport").getAttribute("data-state")).toBe("uploading");
    await screenshots(bob.page, "image-uploading");
    expect(await titleShareOnAPhone(bob.page, "Passport")).toBeGreaterThan(0.25);
    expect(await axeViolations(bob.page), "axe-core with the placeholder").toEqual([]);

    // The upload goes through (coming online again wakes it at once), and bob sees the image.
    await alice.context.unroute("**/blobs/upload");
    await alice.context.setOffline(true);
    await alice.context.setOffline(false);
    await expect.poll(() => thumbnail(alice.page, "Passport").getAttribute("data-state"), { timeout: 20_000 }).toBe(
      "available",
    );
    await expect.poll(() => thumbnail(bob.page, "Passport").getAttribute("data-state"), { timeout: 30_000 }).toBe(
      "available",
    );
    await expect.poll(() => thumbnail(bob.page, "Passport").locator("img").count()).toBe(1);
    expect((await shownBytes(bob.page, "bob", "Passport")).equals(png), "bob sees alice's bytes").toBe(true);
    await bob.page.locator("[data-testid=note] .title", { hasText: "Passport" }).click();
    await expect.poll(() => bob.page.getByTestId("note-image").locator("img").count()).toBe(1);
    expect(await bob.page.getByTestId("note-image").locator("img").getAttribute("alt")).toBe("Image of Passport");
    expect(await bob.page.getByTestId("attach-image").isVisible(), "a viewer has no image controls").toBe(false);
    await screenshots(bob.page, "image");
    expect(await axeViolations(bob.page), "axe-core with the image").toEqual([]);
    await screenshots(alice.page, "image-owner");
    expect(await axeViolations(alice.page), "axe-core with the image controls").toEqual([]);

    // Alice removes bob: his page loses the note, the server refuses him the image, and the
    // copy his page kept is gone.
    const key = await thumbnail(alice.page, "Passport").getAttribute("data-blob");
    expect(await keptBlobs(bob.page, "engine-notes-blobs-bob")).toEqual([key]);
    await alice.page.getByRole("button", { name: "Remove bob" }).click();
    await expect.poll(() => waiting(alice.page)).toBe("0 waiting");
    await expect.poll(() => bob.page.locator("[data-testid=list]", { hasText: "Trip" }).count(), { timeout: 20_000 }).toBe(0);
    const refused = await fetch(`${notes().url}/blobs/download`, {
      method: "POST",
      headers: { authorization: `Bearer ${notes().token("bob")}`, "content-type": "application/json" },
      body: JSON.stringify({ key }),
    });
    expect(refused.status).toBe(404);
    await expect.poll(() => keptBlobs(bob.page, "engine-notes-blobs-bob")).toEqual([]);
    await Promise.all([alice.context.close(), bob.context.close(), link.close()]);
  });
});
