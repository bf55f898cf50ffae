/**
 * Finding the engine's REST socket, and for podman starting its service when none answers. There is no systemd on
 * our machines, so `podman system service` is started detached on a per-user socket (log under `<home>/run`) and
 * reused by every later evolve process (it exits by itself after 5 idle minutes and is started again on demand).
 */
import { spawn } from "node:child_process";
import { accessSync, closeSync, constants, mkdirSync, openSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { EvolveError } from "../errors.ts";
import { ping } from "./rest.ts";
import type { EngineKind } from "./types.ts";
import { formatDuration } from "../duration.ts";

/** How to start a Docker daemon by hand on a machine without systemd (toolchain.md). */
export const DOCKERD_HINT =
  "start dockerd: `dockerd -H unix:///run/evolve-docker.sock --data-root /var/lib/evolve-docker --exec-root /run/evolve-docker " +
  "--pidfile /run/evolve-docker.pid &` then `export DOCKER_HOST=unix:///run/evolve-docker.sock` (or use --engine podman)";

/** The full path of `bin` on PATH, or undefined. */
export function which(bin: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, bin);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The path of a `unix://…` host URL, or undefined for other schemes. */
export function unixPath(hostUrl: string | undefined): string | undefined {
  if (!hostUrl) return undefined;
  if (hostUrl.startsWith("unix://")) return hostUrl.slice("unix://".length);
  if (hostUrl.startsWith("/")) return hostUrl;
  return undefined;
}

/**
 * The socket podman's service listens on when evolve starts it: one per user, not per home, so many homes (test
 * runs, scratch homes) share one service instead of each leaving a service behind for its idle period. It lives in
 * $XDG_RUNTIME_DIR, else in a 0700 folder of ours under the temp dir (a socket there from another user is refused).
 */
export function podmanServiceSocket(_home: string): string {
  const uid = process.getuid?.() ?? 0;
  const dir = process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, "evolve") : join(tmpdir(), `evolve-${uid}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = statSync(dir);
  if (st.uid !== uid || (st.mode & 0o077) !== 0) {
    throw new EvolveError("engine_unavailable", `${dir} is not a private folder of this user`, `remove ${dir} (it must be owned by uid ${uid}, mode 0700)`);
  }
  return join(dir, "podman.sock");
}

/** Candidate sockets for podman, in order of preference. */
function podmanCandidates(home: string): string[] {
  const out: string[] = [];
  const fromEnv = unixPath(process.env.CONTAINER_HOST);
  if (fromEnv) out.push(fromEnv);
  out.push("/run/podman/podman.sock");
  if (process.env.XDG_RUNTIME_DIR) out.push(join(process.env.XDG_RUNTIME_DIR, "podman", "podman.sock"));
  out.push(podmanServiceSocket(home));
  return out;
}

/**
 * A podman socket that answers: an existing one if any, else a service evolve starts on `podmanServiceSocket`
 * (log in `<home>/run/podman-service.log`). Throws `engine_not_found` without a podman binary and
 * `engine_unavailable` when the service does not come up.
 */
export async function ensurePodmanSocket(home: string): Promise<string> {
  const envSocket = unixPath(process.env.CONTAINER_HOST);
  if (process.env.CONTAINER_HOST && !envSocket) {
    throw new EvolveError("engine_unavailable", `CONTAINER_HOST=${process.env.CONTAINER_HOST} is not a unix:// socket`, "unset CONTAINER_HOST or point it at a local unix:// socket");
  }
  for (const s of podmanCandidates(home)) if (await ping(s, 500)) return s;
  if (envSocket) {
    throw new EvolveError("engine_unavailable", `nothing answers on CONTAINER_HOST=${process.env.CONTAINER_HOST}`, `start it: podman system service --time=300 ${process.env.CONTAINER_HOST} & (or unset CONTAINER_HOST)`);
  }
  return startPodmanService(home);
}

/**
 * Starts `podman system service` detached on the per-user `podmanServiceSocket` (log in `<home>/run`) and waits
 * (≤ 5 s) until it answers.
 */
export async function startPodmanService(home: string): Promise<string> {
  const bin = which("podman");
  if (!bin) throw notFound("podman");
  const runDir = join(home, "run");
  mkdirSync(runDir, { recursive: true });
  const socket = podmanServiceSocket(home);
  if (await ping(socket, 500)) return socket;
  // Two evolve processes may race to start it: the loser's service takes the socket over, which is harmless.
  const log = openSync(join(runDir, "podman-service.log"), "a");
  try {
    // Its own working folder: the service outlives us, and conmon drops files such as `oom` into the cwd it inherits.
    const child = spawn(bin, ["system", "service", "--time=300", `unix://${socket}`], { detached: true, cwd: dirname(socket), stdio: ["ignore", log, log] });
    child.on("error", () => {});
    child.unref();
  } finally {
    closeSync(log);
  }
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (await ping(socket, 500)) return socket;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new EvolveError(
    "engine_unavailable",
    `podman system service did not answer on ${socket} within ${formatDuration(5000)}`,
    `see ${join(runDir, "podman-service.log")}; run \`podman info\` to check podman works, then \`evolve doctor\``,
  );
}

/** Docker's socket: DOCKER_HOST or /var/run/docker.sock, which must answer (evolve never starts dockerd). */
export async function ensureDockerSocket(): Promise<string> {
  const host = process.env.DOCKER_HOST;
  const socket = host ? unixPath(host) : "/var/run/docker.sock";
  if (!socket) throw new EvolveError("engine_unavailable", `DOCKER_HOST=${host} is not a unix:// socket`, DOCKERD_HINT);
  if (await ping(socket, 1000)) return socket;
  throw new EvolveError("engine_unavailable", `no Docker daemon answers on ${socket}`, DOCKERD_HINT);
}

/** The error for a missing engine binary, naming how to install it. */
export function notFound(kind: EngineKind): EvolveError {
  const pkg = kind === "podman" ? "podman runc" : "docker.io";
  return new EvolveError("engine_not_found", `${kind} is not installed (not on PATH)`, `install it: apt-get install -y ${pkg}${kind === "podman" ? " (then `evolve doctor`)" : ""}`);
}
