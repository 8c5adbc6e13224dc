/**
 * Credentials: a bearer token asked afresh for every request and every stream connection, and
 * a refresh when the server refuses it. The actor is read from the token's payload, without
 * verifying it (the server does that).
 */

import type { Actor } from "./view.js";

/** Where the client's token comes from. */
export interface AuthProvider {
  /** The bearer token to send now. */
  token(): string | Promise<string>;
  /** Get a new token after the server refused the current one. */
  refresh?(): void | Promise<void>;
}

/** A provider of a token that the app replaces as it pleases (`set`). */
export class BearerToken implements AuthProvider {
  constructor(private current: string) {}

  token(): string {
    return this.current;
  }

  /** Use `token` from the next request and the next stream connection on. */
  set(token: string): void {
    this.current = token;
  }
}

/** Credentials as the client options take them: a provider or a fixed token. */
export type AuthInput = AuthProvider | string;

export function authProvider(auth: AuthInput): AuthProvider {
  return typeof auth === "string" ? new BearerToken(auth) : auth;
}

/** The claims of a JWT's payload, or `undefined` when `token` is not a JWT. */
export function tokenClaims(token: string): Record<string, unknown> | undefined {
  const payload = token.split(".")[1];
  if (payload === undefined) return undefined;
  try {
    const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, "=")), (c) => c.charCodeAt(0));
    const claims: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return typeof claims === "object" && claims !== null ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The actor a JWT names: `sub`, `ownerId` (the user id when absent), the other claims. */
export function actorOfToken(token: string): Actor | undefined {
  const claims = tokenClaims(token);
  const userId = claims?.sub;
  if (typeof userId !== "string" || userId === "") return undefined;
  const ownerId = typeof claims!.ownerId === "string" ? claims!.ownerId : userId;
  const { sub: _sub, ownerId: _owner, ...rest } = claims!;
  return { userId, ownerId, claims: rest };
}
