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
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, relative } from "node:path";
import { EvolveError, firstLine } from "../errors.ts";
import { guardNeeded, type GuardPolicy } from "./hostguard.ts";
import type { EngineKind } from "./types.ts";
import { formatDuration } from "../duration.ts";

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
  /** What builds may reach beyond the internet: while guarded, ADD's URLs go through `fetch` (stageRemoteAdds). */
  guard?: GuardPolicy;
  fetch?: GuardedFetch;
}

/** A source of ADD the builder fetches itself: a URL or a git remote. */
const REMOTE = /^([a-z][a-z0-9+.-]*:\/\/|git@)/i;
const HTTP = /^https?:\/\//i;

/** One ADD instruction: its lines (0-based, inclusive), flags, and arguments (sources, then the destination). */
interface AddInstruction {
  start: number;
  end: number;
  flags: string[];
  args: string[];
}

/**
 * The ADD instructions of a Dockerfile. Line continuations, comments and the JSON form are understood; a parser
 * `escape` directive other than the backslash and BuildKit heredocs are not (such lines are read one by one).
 */
function addInstructions(dockerfile: string): AddInstruction[] {
  const out: AddInstruction[] = [];
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
    const flags: string[] = [];
    for (let f = /^(--[a-z-]+(?:=\S*)?)\s+/i.exec(rest); f; f = /^(--[a-z-]+(?:=\S*)?)\s+/i.exec(rest)) {
      flags.push(f[1]);
      rest = rest.slice(f[0].length);
    }
    let args: string[];
    try {
      args = rest.startsWith("[") ? (JSON.parse(rest) as unknown[]).map(String) : rest.split(/\s+/);
    } catch {
      args = rest.split(/\s+/);
    }
    out.push({ start, end: i, flags, args });
  }
  return out;
}

/**
 * The `ADD <url>` (and git remote) sources of a Dockerfile, with their line numbers. Both builders fetch those on
 * the host, in the engine's own process, so no network given to RUN applies to them: `ADD http://127.0.0.1:…`
 * would read the host's loopback whatever the task's network mode.
 */
export function remoteAdds(dockerfile: string): { line: number; source: string }[] {
  return addInstructions(dockerfile).flatMap((a) => a.args.slice(0, -1).filter((s) => REMOTE.test(s)).map((source) => ({ line: a.start + 1, source })));
}

/** Fetches `urls` into `dir` as files `0`, `1`, …, from a container on the build's guarded network; throws with the reason. */
export type GuardedFetch = (urls: string[], dir: string) => Promise<void>;

/** Where fetched ADD sources lie inside the staged context. */
const STAGED = ".evolve-add";

/** The file name ADD gives a URL's download: the last segment of its path. */
function urlFileName(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.split("/").pop() ?? "");
  return name && name !== "." && name !== ".." ? name : "index.html";
}

/**
 * Makes a build's `ADD <url>` go through the same guard as its RUN steps: the URLs are fetched by `fetch` (a
 * container on the guarded network, so a redirect to the host's loopback fails there too), into a copy of the
 * context, and each such ADD becomes a COPY of the fetched file (mode 0600 and the Last-Modified time, as ADD
 * gives them; the line count is kept, so the builder's line numbers stay the user's). Returns the staged context
 * and Dockerfile, or undefined when the Dockerfile fetches nothing. Git remotes and ADDs that mix URLs with local
 * files are refused (neither has a COPY equivalent).
 */
export async function stageRemoteAdds(context: string, dockerfile: string, fetch: GuardedFetch, log?: (l: string) => void): Promise<{ dir: string; context: string; dockerfile: string } | undefined> {
  let text: string;
  try {
    text = readFileSync(dockerfile, "utf8");
  } catch {
    return undefined; // a missing Dockerfile is the build's own error, in the builder's words
  }
  const adds = addInstructions(text).filter((a) => a.args.slice(0, -1).some((s) => REMOTE.test(s)));
  if (adds.length === 0) return undefined;
  const refuse = (a: AddInstruction, why: string) =>
    new EvolveError("build_failed", `${dockerfile} line ${a.start + 1}: ${why}`, "download it in a RUN step instead (curl/wget/git run on the build's guarded network)");
  const urls: string[] = [];
  for (const a of adds) {
    const sources = a.args.slice(0, -1);
    const git = sources.find((s) => !HTTP.test(s) && REMOTE.test(s));
    if (git) throw refuse(a, `ADD ${git}: a git or non-HTTP source would be fetched by the builder on this host, outside the network builds get`);
    if (sources.some((s) => !REMOTE.test(s))) throw refuse(a, "ADD mixes URLs and local files: give each URL an ADD of its own");
    urls.push(...sources);
  }
  const dir = mkdtempSync(join(tmpdir(), "evolve-build-"));
  try {
    const staged = join(dir, "context");
    cpSync(context, staged, { recursive: true, verbatimSymlinks: true });
    const fetched = join(staged, STAGED);
    mkdirSync(fetched, { recursive: true });
    try {
      await fetch(urls, fetched);
    } catch (e) {
      const first = adds[0];
      throw new EvolveError(
        "build_failed",
        `${dockerfile} line ${first.start + 1}: ADD of a URL is fetched on the build's guarded network (no host services, no private ranges), and that failed: ${firstLine(e)}`,
        "make the URL reachable from the internet, or open [network] in $EVOLVE_HOME/config.toml (README: Configuration)",
      );
    }
    const lines = text.split(/\r?\n/);
    let n = 0;
    for (const a of adds) {
      const dest = a.args[a.args.length - 1];
      const sources = a.args.slice(0, -1).map((url) => {
        const name = urlFileName(url);
        const got = join(fetched, String(n));
        renameSync(got, `${got}.part`);
        mkdirSync(got);
        renameSync(`${got}.part`, join(got, name));
        // ADD gives a downloaded file mode 0600; COPY keeps the source's mode
        chmodSync(join(got, name), 0o600);
        return `${STAGED}/${n++}/${name}`;
      });
      // --checksum and --keep-git-dir have no COPY meaning; --chown, --chmod and --link carry over
      const flags = a.flags.filter((f) => /^--(chown|chmod|link)\b/i.test(f));
      lines[a.start] = `COPY ${[...flags, JSON.stringify([...sources, dest])].join(" ")}`;
      for (let i = a.start + 1; i <= a.end; i++) lines[i] = "";
    }
    const ignore = join(staged, ".dockerignore");
    if (existsSync(ignore)) writeFileSync(ignore, `${readFileSync(ignore, "utf8")}\n!${STAGED}\n`);
    const rel = relative(context, dockerfile);
    const stagedDockerfile = rel.startsWith("..") || isAbsolute(rel) ? join(dir, "Dockerfile") : join(staged, rel);
    writeFileSync(stagedDockerfile, lines.join("\n"));
    log?.(`evolve: ${urls.length} ADD URL source(s) fetched on the build's guarded network: ${urls.join(", ")}`);
    return { dir, context: staged, dockerfile: stagedDockerfile };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/**
 * Builds an image with the engine's CLI. `socket` is the REST socket in use, so `docker build` talks to the same
 * daemon. Throws `build_timeout` when the build runs past `timeoutMs` (the CLI is killed) and `build_failed` with
 * the last lines of output otherwise.
 */
export async function cliBuild(kind: EngineKind, socket: string, opts: BuildOptions): Promise<void> {
  const dockerfile = opts.dockerfile ? (isAbsolute(opts.dockerfile) ? opts.dockerfile : join(opts.context, opts.dockerfile)) : join(opts.context, "Dockerfile");
  // the builder would fetch ADD's URLs on the host itself, past any guard: they are fetched on the guarded network
  const started = Date.now();
  const fetch: GuardedFetch = opts.fetch ?? (async () => {
    throw new Error("this engine has no guarded fetch");
  });
  const staged = opts.guard && guardNeeded(opts.guard) ? await stageRemoteAdds(opts.context, dockerfile, fetch, opts.log) : undefined;
  try {
    // the fetch is part of the build: its time comes out of the build's
    const rest = { ...opts, timeoutMs: Math.max(1000, opts.timeoutMs - (Date.now() - started)) };
    await runBuild(kind, socket, staged ? { ...rest, context: staged.context, dockerfile: staged.dockerfile } : rest, staged ? staged.dockerfile : dockerfile);
  } finally {
    if (staged) rmSync(staged.dir, { recursive: true, force: true });
  }
}

/** The CLI build itself, on a context that needs nothing fetched by the builder. */
async function runBuild(kind: EngineKind, socket: string, opts: BuildOptions, dockerfile: string): Promise<void> {
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
      `building ${opts.tag} took longer than ${formatDuration(opts.timeoutMs)} and was stopped`,
      "raise [environment] build_timeout_sec in task.toml, or make the Dockerfile faster (e.g. a prebuilt base image)",
    );
  }
  if (code !== 0) {
    throw new EvolveError(
      "build_failed",
      `building ${opts.tag} failed (exit ${code}):\n${tail.join("\n")}`,
      `fix environment/Dockerfile; reproduce with: ${kind} ${args.map(shellQuote).join(" ")}`,
    );
  }
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
