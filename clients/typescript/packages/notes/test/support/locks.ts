/**
 * The Web Locks API (`navigator.locks.request`) for clients in one Node process, as a browser
 * gives it to the tabs of one origin: a lock goes to one request at a time, in the order asked,
 * is held until the callback's promise settles, and a request whose signal aborts before it is
 * granted rejects.
 */

import type { TabLocks } from "@engine/client";

export function webLocks(): TabLocks {
  const queues = new Map<string, (() => void)[]>();
  const held = new Set<string>();
  const next = (name: string) => {
    const grant = queues.get(name)?.shift();
    if (grant) grant();
    else held.delete(name);
  };
  return {
    request(name, options, callback) {
      return new Promise((resolve, reject) => {
        const grant = () => {
          held.add(name);
          void Promise.resolve()
            .then(() => callback({ name }))
            .then(resolve, reject)
            .finally(() => next(name));
        };
        if (!held.has(name)) {
          held.add(name);
          grant();
          return;
        }
        const queue = queues.get(name) ?? [];
        queues.set(name, queue);
        queue.push(grant);
        options.signal?.addEventListener("abort", () => {
          const at = queue.indexOf(grant);
          if (at < 0) return;
          queue.splice(at, 1);
          reject(options.signal!.reason);
        });
      });
    },
  };
}
