/**
 * With the development secret (no `ENGINE_SECRET`), the sign-in page offers "Continue as alice"
 * and "Continue as bob", and one click signs in; with a secret of its own the server offers no
 * one (`/dev/users` and `/dev/token/{user}` are not served).
 */

import { expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { axeViolations, screenshots, useBrowser } from "./support/browser.js";

// An empty `ENGINE_SECRET` is no secret: the server signs with the development one.
const development = useNotesServer({ env: { ENGINE_SECRET: "" } });
const production = useNotesServer();
const browser = useBrowser();

test("the development sign-in is one click, and only with the development secret", async () => {
  const context = await browser().newContext();
  const page = await context.newPage();
  await page.goto(`${development().url}/`);
  const bob = page.getByRole("button", { name: "Continue as bob" });
  await bob.waitFor();
  expect(await page.getByTestId("dev-users").getByRole("button").allTextContents()).toEqual([
    "Continue as alice",
    "Continue as bob",
  ]);
  await screenshots(page, "sign-in");
  expect(await axeViolations(page)).toEqual([]);
  await bob.click();
  await expect.poll(() => page.getByTestId("user").textContent()).toBe("bob");
  await context.close();

  expect((await fetch(`${production().url}/dev/users`)).status).toBe(404);
  expect((await fetch(`${production().url}/dev/token/alice`, { method: "POST" })).status).toBe(404);
  const other = await browser().newContext();
  const signIn = await other.newPage();
  await signIn.goto(`${production().url}/`);
  await signIn.getByTestId("sign-in").waitFor();
  await signIn.waitForLoadState("networkidle");
  expect(await signIn.getByTestId("dev-users").isVisible()).toBe(false);
  await other.close();
});
