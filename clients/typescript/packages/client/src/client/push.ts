/**
 * The push, as the client runs it: the outbox in batches to `POST /sync/push` until it is
 * drained or a failure stops it; in the background, the push's `SyncLoop` retries after a
 * failure. One push runs at a time. Some answers do not stop it. A `409 mutation_out_of_order`
 * numbers the outbox on from the server's sequence, once per sequence number. A
 * `malformed_request` or `payload_too_large` halves the batch until the one mutation the server
 * cannot take is found and refused. A result list shorter than the batch ends the push without
 * an error, and the rest goes later.
 */

import { ServerError } from "../errors.js";
import type { Remote } from "../remote.js";
import type { Replica } from "../replica.js";
import { Serial } from "./serial.js";
import type { StatusBoard } from "./status.js";

export class Pusher {
  private readonly pushes = new Serial<boolean>();

  constructor(
    private readonly remote: Remote,
    private readonly replica: Replica,
    private readonly settings: { readonly pushBatch: number },
    private readonly status: StatusBoard,
    private readonly persist: () => Promise<void>,
  ) {}

  /** One push at a time. Returns whether something was applied. */
  pushOnce(): Promise<boolean> {
    return this.pushes.run(() => this.pushBatches());
  }

  /** Settles once every push asked for so far has. */
  idle(): Promise<unknown> {
    return this.pushes.idle();
  }

  private async pushBatches(): Promise<boolean> {
    this.status.setSyncing(true);
    let batchSize = this.settings.pushBatch;
    let appliedAny = false;
    let renumberedAt: number | undefined;
    try {
      for (;;) {
        const batch = this.replica.unpushed(batchSize);
        if (batch.length === 0) break;
        try {
          const response = await this.remote.push({
            clientId: this.replica.clientId,
            mutations: batch.map(({ mutationId, clientMutationId, name, args, hlc }) => ({
              mutationId,
              clientMutationId,
              name,
              args,
              hlc,
            })),
          });
          appliedAny = this.replica.recordResults(response.results, Date.now()) || appliedAny;
          await this.persist();
          // The server stopped early without an error: the rest goes later.
          if (response.results.length < batch.length) break;
        } catch (err) {
          if (!(err instanceof ServerError)) throw err;
          const last = err.problem.lastMutationId;
          if (err.code === "mutation_out_of_order" && last !== undefined && renumberedAt !== last) {
            // The server's sequence is not where the outbox's is: number on from there, once.
            renumberedAt = last;
            this.replica.renumber(last);
            await this.persist();
            continue;
          }
          if (err.code === "malformed_request" || err.code === "payload_too_large") {
            if (batch.length > 1) {
              // Find the mutation the server cannot take by pushing fewer at a time.
              batchSize = Math.max(1, Math.floor(batch.length / 2));
              continue;
            }
            batchSize = this.settings.pushBatch;
            this.replica.refuse(batch[0]!, err.problem, Date.now());
            await this.persist();
            continue;
          }
          throw err;
        }
      }
      this.status.setStatus({ lastError: null });
      return appliedAny;
    } catch (err) {
      this.status.recordError(err);
      throw err;
    } finally {
      this.status.setSyncing(false);
    }
  }
}
