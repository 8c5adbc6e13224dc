/**
 * Blob keys: `sha256:` and the 64 lowercase hex digits of the SHA-256 of the bytes, as the
 * server's `BlobKey::for_bytes` computes them (`docs/protocol.md#blobs`). Because the key comes
 * from the bytes, a client names a file before uploading it, offline, and a row can name it at
 * once. The hash is the platform's Web Crypto (`crypto.subtle`), in browsers, Node and workers.
 */

/** What a blob can be given as: bytes, a buffer, or a `Blob` (a `File` from an `<input>`). */
export type BlobInput = Uint8Array | ArrayBuffer | Blob;

const PREFIX = "sha256:";
const KEY = /^sha256:[0-9a-f]{64}$/;

/** Whether `text` is a blob key. */
export function isBlobKey(text: unknown): text is string {
  return typeof text === "string" && KEY.test(text);
}

/** The bytes of `input`. */
export async function blobBytes(input: BlobInput): Promise<Uint8Array> {
  if (input instanceof Uint8Array) return input;
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  return new Uint8Array(await input.arrayBuffer());
}

/** The key of `input`'s bytes: `sha256:<hex>`, the same as the server's for the same bytes. */
export async function keyForBlob(input: BlobInput): Promise<string> {
  const bytes = await blobBytes(input);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  let hex = "";
  for (const byte of digest) hex += byte.toString(16).padStart(2, "0");
  return PREFIX + hex;
}
