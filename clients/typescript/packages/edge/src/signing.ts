/**
 * The signatures the sync server (`engine-runtime/src/realtime/edge.rs`) and the relay share:
 * hex HMAC-SHA256 over `<kind>\n<message>` with the shared secret, a kind per message so that a
 * ticket is never taken for a publish. Web Crypto, as Workers, browsers and Node have it.
 *
 * - A ticket is `<expiry, Unix seconds>.<signature of "ticket", "<bucket>\n<expiry>">`.
 * - A publish is a JSON body whose signature of kind `publish` rides in `x-engine-signature`.
 */

/** The header that carries a publish's signature. */
export const SIGNATURE_HEADER = "x-engine-signature";

const encoder = new TextEncoder();

async function key(secret: string, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [usage]);
}

function payload(kind: string, message: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${kind}\n${message}`);
}

/** Hex HMAC-SHA256 of `<kind>\n<message>` under `secret`. */
export async function sign(secret: string, kind: string, message: string): Promise<string> {
  const mac = await crypto.subtle.sign("HMAC", await key(secret, "sign"), payload(kind, message));
  return [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether `signature` (hex) is `secret`'s over `<kind>\n<message>`, compared in constant time. */
export async function verify(secret: string, kind: string, message: string, signature: string): Promise<boolean> {
  if (!/^[0-9a-f]{64}$/.test(signature)) return false;
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) bytes[i] = parseInt(signature.slice(2 * i, 2 * i + 2), 16);
  return crypto.subtle.verify("HMAC", await key(secret, "verify"), bytes, payload(kind, message));
}

/** The ticket of `bucket` until `expires` (Unix seconds). */
export async function signTicket(secret: string, bucket: string, expires: number): Promise<string> {
  return `${expires}.${await sign(secret, "ticket", `${bucket}\n${expires}`)}`;
}

/**
 * The expiry (Unix seconds) of `ticket` when it is `secret`'s for `bucket` and has not expired
 * at `nowMs`; otherwise why not.
 */
export async function checkTicket(
  secret: string,
  bucket: string,
  ticket: string,
  nowMs: number = Date.now(),
): Promise<{ expires: number } | { refused: string }> {
  const match = /^(\d{1,12})\.([0-9a-f]{64})$/.exec(ticket);
  if (!match) return { refused: "the ticket is malformed" };
  const expires = Number(match[1]);
  if (!(await verify(secret, "ticket", `${bucket}\n${expires}`, match[2]!))) {
    return { refused: "the ticket is not the server's for this bucket" };
  }
  if (expires * 1000 <= nowMs) return { refused: "the ticket has expired: ask the server for a new one" };
  return { expires };
}
