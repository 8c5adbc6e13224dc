/**
 * `createEngineStatus`: what a status bar or an outbox screen reads of a client, apart from the
 * client. It holds the sync status (with a long pull's progress) and the outbox's quarantined entries (mutations the server
 * rejected for good, which no longer block the outbox), and retries or discards those.
 */

import type { Queued } from "../replica/outbox.js";
import type { QuarantinedEntry } from "../store/types.js";
import type { EngineClient } from "./api.js";
import type { PullProgress } from "../wire.js";
import type { Status } from "./status.js";

/** What the status needs of a client: any `EngineClient`, whatever its tables and mutators. */
export type StatusClient = Pick<EngineClient, "status" | "onStatus" | "retryQuarantined" | "discardQuarantined">;

/** A client's sync status and its quarantined mutations. */
export interface EngineStatus {
  /** What the client is doing now. */
  readonly current: Status;
  /** Mutations made locally that a pull has not yet shown applied. */
  readonly pending: number;
  /** How far a pull that takes several pages has got (`null` when none runs): for a progress bar. */
  readonly progress: PullProgress | null;
  /** Mutations the server rejected, with its errors, oldest first. */
  readonly quarantined: readonly QuarantinedEntry[];
  /** Call `listener` with the status now and after every change; returns the unsubscribe. */
  subscribe(listener: (status: Status) => void): () => void;
  /** Queue a quarantined mutation again; `undefined` when it is not quarantined. */
  retry(clientMutationId: string): Promise<Queued | undefined>;
  /** Drop a quarantined mutation; whether it was quarantined. */
  discard(clientMutationId: string): Promise<boolean>;
}

/** The sync status and quarantined mutations of `client`. */
export function createEngineStatus(client: StatusClient): EngineStatus {
  return {
    get current() {
      return client.status;
    },
    get pending() {
      return client.status.pending;
    },
    get progress() {
      return client.status.progress;
    },
    get quarantined() {
      return client.status.quarantined;
    },
    subscribe(listener) {
      const unsubscribe = client.onStatus(listener);
      listener(client.status);
      return unsubscribe;
    },
    retry: (clientMutationId) => client.retryQuarantined(clientMutationId),
    discard: (clientMutationId) => client.discardQuarantined(clientMutationId),
  };
}
