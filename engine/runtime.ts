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
