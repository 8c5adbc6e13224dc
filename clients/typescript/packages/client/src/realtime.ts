/**
 * What a stream connection has told the server, and the frames that bring the server to what
 * the app wants: its subscription (every bucket, or a narrowed list) and its presence. Each
 * connection starts from nothing told and is then told only what changes.
 */

import type { ClientFrame, PresenceMeta } from "./wire.js";

/** What one connection has told the server. */
export class Told {
  /** The subscription sent (`undefined`: the connection's default, every bucket held). */
  subscription: Set<string> | undefined;
  /** The presence announced, by bucket. */
  readonly tracks = new Map<string, PresenceMeta>();

  /** Whether the server sends this connection the presence of `bucket`. */
  follows(bucket: string): boolean {
    return this.subscription === undefined || this.subscription.has(bucket);
  }
}

/** Frames to send, or a new connection (no frame widens a narrowed subscription again). */
export type Step = { frames: ClientFrame[] } | "reconnect";

/**
 * The frames that take the server from what it was `told` to the app's subscription (`wanted`,
 * `undefined` for every bucket) and presence (`tracked`). Presence goes only to followed buckets
 * the client holds (`held`); the subscription too once the server refused one (`strict`).
 * Untracks go first, a subscription next, tracks last: the server refuses presence in a bucket
 * the connection does not follow.
 */
export function plan(
  wanted: readonly string[] | undefined,
  tracked: ReadonlyMap<string, PresenceMeta>,
  held: ReadonlySet<string>,
  strict: boolean,
  told: Told,
): Step {
  const narrowed = wanted && new Set(wanted.filter((b) => !strict || held.has(b)));
  if (narrowed === undefined && told.subscription !== undefined) return "reconnect";
  const follows = (bucket: string) => held.has(bucket) && (narrowed === undefined || narrowed.has(bucket));
  const frames: ClientFrame[] = [];
  for (const bucket of [...told.tracks.keys()].sort()) {
    if (tracked.has(bucket) && follows(bucket)) continue;
    frames.push({ type: "untrack", bucket });
    told.tracks.delete(bucket);
  }
  if (narrowed && !sameSet(told.subscription, narrowed)) {
    frames.push({ type: "subscribe", buckets: [...narrowed].sort() });
    told.subscription = narrowed;
  }
  for (const bucket of [...tracked.keys()].sort()) {
    const meta = tracked.get(bucket)!;
    if (follows(bucket) && JSON.stringify(told.tracks.get(bucket)) !== JSON.stringify(meta)) {
      frames.push({ type: "track", bucket, meta });
      told.tracks.set(bucket, meta);
    }
  }
  return { frames };
}

function sameSet(a: ReadonlySet<string> | undefined, b: ReadonlySet<string>): boolean {
  return a !== undefined && a.size === b.size && [...a].every((x) => b.has(x));
}
