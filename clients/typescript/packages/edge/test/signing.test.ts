/**
 * The relay checks what the sync server signs: the same bytes give the same signature here as
 * in `engine-runtime/src/realtime/edge.rs` (one vector, in both tests), a ticket holds for its
 * own bucket until its expiry, and a publish's signature is not a ticket's.
 */

import { expect, test } from "vitest";

import { checkTicket, sign, signTicket, verify } from "@engine/edge";

const SECRET = "0123456789abcdef";

test("a ticket is the server's signature of its bucket and expiry", async () => {
  const ticket = await signTicket(SECRET, "shared/l1", 1_900_000_000);
  expect(ticket).toBe("1900000000.04157a8fb84d5573706ce7857f86dcd3c569ed370928ef426a6474aa64600c77");
  const before = 1_899_999_999_000;
  expect(await checkTicket(SECRET, "shared/l1", ticket, before)).toEqual({ expires: 1_900_000_000 });
  expect(await checkTicket(SECRET, "shared/l2", ticket, before)).toHaveProperty("refused");
  expect(await checkTicket(SECRET, "shared/l1", ticket, 1_900_000_000_000)).toHaveProperty("refused");
  expect(await checkTicket("another secret", "shared/l1", ticket, before)).toHaveProperty("refused");
  expect(await checkTicket(SECRET, "shared/l1", ticket.replace(/^1/, "2"), before)).toHaveProperty("refused");
  expect(await checkTicket(SECRET, "shared/l1", "not a ticket", before)).toHaveProperty("refused");
});

test("a publish is signed under its own name", async () => {
  const body = JSON.stringify({ buckets: ["shared/l1"], expires: 1_900_000_000_000, nonce: "n" });
  const signature = await sign(SECRET, "publish", body);
  expect(signature).toBe("b5ce2afc6bc982bb3d765858109b05a76699f3156a2da9ebe5c79e93893919c7");
  expect(await verify(SECRET, "publish", body, signature)).toBe(true);
  expect(await verify(SECRET, "ticket", body, signature)).toBe(false);
  expect(await verify(SECRET, "publish", `${body} `, signature)).toBe(false);
});
