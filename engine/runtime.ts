/**
 * The one place that knows which JavaScript runtime is executing: Bun (also as the compiled `dist/evolve`),
 * Deno (`deno run -A --node-modules-dir=manual main.ts`) or Node (vitest). Everything else uses `node:` built-ins
 * and web standards and asks this module when the runtimes really differ.
 */

/** The runtime executing this process. */
export type RuntimeName = "bun" | "deno" | "node";

import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

declare const Bun: unknown;
declare const Deno: unknown;

/** Which runtime is running us; checked by global, since Bun and Deno both also expose `process`. */
export const runtime: RuntimeName = typeof Bun !== "undefined" ? "bun" : typeof Deno !== "undefined" ? "deno" : "node";

let onBrokenPipe: ((stream: "stdout" | "stderr") => void) | undefined;

/** Whether an error is a write to a closed pipe (or to a stream already destroyed by one). */
export function isBrokenPipe(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "EPIPE" || code === "ERR_STREAM_DESTROYED";
}

/**
 * Makes a closed stdout/stderr (`evolve … | head`) end the process quietly with status 0 instead of a stack
 * trace, unless a handler from {@link deferBrokenPipe} is in place. Node, Deno and Bun (1.4) report EPIPE as an
 * 'error' event on the stream; older Bun threw it from write(), which deferBrokenPipe's callers also catch.
 */
export function exitQuietlyOnBrokenPipe(): void {
  for (const [name, stream] of [["stdout", process.stdout], ["stderr", process.stderr]] as const) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (!isBrokenPipe(err)) throw err;
      if (onBrokenPipe) return onBrokenPipe(name);
      process.exit(0);
    });
  }
}

/**
 * While work that must not be cut short runs (a job: exiting would leave its boxes behind), a closed stdout or
 * stderr calls `handler` instead of exiting. Returns the function that restores exiting.
 */
export function deferBrokenPipe(handler: (stream: "stdout" | "stderr") => void): () => void {
  onBrokenPipe = handler;
  return () => {
    if (onBrokenPipe === handler) onBrokenPipe = undefined;
  };
}

/** Whether a stream is an interactive terminal (colour and progress only go to TTYs). */
export function isTTY(stream: { isTTY?: boolean }): boolean {
  return Boolean(stream.isTTY);
}

// the serve contract is the gateway's (it takes serve injected, and may not import from here)
export type { FetchHandler, GatewayListenAt as ListenAt, GatewayListener as HttpListener } from "../gateway/serve.ts";
import type { FetchHandler, GatewayListenAt as ListenAt, GatewayListener as HttpListener } from "../gateway/serve.ts";

/** Seconds node:http keeps an idle keep-alive connection. */
const IDLE_KEEPALIVE_S = 65;

/**
 * Serves a fetch handler over HTTP/1.1. Bun gets its native Bun.serve: the gateway's added latency and throughput
 * goals (issue 4 §6) are out of reach through Bun's node:http layer. Node (vitest) and Deno get node:http through
 * @hono/node-server.
 */
export async function serveFetch(handler: FetchHandler, at: ListenAt): Promise<HttpListener> {
  return runtime === "bun" ? serveWithBun(handler, at) : serveWithNodeHttp(handler, at);
}

interface BunServer {
  port?: number;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
}

function serveWithBun(handler: FetchHandler, at: ListenAt): HttpListener {
  const bun = (globalThis as unknown as { Bun: { serve(o: Record<string, unknown>): BunServer } }).Bun;
  const where = "path" in at ? { unix: at.path } : { hostname: at.host ?? "127.0.0.1", port: at.port ?? 0 };
  const server = bun.serve({
    ...where,
    // Bun's idleTimeout also cuts a response stream that is quiet for that long (a model thinking for minutes), and
    // a per-request server.timeout(req, 0) does not hold once the body streams (checked on Bun 1.4.5), so it is
    // off. Clients are local agents whose sockets close when they exit, and close() cuts whatever is left.
    idleTimeout: 0,
    // the gateway refuses an oversized body itself, in the provider's error shape (gateway.toml max_request_body_mb);
    // Bun's own 128 MB limit would answer first with an empty 413
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    fetch: (req: Request) => handler(req),
  });
  const close = async () => {
    await server.stop(true);
  };
  if ("path" in at) return { url: `unix:${at.path}`, path: at.path, close };
  const host = at.host ?? "127.0.0.1";
  const shown = host.includes(":") ? `[${host}]` : host;
  return { url: `http://${shown}:${server.port}`, port: server.port, close };
}

async function serveWithNodeHttp(handler: FetchHandler, at: ListenAt): Promise<HttpListener> {
  const { createServer } = await import("node:http");
  const { getRequestListener } = await import("@hono/node-server");
  const server = createServer(getRequestListener(handler));
  // SDK clients keep connections alive between calls; node's default 5 s would drop them under a slow agent
  server.keepAliveTimeout = IDLE_KEEPALIVE_S * 1000;
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

/** Whether this process is the compiled single binary (`dist/evolve`): Bun serves its sources from `/$bunfs/`. */
export function isCompiledBinary(): boolean {
  return runtime === "bun" && /\/\$bunfs\/|\/~BUN\//.test(import.meta.url);
}

/**
 * The evolve binary a box can run (the conductor harness mounts it): this process itself when it is the compiled
 * binary, else `$EVOLVE_BINARY`, else `dist/evolve` of the repository these sources are in when it has been built;
 * undefined when there is none (`npm run build` makes one).
 */
export function evolveBinary(env: Record<string, string | undefined> = process.env): string | undefined {
  if (isCompiledBinary()) return process.execPath;
  if (env.EVOLVE_BINARY) return env.EVOLVE_BINARY;
  const built = new URL("../dist/evolve", import.meta.url);
  if (built.protocol !== "file:") return undefined;
  const path = fileURLToPath(built);
  return existsSync(path) ? path : undefined;
}
