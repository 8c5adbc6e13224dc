/**
 * What can go wrong talking to the server, classified as `docs/protocol.md#errors` says: a
 * problem document from the engine (`ServerError`, decided on by its `code`), or anything else
 * (`NetworkError`: no answer, or an answer that is not the engine's), from which nothing is
 * concluded about the mutations. And a refusal the client makes itself, before anything is
 * queued: `ForbiddenError`, a write the server's write rules certainly refuse.
 */

import type { Problem } from "./wire.js";

/** The engine answered with a problem document. */
export class ServerError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
    /** The `Retry-After` of a 429 or 503, in milliseconds. */
    readonly retryAfterMs: number | undefined,
  ) {
    super(`${problem.code}: ${problem.detail}`);
    this.name = "ServerError";
  }

  get code(): string {
    return this.problem.code;
  }
}

/** No answer, or one the engine did not make: try again later. */
export class NetworkError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NetworkError";
  }
}

/** The client was closed. */
export class ClosedError extends Error {
  constructor() {
    super("the client is closed");
    this.name = "ClosedError";
  }
}

/**
 * A local mutation refused before it was queued: one of its writes is one the server would
 * certainly refuse as `forbidden` (`docs/design.md` §4). `detail` is the problem detail the
 * server gives for the same mutation, word for word (`forbidden: ` and the refusal).
 */
export class ForbiddenError extends Error {
  readonly code = "forbidden";
  readonly detail: string;

  constructor(refusal: string) {
    super(`forbidden: ${refusal}`);
    this.detail = this.message;
    this.name = "ForbiddenError";
  }
}
