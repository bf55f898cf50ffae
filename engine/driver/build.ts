/**
 * Image builds go through the engine's CLI (`podman build` / `docker build`): neither engine's REST build endpoint
 * reads a local context folder without us tarring it, and the CLI's output is what users know how to read.
 * node:child_process rather than dax: dax's `.timeout()` resolved a timed-out `podman build` with exit code 0, and a
 * build must be stopped as a process group (SIGTERM, then SIGKILL) on expiry.
 *
 * Known leak (podman): a build stopped mid-RUN leaves its buildah working container (`podman ps --external`) and
 * the RUN step's process, which runs in its own session, until that step ends by itself.
 */
import { spawn } from "node:child_process";
import { isAbsolute, join } from "node:path";
import { EvolveError } from "../errors.ts";
import type { EngineKind } from "./types.ts";

/** Lines of build output carried in a `build_failed` message. */
const TAIL_LINES = 30;

export interface BuildOptions {
  context: string;
  dockerfile?: string;
  tag: string;
  labels: Record<string, string>;
  timeoutMs: number;
  log?: (line: string) => void;
}

/**
 * Builds an image with the engine's CLI. `socket` is the REST socket in use, so `docker build` talks to the same
 * daemon. Throws `build_timeout` when the build runs past `timeoutMs` (the CLI is killed) and `build_failed` with
 * the last lines of output otherwise.
 */
export async function cliBuild(kind: EngineKind, socket: string, opts: BuildOptions): Promise<void> {
  const dockerfile = opts.dockerfile ? (isAbsolute(opts.dockerfile) ? opts.dockerfile : join(opts.context, opts.dockerfile)) : join(opts.context, "Dockerfile");
  const args = ["build", "-f", dockerfile, "-t", opts.tag];
  // Docker's classic builder keeps the container of a failed step (podman removes it by default): no leftovers.
  if (kind === "docker") args.push("--force-rm");
  for (const [k, v] of Object.entries(opts.labels)) args.push("--label", `${k}=${v}`);
  args.push(opts.context);

  const tail: string[] = [];
  const onLine = (line: string) => {
    tail.push(line);
    if (tail.length > TAIL_LINES) tail.shift();
    opts.log?.(line);
  };
  const env = kind === "docker" ? { ...process.env, DOCKER_HOST: `unix://${socket}` } : process.env;
  // Its own process group, so a timeout stops the CLI and whatever it forked.
  const child = spawn(kind, args, { env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  // One line splitter per stream; both feed the same log, as users read it.
  for (const stream of [child.stdout, child.stderr]) {
    let partial = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      partial += chunk;
      const lines = partial.split(/\r?\n/);
      partial = lines.pop() ?? "";
      for (const l of lines) onLine(l);
    });
    stream.on("end", () => partial && onLine(partial));
  }
  let timedOut = false;
  const signalGroup = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // already gone
    }
  };
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    signalGroup("SIGTERM");
    killTimer = setTimeout(() => signalGroup("SIGKILL"), 3000);
  }, opts.timeoutMs);
  const code = await new Promise<number>((resolve, reject) => {
    child.on("error", (e) => reject(new EvolveError("build_failed", `cannot run ${kind} build: ${e.message}`, `install ${kind} or choose another engine`, 2)));
    child.on("close", (c, sig) => resolve(c ?? (sig ? 128 : 1)));
  }).finally(() => {
    clearTimeout(timer);
    clearTimeout(killTimer);
  });
  if (timedOut) {
    throw new EvolveError(
      "build_timeout",
      `building ${opts.tag} took longer than ${Math.round(opts.timeoutMs / 1000)} s and was stopped`,
      "raise [environment] build_timeout_sec in task.toml, or make the Dockerfile faster (e.g. a prebuilt base image)",
      1,
    );
  }
  if (code !== 0) {
    throw new EvolveError(
      "build_failed",
      `building ${opts.tag} failed (exit ${code}):\n${tail.join("\n")}`,
      `fix environment/Dockerfile; reproduce with: ${kind} ${args.map(shellQuote).join(" ")}`,
      1,
    );
  }
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
