/**
 * The Bun side of tests/support/cli-host.ts: one long-lived process that runs CLI invocations in-process, one at a
 * time, through the same entry main.ts uses (commands/entry.ts). Each request brings its own argv, environment and
 * working directory; the answer is what a child process would have shown: exit status, stdout, stderr.
 *
 * What a real process gets fresh and this one must put back after every invocation: process.env (replaced whole,
 * not merged), the working directory, process.exitCode, the stdout/stderr writers, and every listener the command
 * added to process or to the standard streams (SIGINT handlers, the broken-pipe guard). process.exit() inside a
 * command ends that invocation with its status, not the host.
 *
 * Usage: bun tests/support/cli-host-server.ts <socket path>
 */
import pkg from "../../package.json" with { type: "json" };
import { main } from "../../commands/entry.ts";

interface HostRequest {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
}

interface Answer {
  /** null when nothing ran (see `error`), as spawnSync's status. */
  code: number | null;
  stdout: string;
  stderr: string;
  error?: string;
  /** Listeners on the process and its streams once the invocation is undone: the same after every call. */
  listeners?: number;
}

/** What a command's process.exit(code) throws here, so the invocation ends and the host lives on. */
class Exited extends Error {
  constructor(readonly code: number) {
    super(`process.exit(${code})`);
  }
}

const PROCESS_EVENTS = ["SIGINT", "SIGTERM", "SIGHUP", "exit", "beforeExit", "uncaughtException", "unhandledRejection", "warning"] as const;
const STREAM_EVENTS = ["error", "close", "finish", "drain"] as const;

type Listener = (...args: unknown[]) => void;
type Emitter = { listeners(e: string): Listener[]; removeListener(e: string, l: Listener): unknown };

function snapshot(target: Emitter, events: readonly string[]): Map<string, Set<Listener>> {
  return new Map(events.map((e) => [e, new Set(target.listeners(e))]));
}

/** Removes the listeners added to `target` since `before`. */
function restoreListeners(target: Emitter, before: Map<string, Set<Listener>>): void {
  for (const [e, had] of before) for (const l of target.listeners(e)) if (!had.has(l)) target.removeListener(e, l);
}

const text = (chunk: unknown) => (typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString("utf8"));

/** A stand-in for a stream's write(): keeps the text, calls a callback given in either position. */
function capture(into: string[]): typeof process.stdout.write {
  return ((chunk: unknown, enc?: unknown, cb?: unknown) => {
    into.push(text(chunk));
    const done = typeof enc === "function" ? enc : cb;
    if (typeof done === "function") queueMicrotask(() => (done as () => void)());
    return true;
  }) as typeof process.stdout.write;
}

function listenerCount(): number {
  let n = 0;
  for (const e of PROCESS_EVENTS) n += process.listenerCount(e);
  for (const e of STREAM_EVENTS) n += process.stdout.listenerCount(e) + process.stderr.listenerCount(e);
  return n;
}

async function invoke(req: HostRequest): Promise<Answer> {
  const out: string[] = [];
  const err: string[] = [];
  const env = { ...process.env };
  const cwd = process.cwd();
  const writes = { out: process.stdout.write, err: process.stderr.write };
  const exit = process.exit;
  const listeners = {
    process: snapshot(process as unknown as Emitter, PROCESS_EVENTS),
    stdout: snapshot(process.stdout as unknown as Emitter, STREAM_EVENTS),
    stderr: snapshot(process.stderr as unknown as Emitter, STREAM_EVENTS),
  };
  // as spawnSync: a working directory that is not there runs nothing
  try {
    process.chdir(req.cwd);
  } catch (e) {
    return { code: null, stdout: "", stderr: "", error: String(e) };
  }
  let code: number;
  try {
    for (const k of Object.keys(process.env)) delete process.env[k];
    Object.assign(process.env, req.env);
    process.exitCode = undefined;
    process.stdout.write = capture(out);
    process.stderr.write = capture(err);
    process.exit = ((code?: number) => {
      throw new Exited(code ?? 0);
    }) as typeof process.exit;
    code = await main(req.argv, pkg.version);
  } catch (e) {
    if (e instanceof Exited) code = e.code;
    else {
      // what the runtime does with an error nothing caught: print it, exit 1
      err.push(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      code = 1;
    }
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    process.exit = exit;
    process.exitCode = undefined;
    restoreListeners(process as unknown as Emitter, listeners.process);
    restoreListeners(process.stdout as unknown as Emitter, listeners.stdout);
    restoreListeners(process.stderr as unknown as Emitter, listeners.stderr);
    process.chdir(cwd);
    for (const k of Object.keys(process.env)) delete process.env[k];
    Object.assign(process.env, env);
  }
  return { code, stdout: out.join(""), stderr: err.join(""), listeners: listenerCount() };
}

// one invocation at a time: they share the process's env, cwd and streams
let queue: Promise<unknown> = Promise.resolve();
const socket = process.argv[2];
if (!socket) throw new Error("usage: bun tests/support/cli-host-server.ts <socket path>");
// a late rejection of a finished invocation must not end the host (a child process would have exited already)
process.on("unhandledRejection", () => {});

// no idle timeout: an invocation may compute for longer than Bun's default 10 s before it answers (the types
// leave idleTimeout out for a unix socket; the server takes it)
Bun.serve({
  unix: socket,
  idleTimeout: 0,
  async fetch(r: Request) {
    const req = (await r.json()) as HostRequest;
    const run = queue.then(() => invoke(req));
    queue = run.catch(() => {});
    try {
      return Response.json(await run);
    } catch (e) {
      // invoke() catches what a command throws; this is the host itself failing
      return Response.json({ code: null, stdout: "", stderr: "", error: `the CLI host failed: ${e instanceof Error ? e.stack : String(e)}` });
    }
  },
} as unknown as Parameters<typeof Bun.serve>[0]);
process.stdout.write("ready\n");
