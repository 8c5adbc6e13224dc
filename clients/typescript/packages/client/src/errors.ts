/**
 * What can go wrong talking to the server, classified as `docs/protocol.md#errors` says: a
 * problem document from the engine (`ServerError`, decided on by its `code`), or anything else
 * (`NetworkError`: no answer, or an answer that is not the engine's), from which nothing is
 * concluded about the mutations.
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
