/**
 * The web app's tests in headless Chromium (Debian's `chromium`, driven by `playwright-core`):
 * one browser per test file, a context per user, and the helpers the tests share: signing in by
 * link, filling forms, screenshots at a phone's and a desktop's width (to `target/test-artifacts`,
 * or `ENGINE_SCREENSHOTS`), axe-core's findings, and notes seeded over HTTP.
 */

import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, expect } from "vitest";

import { accept } from "../../../notes/test/support/clients.js";
import { repositoryRoot } from "../../../notes/test/support/global-setup.js";
import type { NotesServer } from "../../../notes/test/support/server.js";

const CHROMIUM = process.env.ENGINE_CHROMIUM ?? "/usr/bin/chromium";
export const artifacts = process.env.ENGINE_SCREENSHOTS ?? join(repositoryRoot, "target", "test-artifacts");
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** The browser of this file's tests (call at the top of a test file). */
export function useBrowser(): () => Browser {
  let browser: Browser | undefined;
  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
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
  return () => {
    if (!browser) throw new Error("the browser is not started yet");
    return browser;
  };
}

export const PHONE = { width: 375, height: 812 };
export const DESKTOP = { width: 1280, height: 800 };

/** A page of the app in a context of its own, signed in as `user` by a link to `url`. */
export async function signedIn(
  browser: Browser,
  server: NotesServer,
  user: string,
  url = server.url,
  viewport = DESKTOP,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  await page.goto(`${url}/#token=${server.token(user)}`);
  await expect.poll(() => page.getByTestId("user").textContent()).toBe(user);
  return { context, page };
}

/** Fill form `form`'s fields (a `select` by its option's value) and submit it. */
export async function submit(page: Page, form: string, values: Record<string, string>): Promise<void> {
  const element = page.getByTestId(form);
  for (const [name, value] of Object.entries(values)) {
    const field = element.locator(`[name=${name}]`);
    if ((await field.evaluate((node) => node.tagName)) === "SELECT") await field.selectOption(value);
    else await field.fill(value);
  }
  await element.locator("button[type=submit]").click();
}

export const waiting = (page: Page) => page.getByTestId("pending").textContent();

/**
 * Wait until the page's changes are all in its store (`Status.storing`), as a test must before a
 * reload: a waiting count rises as soon as a change is made, before the store holds it.
 */
export async function stored(page: Page): Promise<void> {
  const storing = () => page.getByTestId("pending").getAttribute("data-storing");
  await expect.poll(storing, { message: "the page's changes in its store" }).toBe("false");
}
export const noteTitles = async (page: Page) =>
  (await page.getByTestId("note").locator(".title").allTextContents()).sort();

/** Open the list titled `title` and wait until it shows. */
export async function openList(page: Page, title: string): Promise<void> {
  await page.locator("[data-testid=list]", { hasText: title }).click();
  await page.locator("[data-testid=list].selected", { hasText: title }).waitFor();
}

/** A new list titled `title`, selected. */
export async function newList(page: Page, title: string): Promise<void> {
  await submit(page, "new-list", { title });
  await page.locator("[data-testid=list].selected", { hasText: title }).waitFor();
}

/** Wait until the service worker controls `page`, so it can open the page with no server. */
export async function controlled(page: Page): Promise<void> {
  await page.evaluate(async () => {
    await navigator.serviceWorker.ready;
    if (!navigator.serviceWorker.controller) {
      await new Promise((resolve) => navigator.serviceWorker.addEventListener("controllerchange", resolve));
    }
  });
}

/** Screenshots of `page` at a phone's and a desktop's width, named `notes-web-<name>-<width>.png`. */
export async function screenshots(page: Page, name: string): Promise<void> {
  const before = page.viewportSize();
  for (const size of [PHONE, DESKTOP]) {
    await page.setViewportSize(size);
    await page.screenshot({ path: join(artifacts, `notes-web-${name}-${size.width}.png`), fullPage: true });
  }
  if (before) await page.setViewportSize(before);
}

/** The rules axe-core finds broken on `page` with an impact of at least `serious`. */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated, not added as a script tag: the page's Content-Security-Policy allows no inline script.
  if (!(await page.evaluate(() => "axe" in globalThis))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    type Violation = { id: string; impact: string | null; nodes: { target: unknown }[] };
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.nodes.map((node) => JSON.stringify(node.target)).join(", ")}`);
}

/**
 * Share the list open on `page` with `user` as `role` through the page's share form, and have
 * `user` accept it over HTTP once the share is on the server: a share is an invitation, and a test
 * whose member is meant to hold the list, as every share did before invitations, shares this way.
 */
export async function shareAccepted(server: NotesServer, page: Page, user: string, role: string): Promise<void> {
  await submit(page, "share", { user, role });
  await expect.poll(() => waiting(page)).toBe("0 waiting");
  const listId = new URL(page.url()).searchParams.get("list");
  if (!listId) throw new Error("no list is open to share");
  await accept(server, user, listId);
}

/** A fresh client id for pushes made over HTTP. */
const clientId = () => crypto.randomUUID();

/** Push `mutations` (name and arguments) over HTTP as `user`, in batches; returns each result's status. */
export async function pushAs(
  server: NotesServer,
  user: string,
  mutations: { name: string; args: Record<string, unknown> }[],
  batch = 100,
): Promise<{ status: string; error?: { code: string; detail: string } }[]> {
  const token = server.token(user);
  const client = clientId();
  const results = [];
  for (let start = 0; start < mutations.length; start += batch) {
    const response = await fetch(`${server.url}/sync/push`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({
        clientId: client,
        mutations: mutations.slice(start, start + batch).map((mutation, i) => ({
          mutationId: start + i + 1,
          clientMutationId: crypto.randomUUID(),
          ...mutation,
        })),
      }),
    });
    if (!response.ok) throw new Error(`push: HTTP ${response.status}: ${await response.text()}`);
    results.push(...((await response.json()) as { results: { status: string; error?: { code: string; detail: string } }[] }).results);
  }
  return results;
}

/** A list `listId` owned by `user` with `count` notes, made over HTTP. */
export async function seedList(server: NotesServer, user: string, listId: string, title: string, count: number): Promise<void> {
  const mutations = [{ name: "create_list", args: { id: listId, title } }];
  for (let i = 0; i < count; i++) {
    mutations.push({ name: "add_note", args: { id: `${listId}-${i}`, list_id: listId, title: `Note ${i + 1}` } } as never);
  }
  const results = await pushAs(server, user, mutations);
  expect(results.filter((r) => r.status !== "applied")).toEqual([]);
}
