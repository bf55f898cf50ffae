/**
 * The one place that knows which JavaScript runtime is executing: Bun (also as the compiled `dist/evolve`),
 * Deno (`deno run -A --node-modules-dir=manual main.ts`) or Node (vitest). Everything else uses `node:` built-ins
 * and web standards and asks this module when the runtimes really differ.
 */

/** The runtime executing this process. */
export type RuntimeName = "bun" | "deno" | "node";

declare const Bun: unknown;
declare const Deno: unknown;

/** Which runtime is running us; checked by global, since Bun and Deno both also expose `process`. */
export const runtime: RuntimeName = typeof Bun !== "undefined" ? "bun" : typeof Deno !== "undefined" ? "deno" : "node";

/**
 * Makes a closed stdout/stderr (`evolve … | head`) end the process quietly with status 0 instead of a stack
 * trace. Node and Deno report EPIPE as an 'error' event on the stream; Bun may throw it from write().
 */
export function exitQuietlyOnBrokenPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE" || err.code === "ERR_STREAM_DESTROYED") process.exit(0);
      throw err;
    });
  }
}

/** Whether a stream is an interactive terminal (colour and progress only go to TTYs). */
export function isTTY(stream: NodeJS.WriteStream): boolean {
  return Boolean(stream.isTTY);
}

/** Where an HTTP server listens: a TCP address (port 0 = any free port) or a unix socket path. */
export type ListenAt = { host?: string; port?: number } | { path: string };

/** A listening HTTP server. */
export interface HttpListener {
  /** `http://host:port` for TCP (no trailing slash), `unix:<path>` for a socket. */
  url: string;
  port?: number;
  path?: string;
  /** Stops listening and cuts open connections (a held stream would otherwise keep close() waiting forever). */
  close(): Promise<void>;
}

/** A fetch-style handler, as hono's `app.fetch`. */
export type FetchHandler = (req: Request) => Response | Promise<Response>;

/**
 * Serves a fetch handler over HTTP/1.1. Every runtime gets node:http through @hono/node-server here (Bun and Deno
 * implement node:http), so a server behaves the same under the binary and under vitest.
 */
export async function serveFetch(handler: FetchHandler, at: ListenAt): Promise<HttpListener> {
  const { createServer } = await import("node:http");
  const { getRequestListener } = await import("@hono/node-server");
  const server = createServer(getRequestListener(handler));
  // SDK clients keep connections alive between calls; node's default 5 s would drop them under a slow agent
  server.keepAliveTimeout = 65_000;
  const close = () =>
    new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    });
  return await new Promise<HttpListener>((resolve, reject) => {
    server.once("error", reject);
    if ("path" in at) {
      server.listen(at.path, () => resolve({ url: `unix:${at.path}`, path: at.path, close }));
      return;
    }
    const host = at.host ?? "127.0.0.1";
    server.listen(at.port ?? 0, host, () => {
      const port = (server.address() as { port: number }).port;
      const shown = host.includes(":") ? `[${host}]` : host;
      resolve({ url: `http://${shown}:${port}`, port, close });
    });
  });
}
