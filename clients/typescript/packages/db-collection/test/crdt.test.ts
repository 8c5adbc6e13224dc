/**
 * The CRDT helpers on their own: documents round-trip through the wire's base64, an edit's update
 * carries only the edit, and concurrent edits merged in either order converge.
 */

import { describe, expect, test } from "vitest";

import { applyCrdtUpdate, createCrdtMap, createCrdtText, editCrdtMap, editCrdtText, encodeCrdtUpdate } from "../src/index.js";

describe("CRDT helpers", () => {
  test("an empty text is the server's empty document, and a document survives the wire", () => {
    // What the server stores for a new note's body.
    expect(createCrdtText("AAA=").text.toString()).toBe("");
    const body = createCrdtText();
    editCrdtText(body, (text) => text.insert(0, "héllo, wörld ✓"));
    const again = createCrdtText(encodeCrdtUpdate(body));
    expect(again.text.toString()).toBe("héllo, wörld ✓");
  });

  test("an edit's update carries only the edit, and concurrent edits converge in either order", () => {
    const base = createCrdtText();
    editCrdtText(base, (text) => text.insert(0, "milk"));
    const state = encodeCrdtUpdate(base);
    const [a, b] = [createCrdtText(state), createCrdtText(state)];
    const fromA = editCrdtText(a, (text) => text.insert(0, "oat "));
    const fromB = editCrdtText(b, (text) => text.insert(4, ", 2 litres"));
    expect(fromA.length).toBeLessThan(state.length + 8);
    applyCrdtUpdate(a, fromB);
    applyCrdtUpdate(b, fromA);
    expect(a.text.toString()).toBe(b.text.toString());
    expect(a.text.toString()).toBe("oat milk, 2 litres");
    // Applying an update twice changes nothing.
    applyCrdtUpdate(a, fromB);
    expect(a.text.toString()).toBe("oat milk, 2 litres");
  });

  test("maps merge entry by entry", () => {
    const [a, b] = [createCrdtMap(), createCrdtMap()];
    const fromA = editCrdtMap(a, (map) => map.set("colour", "green"));
    const fromB = editCrdtMap(b, (map) => map.set("size", 3));
    applyCrdtUpdate(a, fromB);
    applyCrdtUpdate(b, fromA);
    expect(a.map.toJSON()).toEqual({ colour: "green", size: 3 });
    expect(b.map.toJSON()).toEqual(a.map.toJSON());
  });
});
