/**
 * No import cycle anywhere in the TypeScript workspace: in every package's sources, and between
 * packages through their entries. A cycle makes the modules in it one layer that cannot be read,
 * tested or loaded apart. When it runs, the first module evaluated sees the others half-defined.
 * Type-only imports count too. They vanish at run time, but the modules still cannot be read
 * apart, and a type import turns into a value import with one edit. Break a cycle by moving what
 * both sides need into a module of its own, as `replica/state.ts` holds what the flows share.
 *
 * This file checks every package, not only `@engine/client`: it lives here because vitest picks
 * up tests under `packages/*\/test` only.
 */

import { fileURLToPath } from "node:url";

import { describe, expect, test } from "vitest";

import { findCycle, moduleSpecifiers, workspaceGraph } from "./support/module-graph.js";

const workspaceRoot = fileURLToPath(new URL("../../../", import.meta.url));

describe("module graph", () => {
  test("every kind of import and re-export is read, and nothing else", () => {
    const text = [
      `import a from "./a.js";`,
      `import type { B } from "./b.js";`,
      `import "./c.js";`,
      `export { d } from "./d.js";`,
      `export type * from "./e.js";`,
      `export * as f from "./f.js";`,
      `const g = await import("./g.js");`,
      `type H = import("./h.js").H;`,
      `import i = require("./i.js");`,
      `const j = "./j.js";`,
      `export { a, g, j };`,
      `// import k from "./k.js";`,
    ].join("\n");
    expect(moduleSpecifiers("sample.ts", text)).toEqual(["./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./f.js", "./g.js", "./h.js", "./i.js"]);
  });

  test("a planted cycle is found, and a graph without one passes", () => {
    const planted = new Map([
      ["d", ["a"]],
      ["a", ["b"]],
      ["b", ["c", "e"]],
      ["c", ["a"]],
      ["e", []],
    ]);
    expect(findCycle(planted)).toEqual(["a", "b", "c", "a"]);
    expect(findCycle(new Map([["self", ["self"]]]))).toEqual(["self", "self"]);
    const layered = new Map([
      ["top", ["middle", "bottom"]],
      ["middle", ["bottom"]],
      ["bottom", []],
    ]);
    expect(findCycle(layered)).toBeUndefined();
  });
});

describe("the workspace", () => {
  const { graph, unresolved } = workspaceGraph(workspaceRoot);

  test("every relative and workspace import resolves to a source file", () => {
    expect(unresolved).toEqual([]);
  });

  test("the graph holds the sources and their imports", () => {
    const edges = [...graph.values()].reduce((sum, targets) => sum + targets.length, 0);
    expect(graph.size).toBeGreaterThan(20);
    expect(edges).toBeGreaterThan(graph.size);
    expect(graph.get("packages/client/src/index.ts")).toContain("packages/client/src/client.ts");
    // Between packages, through the entry `package.json` names.
    expect(graph.get("packages/notes-web/src/main.ts")).toContain("packages/client/src/index.ts");
    expect(graph.get("packages/notes-web/src/main.ts")).toContain("packages/notes/src/optimistic.ts");
  });

  test("has no import cycle", () => {
    expect(findCycle(graph)?.join(" → "), "an import cycle").toBeUndefined();
  });
});
