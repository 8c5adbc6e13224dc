/**
 * The workspace's module graph, for `imports.test.ts`. `moduleSpecifiers` reads a file's imports
 * with the TypeScript compiler's parser, so a string that only looks like an import is not one.
 * `workspaceGraph` resolves them to files: relative ones as the bundler resolution does, and those
 * naming a workspace package to the source of the file its `package.json` `exports` names (a
 * published package's `dist/x.js` was built from `src/x.ts`).
 * Imports of packages outside the workspace are not edges. `findCycle` searches the result.
 */

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

import ts from "typescript";

/**
 * Every module `text` imports or re-exports: `import` (type-only too, and bare side-effect
 * imports), `export … from`, `import x = require(…)`, dynamic `import()` of a string literal, and
 * `import("…")` in a type.
 */
export function moduleSpecifiers(fileName: string, text: string): string[] {
  const kind = fileName.endsWith(".tsx") ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      if (ts.isStringLiteral(node.moduleSpecifier)) found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      if (ts.isStringLiteral(node.moduleReference.expression)) found.push(node.moduleReference.expression.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteralLike(argument)) found.push(argument.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      if (ts.isStringLiteral(node.argument.literal)) found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** A graph's edges, from each node to the nodes it imports. */
export type Graph = ReadonlyMap<string, readonly string[]>;

/**
 * A cycle of `graph`: its nodes in order, with the first repeated at the end. `undefined` when
 * the graph has none. Nodes are visited in sorted order, so the same graph gives the same cycle.
 */
export function findCycle(graph: Graph): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    state.set(node, "open");
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const seen = state.get(next);
      if (seen === "open") return [...path.slice(path.indexOf(next)), next];
      if (seen === undefined) {
        const cycle = visit(next);
        if (cycle) return cycle;
      }
    }
    path.pop();
    state.set(node, "done");
    return undefined;
  };
  for (const node of [...graph.keys()].sort()) {
    if (state.has(node)) continue;
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

/** The module graph of a workspace's sources, and the imports that named no file. */
export interface WorkspaceGraph {
  /** Edges between files, by path relative to the workspace root. */
  graph: Graph;
  /** `file: specifier` of each relative or workspace import that resolved to no source file. */
  unresolved: string[];
}

/** A source file: `.ts` or `.tsx`, neither a test (`*.test.ts`) nor a declaration (`*.d.ts`). */
function isSource(name: string): boolean {
  return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith(".d.ts");
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return isSource(entry.name) ? [path] : [];
  });
}

/** Each workspace package's entry points: `@scope/name` and `@scope/name/sub` to a file. */
function packageEntries(packageDirs: readonly string[]): Map<string, string> {
  const entries = new Map<string, string>();
  for (const dir of packageDirs) {
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      name: string;
      exports?: string | Record<string, string | { default: string }>;
      main?: string;
    };
    const exports = typeof manifest.exports === "string" ? { ".": manifest.exports } : (manifest.exports ?? {});
    if (manifest.exports === undefined && manifest.main) exports["."] = manifest.main;
    for (const [subpath, target] of Object.entries(exports)) {
      const file = typeof target === "string" ? target : target.default;
      entries.set(manifest.name + subpath.slice(1), resolve(dir, sourceOf(file)));
    }
  }
  return entries;
}

/** The source `tsc` built `file` from: `./dist/x.js` from `./src/x.ts`; a source is itself. */
function sourceOf(file: string): string {
  const built = /^\.\/dist\/(.*)\.js$/.exec(file);
  return built ? `./src/${built[1]}.ts` : file;
}

/** The file a relative specifier names: `./x.js` is `./x.ts` or `./x.tsx` in the sources. */
function resolveRelative(from: string, specifier: string, files: ReadonlySet<string>): string | undefined {
  const base = resolve(dirname(from), specifier);
  const stem = base.replace(/\.(m|c)?jsx?$/, "");
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, join(base, "index.ts"), join(base, "index.tsx")];
  return candidates.find((candidate) => files.has(candidate));
}

/** The module graph of every source file under `packages/*\/src` of the workspace at `root`. */
export function workspaceGraph(root: string): WorkspaceGraph {
  const packagesDir = join(root, "packages");
  const packageDirs = readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(packagesDir, entry.name, "package.json")))
    .map((entry) => join(packagesDir, entry.name));
  const entries = packageEntries(packageDirs);
  const packageNames = [...new Set([...entries.keys()].map((name) => name.split("/").slice(0, 2).join("/")))];
  const files = new Set(packageDirs.flatMap((dir) => sourceFiles(join(dir, "src"))));
  const name = (file: string) => relative(root, file).split("\\").join("/");
  const graph = new Map<string, string[]>();
  const unresolved: string[] = [];
  for (const file of [...files].sort()) {
    const edges = new Set<string>();
    for (const specifier of moduleSpecifiers(file, readFileSync(file, "utf8"))) {
      let target: string | undefined;
      if (specifier.startsWith(".")) {
        // A stylesheet or another asset is the bundler's business, not a module of the graph.
        if (/\.[a-z]+$/.test(specifier) && !/\.(m|c)?[jt]sx?$/.test(specifier)) continue;
        target = resolveRelative(file, specifier, files);
      } else if (packageNames.some((pkg) => specifier === pkg || specifier.startsWith(`${pkg}/`))) {
        target = entries.get(specifier);
        if (target !== undefined && !files.has(target)) target = undefined;
      } else {
        continue;
      }
      if (target === undefined) unresolved.push(`${name(file)}: ${specifier}`);
      else edges.add(name(target));
    }
    graph.set(name(file), [...edges].sort());
  }
  return { graph, unresolved };
}
