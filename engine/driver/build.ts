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
import { readFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { EvolveError } from "../errors.ts";
import { guardNeeded, type GuardPolicy } from "./hostguard.ts";
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
  /** The network RUN steps get (the guarded egress network); the engine's default when absent. */
  network?: string;
  /** What builds may reach beyond the internet; decides whether ADD may fetch URLs (see remoteAdds). */
  guard?: GuardPolicy;
}

/** A source of ADD the builder fetches itself: a URL or a git remote. */
const REMOTE = /^([a-z][a-z0-9+.-]*:\/\/|git@)/i;

/**
 * The `ADD <url>` (and git remote) sources of a Dockerfile, with their line numbers. Both builders fetch those on
 * the host, in the engine's own process, so no network given to RUN applies to them: `ADD http://127.0.0.1:…`
 * reads the host's loopback whatever the task's network mode. Line continuations, comments and the JSON form are
 * understood; a parser `escape` directive other than the backslash is not (such a file is read line by line).
 */
export function remoteAdds(dockerfile: string): { line: number; source: string }[] {
  const out: { line: number; source: string }[] = [];
  const lines = dockerfile.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i];
    while (/\\\s*$/.test(text) && i + 1 < lines.length) {
      i++;
      const next = lines[i];
      // comment lines inside a continued instruction are dropped by the builder
      if (/^\s*#/.test(next)) {
        text = text.replace(/\\\s*$/, "\\");
        continue;
      }
      text = text.replace(/\\\s*$/, " ") + next;
    }
    const m = /^\s*ADD\s+(.*)$/i.exec(text);
    if (!m) continue;
    let rest = m[1].trim();
    while (/^--[a-z-]+(=\S*)?\s/i.test(rest)) rest = rest.replace(/^--[a-z-]+(=\S*)?\s+/i, "");
    let args: string[];
    try {
      args = rest.startsWith("[") ? (JSON.parse(rest) as string[]) : rest.split(/\s+/);
    } catch {
      args = rest.split(/\s+/);
    }
    for (const src of args.slice(0, -1)) if (REMOTE.test(String(src))) out.push({ line: start + 1, source: String(src) });
  }
  return out;
}

/**
 * Builds an image with the engine's CLI. `socket` is the REST socket in use, so `docker build` talks to the same
 * daemon. Throws `build_timeout` when the build runs past `timeoutMs` (the CLI is killed) and `build_failed` with
 * the last lines of output otherwise.
 */
export async function cliBuild(kind: EngineKind, socket: string, opts: BuildOptions): Promise<void> {
  const dockerfile = opts.dockerfile ? (isAbsolute(opts.dockerfile) ? opts.dockerfile : join(opts.context, opts.dockerfile)) : join(opts.context, "Dockerfile");
  if (opts.guard && guardNeeded(opts.guard)) {
    let text = "";
    try {
      text = readFileSync(dockerfile, "utf8");
    } catch {
      // a missing Dockerfile is the build's own error, with the builder's words
    }
    const remote = remoteAdds(text)[0];
    if (remote) {
      throw new EvolveError(
        "build_failed",
        `building ${opts.tag} refused: ${dockerfile} line ${remote.line}: ADD ${remote.source} would be fetched by the builder on this host, outside the network builds get (no host services, no private ranges)`,
        "download it in a RUN step instead (curl/wget/git run on the build's guarded network), or open [network] in $EVOLVE_HOME/config.toml (README: Configuration)",
        1,
      );
    }
  }
  const args = ["build", "-f", dockerfile, "-t", opts.tag];
  // RUN steps join the guarded egress network: the internet, not the host's services (hostguard.ts)
  if (opts.network) args.push("--network", opts.network);
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
