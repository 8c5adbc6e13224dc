/**
 * The notes web app: lists, notes with images, sharing, who else is looking at a list, a status
 * line and the writes the server refused. The rows live in the browser (per user: SQLite on the
 * origin-private file system, or IndexedDB where the browser has none), and so do the images and
 * their queued uploads (an IndexedDB database per user), so the app works offline and its queued
 * writes and uploads survive a reload; `app.ts` renders them. A store an earlier version left in
 * IndexedDB is moved into SQLite once, with its queued writes.
 * The tabs of one user share one client (`@engine/client`'s `tabs`): one syncs, the others go
 * through it. The client syncs only what is open: the user's index of lists always, and a list's
 * notes while a tab has it selected (`app.ts`). A list let go leaves the device with the next
 * pull (the bucket TTL is 0): the TTL keeps a list the user lost as long as one let go, and a
 * list a member leaves, or is removed from, must leave the device at once.
 *
 * This module signs the user in and out (`session.ts`): a token from a sign-in link
 * (`/#token=…`, also when the page is already open), from the form, or from the development
 * sign-in. A link for another user than the one signed in asks first.
 */

import {
  actorOfToken,
  createEngineBlobs,
  createEngineClient,
  indexedDbBlobStore,
  indexedDbStore,
  migrateClientStore,
  webSqlitePersistence,
  type ClientStore,
  type EngineBlobs,
} from "@engine/client";
import { schema } from "@engine/notes";
import { optimistic } from "@engine/notes/optimistic";

import { IMAGE_MAX_BYTES, NotesApp, SessionToken, type NotesClient } from "./app.js";
import { el } from "./dom.js";
import { ask, forgetToken, onTokenStoredElsewhere, signInPage, storedToken, storeToken, takeLinkToken, tokenProblem } from "./session.js";

const root = document.getElementById("app")!;
/**
 * The rules the client always syncs: the user's lists (`own`), its memberships with their lists'
 * titles (`memberships`, what the sidebar shows) and its invitations. A list's own bucket
 * (`shared`, with its notes) syncs while it is selected.
 */
const ALWAYS_SYNCED = ["own", "memberships", "invitations"] as const;

/** The running app's client, blobs and token, once signed in. */
let running: { client: NotesClient; blobs: EngineBlobs; token: SessionToken } | undefined;
/** Whether a client is being opened (or is open): `start` opens one at most once. */
let opening = false;

const storeName = (userId: string) => `engine-notes-${userId}`;
const blobStoreName = (userId: string) => `engine-notes-blobs-${userId}`;

/** Delete IndexedDB database `name`, whatever happens. */
const deleteDatabase = (name: string) =>
  new Promise((resolve) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = request.onerror = request.onblocked = resolve;
  });

/**
 * The store of `userId`'s rows: SQLite on OPFS (IndexedDB without it), an old IndexedDB store
 * moved in by the tab that opens it. The tabs of the user share it through one client: only the
 * leading tab opens the database.
 */
async function openStore(userId: string): Promise<ClientStore> {
  const name = storeName(userId);
  return webSqlitePersistence({
    name,
    fallback: () => indexedDbStore(name),
    opened: async (store) => {
      const old = indexedDbStore(name);
      await migrateClientStore(old, store);
      await old.close();
    },
  });
}

/** Remove `userId`'s stores: the SQLite database and the IndexedDB one. */
async function removeStores(userId: string): Promise<void> {
  const name = storeName(userId);
  const store = await webSqlitePersistence({ name, busyTimeoutMs: 1_000 }).catch(() => undefined);
  await store?.clear();
  await store?.close();
  await deleteDatabase(name);
}

/** Sign in with `token`: the same user keeps the page (a fresh token), another reloads it. */
function signIn(token: string): void {
  const actor = actorOfToken(token);
  if (!actor) return;
  storeToken(token);
  if (running?.client.actor.userId === actor.userId) {
    running.token.set(token);
    void running.client.sync().catch(() => undefined);
    return;
  }
  if (running) location.reload();
  else void start();
}

async function signOut(): Promise<void> {
  const current = running;
  running = undefined;
  forgetToken();
  if (current) {
    await Promise.all([current.blobs.close(), current.client.close()]);
    const userId = current.client.actor.userId;
    await Promise.all([removeStores(userId), deleteDatabase(blobStoreName(userId))]);
  }
  location.replace(location.pathname);
}

/** A sign-in link in the address: taken at once, or after asking when it names someone else. */
async function followLink(): Promise<void> {
  const link = takeLinkToken();
  if (link === undefined) return;
  const problem = tokenProblem(link);
  const current = storedToken();
  const currentUser = current ? actorOfToken(current)?.userId : undefined;
  if (problem) {
    if (!running) signInPage(root, signIn, `The sign-in link does not work. ${problem}`);
    return;
  }
  const linkUser = actorOfToken(link)!.userId;
  if (currentUser !== undefined && currentUser !== linkUser) {
    const switchUser = await ask(
      `This link signs you in as ${linkUser}. You are signed in as ${currentUser}. If you switch, what you write goes to ${linkUser}'s account.`,
      `Switch to ${linkUser}`,
      `Stay as ${currentUser}`,
    );
    if (!switchUser) return;
  }
  signIn(link);
}

async function start(): Promise<void> {
  const stored = storedToken();
  const actor = stored ? actorOfToken(stored) : undefined;
  if (!stored || !actor) return signInPage(root, signIn);
  if (opening) return;
  opening = true;
  const token = new SessionToken(stored);
  // An expired token is known to be refused: say so at once, with the local copy open.
  if (tokenProblem(stored)) token.refused = true;
  const client: NotesClient = await createEngineClient({
    url: location.origin,
    schema,
    auth: token,
    optimistic,
    store: await openStore(actor.userId),
    pullIntervalMs: 10_000,
    syncOpen: ALWAYS_SYNCED,
  });
  const blobs = createEngineBlobs(client, {
    store: indexedDbBlobStore(blobStoreName(actor.userId)),
    maxSize: IMAGE_MAX_BYTES,
    // An image another member is still uploading is looked for again at least this often.
    retry: { backoffBaseMs: 500, backoffMaxMs: 10_000 },
  });
  running = { client, blobs, token };
  new NotesApp(root, client, token, { signInAgain: signIn, signOut }, blobs).start();
}

async function boot(): Promise<void> {
  await followLink();
  if (!opening && !root.querySelector("[data-testid=sign-in]")) await start();
}

// The page opens from the service worker's cache, offline or with a server that does not answer.
if ("serviceWorker" in navigator) void navigator.serviceWorker.register("./sw.js").catch(() => undefined);
// A sign-in link opened in this tab while it is open.
addEventListener("hashchange", () => void followLink());
// Another tab signed in again as this user: the tabs share one client, and whichever leads sends
// every tab's writes with its own token, so each tab takes the fresh one.
onTokenStoredElsewhere((token) => {
  if (running && actorOfToken(token)?.userId === running.client.actor.userId) running.token.set(token);
});
root.replaceChildren(el("p", { class: "loading", "aria-busy": "true" }, "Opening your notes…"));
void boot();
