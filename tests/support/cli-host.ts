/**
 * The CLI for tests, without a Bun start-up per call: `evolve(args)` used to spawn `bun main.ts` each time, and
 * each spawn paid the runtime's start and the engine's import (most of a call's cost; the unit tier makes ~170).
 * A host is one Bun process per test file (cli-host-server.ts) that runs each invocation in-process through the
 * same entry main.ts uses, with the invocation's own argv, env and cwd, and answers exit status, stdout and stderr.
 *
 * Calls stay synchronous, like spawnSync: the request goes through a worker thread while this thread waits on an
 * Atomics cell, so test bodies read the same as with a child process.
 *
 * Not for what needs a process of its own: a TTY, a signal, a crash that must not take the test down (a store file
 * LMDB must not map), a pipe into `head`, a long-running server, or two invocations at once. Those spawn.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { MessageChannel, receiveMessageOnPort, Worker } from "node:worker_threads";

/** What an invocation showed, as spawnSync reports a child's. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Why nothing ran (a working directory that is not there), as spawnSync's `error`. */
  error?: string;
  /** The host's own listener count after undoing the call (a leak shows as growth between calls). */
  listeners?: number;
}

export interface CliHost {
  /** Runs `evolve <args>` in the host with exactly `env` (not merged with anything) in `cwd`. */
  run(args: string[], opts: { env: Record<string, string | undefined>; cwd?: string; timeoutMs?: number }): CliResult;
  /** Whether the host process is still there to answer (false once it died or was closed). */
  alive(): boolean;
  /** Ends the host process. */
  close(): void;
}

const ROOT = resolve(__dirname, "..", "..");
const BUN = join(ROOT, "node_modules/.bin/bun");

// the worker is plain JS (nothing transforms a worker's code): it posts one HTTP request over the host's socket per
// message, retrying a refused connection while the host starts, and wakes the waiting thread when the answer is in
const WORKER = String.raw`
const { workerData } = require("node:worker_threads");
const http = require("node:http");
const { port, cell, socket } = workerData;
function post(body, deadline) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, path: "/", method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      res.on("error", reject);
    });
    req.on("error", (e) => {
      if ((e.code === "ENOENT" || e.code === "ECONNREFUSED") && Date.now() < deadline) setTimeout(() => post(body, deadline).then(resolve, reject), 20);
      else reject(e);
    });
    req.end(body);
  });
}
port.on("message", async ({ body, timeoutMs }) => {
  let answer;
  try {
    answer = { ok: true, text: await post(body, Date.now() + timeoutMs) };
  } catch (e) {
    answer = { ok: false, error: String(e && e.stack || e) };
  }
  port.postMessage(answer);
  Atomics.store(cell, 0, 1);
  Atomics.notify(cell, 0);
});
`;

/** Starts a host (lazily: the process starts now, the first call waits until it listens). */
export function cliHost(): CliHost {
  const dir = mkdtempSync(join(tmpdir(), "evolve-cli-host-"));
  const socket = join(dir, "host.sock");
  const child: ChildProcess = spawn(BUN, [join(ROOT, "tests/support/cli-host-server.ts"), socket], {
    cwd: ROOT,
    env: process.env,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(WORKER, { eval: true, workerData: { port: port2, cell, socket }, transferList: [port2] });
  worker.unref();
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    child.kill("SIGKILL");
    void worker.terminate();
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", close);
  return {
    run(args, opts) {
      if (closed) throw new Error("the CLI host is closed");
      const env = Object.fromEntries(Object.entries(opts.env).filter((e): e is [string, string] => e[1] !== undefined));
      const timeoutMs = opts.timeoutMs ?? 60_000;
      Atomics.store(cell, 0, 0);
      port1.postMessage({ body: JSON.stringify({ argv: [BUN, join(ROOT, "main.ts"), ...args], env, cwd: opts.cwd ?? ROOT }), timeoutMs });
      if (Atomics.wait(cell, 0, 0, timeoutMs + 5_000) === "timed-out") throw new Error(`the CLI host gave no answer to evolve ${args.join(" ")} within ${timeoutMs} ms`);
      const msg = receiveMessageOnPort(port1)?.message as { ok: boolean; text?: string; error?: string } | undefined;
      if (!msg?.ok) {
        // the child's exit is not seen yet (this thread waited), but a connection cut mid-answer is the host dying
        const died = /socket hang up|ECONNRESET/.test(msg?.error ?? "") ? " (the host process died during the call: a crash, e.g. a signal)" : "";
        throw new Error(`the CLI host failed on evolve ${args.join(" ")}${died}: ${msg?.error ?? "no answer"}`);
      }
      return JSON.parse(msg.text!) as CliResult;
    },
    alive: () => !closed && child.exitCode === null && child.signalCode === null,
    close,
  };
}
