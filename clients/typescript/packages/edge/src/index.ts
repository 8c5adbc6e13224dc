/**
 * `@engine/edge`: realtime through an edge relay on Cloudflare Workers.
 *
 * - `createEdgeSubscribeSource`: the client's realtime source that connects to the relay with
 *   tickets from the sync server, and long-polls it when upgrades are refused on the way.
 * - `@engine/edge/worker`: the relay itself, a Worker and its Durable Object `BucketRelay`
 *   (`wrangler.toml` beside this package deploys it).
 * - `signTicket`, `checkTicket`, `sign`, `verify`: the signatures the server and the relay share.
 */

export { createEdgeSubscribeSource } from "./source.js";
export type { EdgeSubscribeSourceOptions, EdgeTickets } from "./source.js";
export { checkTicket, sign, signTicket, SIGNATURE_HEADER, verify } from "./signing.js";
