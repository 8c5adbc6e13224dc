/** One notes server for the tests of a file: started before them, disposed of after them. */

import { afterAll, beforeAll } from "vitest";

import { NotesServer, type ServerOptions } from "./server.js";

/** The server of this file's tests (call at the top of a test file). */
export function useNotesServer(options: ServerOptions = {}): () => NotesServer {
  let server: NotesServer | undefined;
  beforeAll(async () => {
    server = await NotesServer.start(options);
  });
  afterAll(async () => {
    await server?.dispose();
  });
  return () => {
    if (!server) throw new Error("the notes server is not started yet");
    return server;
  };
}
