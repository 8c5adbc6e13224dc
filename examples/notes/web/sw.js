// The notes web app's service worker: the page, its script and its style from the network when
// it answers, from the cache when it does not, so that the app opens offline. Rows and queued
// writes live in IndexedDB, not here; the sync routes are never cached.
const CACHE = "engine-notes";
const ASSETS = ["./", "./app.js", "./app.css"];

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(ASSETS))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  const scope = new URL(self.registration.scope);
  const asset = ASSETS.map((path) => new URL(path, scope).pathname);
  if (event.request.method !== "GET" || url.origin !== scope.origin || !asset.includes(url.pathname)) return;
  event.respondWith(
    fetch(event.request)
      .then((response) => {
        if (response.ok) {
          const copy = response.clone();
          void caches.open(CACHE).then((cache) => cache.put(url.pathname, copy));
        }
        return response;
      })
      .catch(() => caches.match(url.pathname).then((cached) => cached ?? Response.error())),
  );
});
