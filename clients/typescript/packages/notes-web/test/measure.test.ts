/**
 * What one interaction costs the main thread in a list of 10,000 notes: ticking a note done,
 * renaming one and adding one, each traced from the input to the frame that shows it. The
 * longest main-thread task is the interaction's own work (the event, the local write, the
 * render); all tasks together add the background sync's and the test driver's.
 * The figures are reported (`BENCHMARKS.md` records them), not asserted: a timing bound would
 * fail on a busy machine without anything being wrong.
 */

import { writeFileSync } from "node:fs";
import { join } from "node:path";

import type { Page } from "playwright-core";
import { expect, test } from "vitest";

import { useNotesServer } from "../../notes/test/support/lifecycle.js";
import { artifacts, openList, seedList, submit, useBrowser, waiting } from "./support/browser.js";

const notes = useNotesServer();
const browser = useBrowser();
const NOTES = Number(process.env.ENGINE_MEASURE_NOTES ?? 10_000);
const ROUNDS = 5;
/**
 * A busy machine (other test files and a trace recording run beside this one) may take long: no
 * timing is asserted, and a wait fails only when the change never shows.
 */
const SLOW = { timeout: 60_000 };

/** The main thread's tasks while `act` runs and until the frame after `shown` holds, from a trace. */
interface Tasks {
  /** The longest task: the interaction's own work, from the input to its render. */
  longest: number;
  /** Every task together, the background sync's and the test driver's included. */
  total: number;
}

async function mainThread(page: Page, act: () => Promise<void>, shown: () => Promise<unknown>): Promise<Tasks> {
  const browser = page.context().browser()!;
  await browser.startTracing(page, { categories: ["devtools.timeline", "disabled-by-default-devtools.timeline"] });
  await act();
  await shown();
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  const trace = JSON.parse((await browser.stopTracing()).toString()) as { traceEvents: TraceEvent[] };
  // The page's main thread: of the renderers' main threads, the one that dispatched the input.
  const renderers = trace.traceEvents.filter((e) => e.name === "thread_name" && e.args?.name === "CrRendererMain");
  const input = trace.traceEvents.find(
    (e) => e.name === "EventDispatch" && renderers.some((r) => r.pid === e.pid && r.tid === e.tid),
  );
  const tasks = trace.traceEvents
    .filter((e) => e.ph === "X" && e.name === "RunTask" && e.tid === input?.tid && e.pid === input?.pid)
    .map((e) => (e.dur ?? 0) / 1000);
  return { longest: Math.max(0, ...tasks), total: tasks.reduce((sum, ms) => sum + ms, 0) };
}

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  dur?: number;
  args?: { name?: string };
}

test(`one interaction's main-thread time at ${NOTES.toLocaleString("en")} notes`, { timeout: 600_000 }, async () => {
  const seeded = Date.now();
  await seedList(notes(), "mia", "big", "Big list", NOTES);
  console.log(`notes-web: ${NOTES} notes seeded over HTTP in ${Date.now() - seeded} ms`);
  // Every text the status line shows while the first sync runs.
  const context = await browser().newContext();
  await context.addInitScript(() => {
    const seen: string[] = [];
    (globalThis as unknown as { statusSeen: string[] }).statusSeen = seen;
    new MutationObserver(() => {
      const text = document.querySelector("[data-testid=status]")?.textContent;
      if (text && seen[seen.length - 1] !== text) seen.push(text);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  });
  const page = await context.newPage();
  const loaded = Date.now();
  await page.goto(`${notes().url}/#token=${notes().token("mia")}`);
  await openList(page, "Big list");
  const size = () => page.getByTestId("notes").getAttribute("data-size");
  await expect.poll(size, { timeout: 300_000, interval: 1_000 }).toBe(String(NOTES));
  await expect.poll(() => waiting(page), SLOW).toBe("0 waiting");
  await expect.poll(() => page.getByTestId("status").textContent(), SLOW).toMatch(/^Synced at /);
  console.log(`notes-web: the first sync and render of ${NOTES} notes took ${Date.now() - loaded} ms`);
  // The first sync said how far it had got.
  const statuses = await page.evaluate(() => (globalThis as unknown as { statusSeen: string[] }).statusSeen);
  expect(statuses.some((text) => /^Loading your notes… [\d,]+ so far$/.test(text)), statuses.join(" | ")).toBe(true);

  const figures: Record<string, Tasks[]> = { done: [], rename: [], add: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const note = page.locator(`[data-note='big-${round * 7}']`);
    const box = note.getByRole("checkbox");
    figures.done!.push(
      await mainThread(page, () => box.click(), () => expect.poll(() => note.evaluate((li) => li.classList.contains("done")), SLOW).toBe(true)),
    );
    const title = `Renamed ${round}`;
    figures.rename!.push(
      await mainThread(
        page,
        async () => {
          await note.locator(".rename").click();
          await page.getByTestId("rename").fill(title);
          await page.getByTestId("rename").press("Enter");
        },
        () => expect.poll(() => note.locator(".title").textContent(), SLOW).toBe(title),
      ),
    );
    const added = `Added ${round}`;
    figures.add!.push(
      await mainThread(
        page,
        () => submit(page, "new-note", { title: added }),
        // A new note goes to the end of the list, off screen: its count shows it.
        () => expect.poll(size, SLOW).toBe(String(NOTES + round + 1)),
      ),
    );
    await expect.poll(() => waiting(page), { timeout: 30_000 }).toBe("0 waiting");
  }
  const median = (values: number[]) => Math.round([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]! * 10) / 10;
  const report = Object.fromEntries(
    Object.entries(figures).map(([name, runs]) => [
      name,
      { longestTaskMs: median(runs.map((r) => r.longest)), allTasksMs: median(runs.map((r) => r.total)) },
    ]),
  );
  console.log(`notes-web: main-thread ms per interaction at ${NOTES} notes (median of ${ROUNDS}): ${JSON.stringify(report)}`);
  writeFileSync(join(artifacts, "notes-web-interaction.json"), JSON.stringify({ notes: NOTES, rounds: ROUNDS, figures, median: report }, null, 2));
  await context.close();
});
